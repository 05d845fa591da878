// Package sink is actgate's finality sink: the gate between a tool call and its upstream. It
// owns the flow of one call (docs/architecture.md "Handle, step by step"), enforce()
// (tool-use-binding §16), the dispatch journal around each invocation, retries and binding
// moments (docs/architecture.md "Binding moments"). What a binding moment is (its record, table,
// stored form, quorum, briefing and the proposal parser) is in internal/sink/moment; the gate
// holds the flow around it (moment.go, proposal.go, resolve.go).
//
// The main types: Gate (New, Options), which serves Call values with an Invoker through
// Gate.Handle, enforces a host loop's act with Gate.Enforce and Gate.Complete, and takes
// binding moments through Gate.RequestMoment and Gate.Resolve; PolicyEvaluator, what the gate
// asks policy (CompiledPolicy wraps a compiled ToolPolicy); ReceiptLog and Observer, where
// receipts and events go.
//
// Invariants:
//
//   - Nothing reaches an upstream except through the Invoker, and the gate calls it at most once
//     per call and never on a deny.
//   - A protected act (policy Permit, or a resolved binding moment's grant) is invoked only after
//     its authority is consumed by compare-and-swap, its DISPATCH_PENDING record is committed and
//     its dispatch receipt is durable; its outcome is committed before the result is returned.
//     Allow from Enforce is returned only from a successful consume.
//   - An action whose dispatch has no authoritative outcome (reserved, DISPATCH_PENDING, INVOKED
//     or INDETERMINATE) is refused with EF_INDETERMINATE in every session; a retry in the same
//     session within its authority's window gets the recorded result and is not invoked
//     (docs/architecture.md "Retries"). New recovers the journal first, so nothing a previous
//     process left in flight is served as anything but INDETERMINATE (§22 T-G).
//   - The gate computes every digest from the live call and never accepts one from the agent.
//   - In audit mode (PolicyDecision.Audit) every call takes the hot path and what enforcement
//     would refuse is recorded with its code (Result.AuditCode); audit mode is observation, never
//     enforcement.
//   - With a MomentStore (Options.Moments; the embedded store in `actgate serve`) a moment's
//     record, its votes, its resolution and its grants are stored (fsynced) before anyone is
//     told of them, and New restores them: a moment resolved after a restart authorises exactly
//     its option once, an expired one stays expired, votes count toward the quorum across
//     restarts, and restored pending moments count against the pending-moment limits. A
//     restored moment's session ended with the previous process, so its agent continues it
//     (its pending escalation and its grants) from any of its sessions. Declines, question
//     vetoes and undelivered resolutions stay in memory. Without a MomentStore everything is
//     held in memory, and after a restart the call escalates again (fail closed).
//   - Logs and receipts carry act ids, digests, codes, policy and rule names, never argument
//     values (docs/architecture.md "Privacy"; tool-use-binding §29).
package sink
