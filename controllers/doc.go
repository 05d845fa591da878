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
//     emits a Warning Event with every problem on rejection. It reads the Secrets a policy
//     references uncached, by name, and re-checks them every SecretRecheck (nothing watches
//     Secrets: a watch would need list and watch on Secrets cluster-wide).
//   - ActReconciler keeps each Act's Settled condition, reconciles INDETERMINATE acts through
//     the server's declared reconciliation endpoint (internal/reconcile: authenticated, matching,
//     fresh answers only; never the tool itself; backoff between attempts), moves an act whose
//     authority expired unconsumed to EXPIRED, denies an escalated act whose every binding
//     moment expired, and deletes settled acts (and their authority Leases) once they have been
//     settled for the retention. In-flight and INDETERMINATE acts are never deleted.
//   - AuthorityLeaseReconciler deletes authority Leases consumed or expired more than the
//     retention ago whose acts are gone or settled (expired unconsumed authorities included).
//   - BindingMomentReconciler records a resolution and moves a Pending binding moment to
//     Expired at spec.expiresAt.
//   - NamespaceAccessReconciler keeps, in each namespace holding a ToolPolicy or an Act, the
//     RoleBindings that give the authority service and the manager their namespaced rights
//     (AuthorityNamespaceRole, ManagerNamespaceRole), and removes them elsewhere.
//
// Every reconciler takes its clock (k8s.io/utils/clock) from its caller, so tests drive time
// with a fake clock; no reconciler holds package-level state. cmd/actgate's `manager`
// subcommand wires them explicitly, with SetupIndexes first.
//
// # Authority Leases
//
// Authority Leases belong to internal/authority/leasestore, whose exported names this package
// uses for their shape: leasestore.Selector() finds them (and restricts the manager's Lease
// cache), the signed expires-at annotation says when an authority expires, any consumption
// marker (spec.holderIdentity, the state label, the consumed-by annotation) means spent, and
// leasestore.Collectable says when one may be deleted. The manager may list and watch Leases
// (its label-selected cache) and delete them in governed namespaces, never update them, so it
// can never consume an authority. A Lease whose times
// cannot be read is never deleted; a Lease with any consumption marker is never called unused.
package controllers
