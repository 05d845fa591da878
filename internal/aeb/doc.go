// Package aeb is the decision engine of the Action Evidence Boundary (AEB,
// draft-schrock-action-evidence-boundary): given the executor's frozen observed action, the
// verdicts of native verifiers on the presented evidence, local policy and a snapshot of the
// durable replay state, it decides — purely and deterministically, with no I/O and no clock
// but the time it is given — each separate AEB decision:
//
//	verification → acceptance → action_match → satisfaction → authorization   (Assess)
//	→ reservation / custody                                                    (Admit)
//	→ provider_outcome + effect_relation (EXECUTED | FAILED | INDETERMINATE)    (Observe)
//	→ retry (always REFUSED once dispatched)                                    (Retry)
//	→ reconciliation (authenticated, matched, fresh, terminal)                  (Reconcile)
//
// Evaluate runs one AEB-1 case (AEB-CONSEQUENCE-CASE-v1, decoded strictly by DecodeCase) through
// those same steps; TestAEB1Conformance checks it against the 22 AEB-1 vectors.
//
// # Stop rules
//
// The evidence chain reports every dimension and the set of every failed check, because AEB-1
// keeps decisions separate (a revoked but correctly bound artifact is REJECTED and still MATCH).
// Order still matters where the spec orders it: unverified evidence takes part in no MATCH,
// nothing is SATISFIED unless all evidence is ACCEPTED and MATCH, nothing is AUTHORIZED unless
// SATISFIED. The reservation, retry and reconciliation steps are chains that stop at the first
// refusal, in the style of cert-manager's policies.Chain: after a refusal nothing else is
// consulted. Reasons are a set in ascending byte order.
//
// # Fail closed
//
// Malformed, out-of-bounds or self-contradictory input (an unknown key, a missing requirement,
// a TERMINAL record with an unknown outcome, an observation that says NOT_INVOKED) is an
// *InputError and no decision; the zero Result is not ADMIT. Only Result.Admitted permits
// invocation. Every other outcome — REFUSE, INDETERMINATE, and every post-dispatch decision —
// means: do not dispatch.
//
// # How the sink maps actgate onto AEB
//
// This package knows nothing of Kubernetes, MCP or the journal; internal/sink builds the inputs.
//
//   - Operation. OperationID is the dispatch record's operation ID (the upstream idempotency
//     key). CAID is CAIDFromDigest(ActionTypeToolCall, action digest) where the action digest is
//     the sink's own digest of {"tool","args"} from the live call. NormalizedActionDigest is the
//     digest of the full bound projection the authority names — tool, arguments digest,
//     destination (MCP server identity) and sink id — so a swapped server with identical
//     arguments has the same CAID and a different normalized action (normalized_action_mismatch).
//     ProviderID is the destination; InitiatorID the agent's identity (its service account
//     user); ExecutorID the sink's workload identity. Requirements come from the matched
//     ToolPolicy (its AEC requirement), never from the agent.
//   - Evidence. A resolved binding moment is one Evidence with Role RoleHumanAuthorization,
//     PrincipalKind PrincipalHuman and PrincipalID the Kubernetes user admission recorded as the
//     resolver; its native replay unit is the envelope digest with the chosen option, its mapped
//     CAID/digest are those the resolution's option binds. A ToolPolicy permit is one Evidence
//     with Role RolePolicyPermit, PrincipalKind PrincipalMachine and PrincipalID naming the policy
//     and its epoch. Status is the authority/credential status check (pinned source, checked
//     time, expiry). NativeVerification is the verifier's verdict on the artifact's signature.
//     A requirement with ExcludeInitiator stops the agent from approving its own call; with
//     ExcludeExecutor, the sink's own identity cannot either.
//   - Reservation. A consumed single-use authority (Lease updated with the read
//     resourceVersion, or the embedded store's record) is the reservation: Admit's RESERVED means
//     "consume now"; a successful compare-and-swap makes custody RESERVED; a 409 means another
//     consumer won — evaluate again with that state (OPERATION_REPLAY or NATIVE_EVIDENCE_REPLAY);
//     a store error or timeout is Atomicity "unavailable" (refuse). ConsumedNativeReplayUnits are
//     the authorities and resolution digests already consumed; PriorOperations are dispatch
//     records for the same operation ID.
//   - Dispatch journal states as a PriorOperation (custody, provider_outcome, effect_relation):
//     CONSUMED or DISPATCH_PENDING → INVOKING, NOT_INVOKED, NOT_OBSERVED (a live intent may
//     dispatch at any moment, so it is never free for a retry); INVOKED or INDETERMINATE →
//     INVOKING, INDETERMINATE, INDETERMINATE; EXECUTED → TERMINAL, COMMITTED,
//     OBSERVED_AS_REQUESTED (or DIVERGED when the sink observed a different effect); FAILED →
//     TERMINAL, PROVEN_NOT_COMMITTED, NOT_OBSERVED.
//   - Observation → journal. Result.Outcome gives the journal's target state: EXECUTED
//     (COMMITTED), FAILED (PROVEN_NOT_COMMITTED, which needs the provider's authoritative word:
//     an exception, timeout or lost connection is SourceTimeoutAfterDispatch, never FAILED) or
//     INDETERMINATE. A record found DISPATCH_PENDING on restart is the limiting case of a
//     timeout after dispatch.
//   - Reconciliation. The reconciler authenticates the provider or system of record, then calls
//     Reconcile with the record's DispatchedAt and the observation's time and validity; only
//     DecisionReconciled moves the journal out of INDETERMINATE. Reservation stays CONSUMED and
//     Retry stays REFUSED whatever reconciliation finds: a later attempt is a new act.
//
// # Claim boundary
//
// As AEB-1 says of itself, a passing conformance run is a self-attested result about this
// decision logic. It says nothing about the atomicity of the store the sink uses, provider truth,
// or complete mediation; those are properties of the deployment.
package aeb
