// Package sink is actgate's finality sink: the flow of one tool call (DESIGN.md "The flow of
// one call"), enforce() (tool-use-binding §16), the dispatch journal around each invocation,
// and binding moments (DESIGN.md "Human decisions"). Transports (the MCP proxy, the HTTP
// host-loop endpoint) hand it a Call and an Invoker; nothing reaches an upstream except through
// the Invoker, and the gate calls it at most once per call and never on a deny.
//
// # The flow of one call (Gate.Handle)
//
//  1. Map the call to a non-effective AgentCandidateAct (internal/act): arguments
//     canonicalized (RFC 8785, strict profile when they fit), action digest over
//     {"tool","args"}, act id minted for the transport's session. Unmappable → EF_ACT_INVALID.
//  2. Ask policy (PolicyEvaluator, the compiled ToolPolicy). A context that ends during
//     validation is EF_060 (retryable as validation only, §23); nothing is invoked.
//  3. Deny: the decision's code, vendor-shaped (act.DenyResult), upstream never contacted.
//  4. Allow (the hot path): an in-memory chained receipt, then invoke. No authority, no journal.
//  5. Permit: sign an authority bound to act id, arguments digest, action digest, tool,
//     destination, sink id, policy epoch and expiry (internal/authority); enforce it (§16, the
//     signed binding compared with the live call's) and, in one group-committed transaction,
//     issue it, consume it and write DISPATCH_PENDING (IssueConsumeAndPend; a store that
//     cannot — a Lease store — gets Issue, then the consume with the record). Concurrently
//     with that commit the receipt log makes the dispatch receipt durable (AppendDurable):
//     neither write depends on the other, so they cost one round of fsyncs, and the act is
//     invoked only when both have succeeded. If the commit fails the call is refused and the
//     receipt log follows the dispatch receipt with a deny naming the same operation; if the
//     receipt fails the record is settled FAILED (not_dispatched) and the call refused, and if
//     even that write fails the record stays DISPATCH_PENDING, which recovery makes
//     INDETERMINATE (fail closed). Then invoke, once, with the dispatch's operation id as the
//     idempotency key; then record EXECUTED or FAILED (only on the upstream's authoritative
//     answer, or FAILED when the Invoker is certain nothing was sent) or INDETERMINATE
//     (timeout, connection loss) — durably, in a group commit, before the result is returned.
//     The outcome is written on its own deadline even if the caller is gone.
//     INVOKED is not written as a separate commit: the journal lets DISPATCH_PENDING move
//     straight to the outcome (AEB "Invoke the Frozen Action": INVOKED "or a terminal outcome"
//     must be durable before success is reported), and a crash mid-invocation leaves
//     DISPATCH_PENDING, which recovery turns into INDETERMINATE exactly as it would INVOKED.
//  6. Escalate: if a resolved binding moment granted authority for exactly this action in this
//     session, enforce and consume that authority and invoke once (as 5, but the authority was
//     issued at the resolution, and the dispatch receipt is made durable after the consume:
//     a grant's consume may be refused for ordinary reasons — a replay, a stale epoch — and
//     the receipt log then carries no dispatch receipt for it); otherwise deny with
//     EF_ESCALATION_REQUIRED and a gate-authored binding moment (Result.Moment).
//
// In audit mode (PolicyDecision.Audit) every call goes through the hot path; a call enforcement
// would refuse or escalate is recorded with receipt decision "audit-allow" and its code
// (Result.AuditCode). Audit mode is observation, never enforcement, and is never called that.
//
// # enforce() (Gate.Enforce)
//
// The five MUSTs of tool-use-binding §16, for an act presented with the arguments about to be
// sent: (1–2) recompute the action digest from the live arguments with the act's own
// canonicalization and refuse a difference with EF_SCOPE_MISMATCH; (3) find the authority the
// gate issued for the act id (or the one its binding derives to) and refuse it missing,
// expired or of another policy epoch (EF_002), consumed (EF_005), of another sink (EF_040) or
// another destination (EF_DESTINATION_MISMATCH); (4) consume it by compare-and-swap, with the
// DISPATCH_PENDING record in the same commit, before returning allow; (5) never allow when the
// context ends (EF_060) or the store fails (EF_STORE_UNAVAILABLE). Returning allow and then
// failing to consume cannot happen: allow is returned only from a successful commit. A host
// that invokes the tool itself after Enforce reports the outcome with Gate.Complete.
//
// # Retries
//
// A retry is recognised by the pair (action digest, destination) — what the retry would repeat
// — and, for returning a result, the session:
//
//   - While a dispatch of the same action at the same destination is reserved, DISPATCH_PENDING,
//     INVOKED or INDETERMINATE — in any session — a call of it is refused with EF_INDETERMINATE
//     and Result.State, and the upstream is not contacted. An effect of exactly this action may
//     be happening or have happened, and only authenticated reconciliation settles that
//     (action-evidence-boundary "prohibit a blind replay"). The check covers every session
//     because an INDETERMINATE record's owner cannot always be told after a restart, and it
//     fails closed.
//   - While the authority consumed for an EXECUTED or FAILED dispatch is unexpired (its
//     validity window), a call of the same action at the same destination in the same session
//     (the act id is a MAC over the session, so "same session" survives a restart when the
//     IDIssuer key does) is that act's retry: Result.Replayed, Allowed, the recorded result in
//     Upstream, Invoked false (tool-use-binding §9: "a fetch of the original tool_result, never
//     a second invoke").
//   - After the window, or in another session, an identical call is a new act with its own
//     authority (§23: "a new Candidate Act. That is expected").
//
// Presenting the act of a consumed authority to Enforce again is not a retry but a replay of
// the authority: EF_005 (§22 T-C). A binding-moment grant is spent by its one consume: after
// the call ran, the same call is answered as a retry within the window and needs a new binding
// moment after it.
//
// The index behind this is process-local and rebuilt from the journal at start (New runs
// journal.RecoverOnStart first, so every DISPATCH_PENDING or INVOKED record a previous process
// left becomes INDETERMINATE before anything is served, §22 T-G). Single use itself never
// depends on it: that is the store's compare-and-swap.
//
// # Binding moments
//
// Gate-authored (escalation): the envelope is built by the gate from policy — a factual
// briefing (tool, server, destination, consequence class, arguments and action digests, the
// act, the agent and the provenance; never argument values), the requested call as option 0
// and the rule's declared alternatives (RFC 7396 merge patch of alternative.args over the
// requested arguments) as the others, the first alternative recommended — and registered for
// the rule's principals. Repeating the call while that moment is pending returns the same
// moment.
//
// Agent-authored (RequestMoment, the virtual tool request_binding_moment, input
// ProposalSchema): the agent proposes synopsis, findings, recommendations, offer, stem, 2–4
// options each naming a concrete tool call, the recommended index and the open hatches. The
// gate canonicalizes each option's arguments in the strict profile and computes its
// action_digest itself (it never accepts one), asks policy about each call (a refused call
// cannot be offered; at least one must need a human; all that do must name the same
// principals), builds and validates the envelope (internal/envelope) and registers it.
//
// An option of a proposal is bound to its server's configured URL (the agent never names a
// destination); a computer-use act bound to a focused origin is authorised through the
// gate-authored moment of its escalation, which binds the live origin.
//
// Resolve(momentID, principal, resolution): the resolution must name the moment's envelope
// digest (§12.5); the moment must be unexpired and unresolved; the principal must be one the
// policy names and never the initiating agent (nor, with separation of duties, the sink); a
// principal resolves once. An option resolution is a vote: when the rule's minPrincipals
// distinct principals have chosen the same option — decided by internal/aeb's evidence chain
// (distinct principals, exclude initiator/executor) — the gate issues authority for exactly
// that option's action (bound to the escalated act's id, or an id minted for the moment's
// session, and to the option's destination) and records the resolution in the Registry, which
// refuses any later resolution of the envelope. answer, question and declined are final when
// any eligible principal makes them. Every final resolution is delivered to the moment's
// session with its next result (Result.Resolutions). declined refuses the moment's actions in
// that session with EF_MOMENT_DECLINED; question refuses a gate-authored re-escalation of them
// (the agent must reopen deliberation, §7.2), and the Registry refuses a proposal identical to
// any envelope already emitted; a new RequestMoment offering an action lifts both.
//
// Moments, grants, declines and deliveries are held in memory: after a restart an outstanding
// moment or grant is gone and the call escalates again (fail closed).
//
// # Logs and receipts
//
// Logs (logr) and receipts carry act ids, digests, codes, policy and rule names — never
// argument values (tool-use-binding §29).
package sink
