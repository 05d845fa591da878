// Package controllers holds actgate's reconcilers, one small controller per job in the shape of
// Cluster API's: Reconcile reads the object and sets up a scope, runs a list of step functions
// func(ctx, *scope) (ctrl.Result, error) that record what they observed in the scope, and a
// deferred function derives conditions from the scope (Unknown when an observation failed, never
// a guessed False) and writes status in one patch, only when it changed
// (apiequality.Semantic.DeepEqual), with an optimistic lock.
//
//   - ToolPolicyReconciler compiles each ToolPolicy with internal/policy and reports Accepted
//     (Compiled, or the first problem's reason: InvalidCEL, UnknownServer, InvalidSpec) and Ready
//     (Enforcing, Auditing, NotAccepted, SecretNotFound); it bumps status.policyEpoch by one
//     exactly when an accepted spec has a metadata.generation the status has not observed, and
//     emits a Warning Event with every problem on rejection. It watches Secrets (metadata only;
//     keys are checked with an uncached read) and re-checks the policies that reference them.
//   - ActReconciler keeps each Act's Settled condition, reconciles INDETERMINATE acts through
//     the server's declared reconciliation endpoint (internal/reconcile: authenticated, matching,
//     fresh answers only; never the tool itself; backoff between attempts), moves an act whose
//     authority Lease expired unconsumed to EXPIRED, denies an escalated act whose every binding
//     moment expired, and deletes settled acts (and their authority Leases) older than the
//     retention. In-flight and INDETERMINATE acts are never deleted.
//   - AuthorityLeaseReconciler deletes authority Leases that expired unconsumed and whose act
//     is gone or settled.
//   - BindingMomentReconciler records a resolution and moves a Pending binding moment to
//     Expired at spec.expiresAt.
//
// Every reconciler takes its clock (k8s.io/utils/clock) from its caller, so tests drive time
// with a fake clock; no reconciler holds package-level state. cmd/actgate's `manager`
// subcommand wires them explicitly, with SetupIndexes first.
//
// # Authority Leases
//
// The authority service (internal/authority's Lease store) owns authority Leases; this package
// only reads and deletes them (RBAC: get, list, watch, delete; never update, so the manager can
// never consume an authority). It relies on this much of their shape: the labels
// app.kubernetes.io/managed-by=actgate and actgate.io/act-id, the Act's status.authorityRef
// naming the Lease, expiry at spec.acquireTime + spec.leaseDurationSeconds, and consumption
// recorded by setting spec.holderIdentity. A Lease whose expiry cannot be read never expires
// here, and a Lease with a holder is never treated as unconsumed: where the shape is not as
// expected, nothing is deleted.
package controllers
