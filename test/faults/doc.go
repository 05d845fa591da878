// Package faults is actgate's fault suite (issue 5): the failpoint matrix — the gate killed at
// each dispatch boundary, restarted, and the call retried — and the dependency faults, each of
// which must fail closed for protected tools and say why with its EF code (tool-use-binding
// §16, §22 T-G, §23; action-evidence-boundary "Classify the Effect Outcome").
//
// Everything runs as real processes and real servers on loopback: `actgate serve` built once
// per package with -tags failpoints (internal/failpoint), counting MCP upstreams
// (internal/mcpproxy/mcptest), the SDK's MCP client as the agent. What is asserted is the state
// of the world read after the process exited: the upstream's own invocation count, the bbolt
// journal and authority store, and `actgate receipts verify` on the receipt log.
//
// # The matrix (standalone gate, `actgate serve`, embedded bbolt store)
//
// A call of a protected tool (a machine permit: issued, consumed and journaled) is killed at
// the boundary; the gate restarts over the same data dir; the agent retries in a new session.
//
//	boundary        upstream at crash  journal after restart                    authority  retry
//	before-consume  0                  no record of the call                     none       runs once (first dispatch)
//	after-consume   —  (no such instant: consume and DISPATCH_PENDING are one commit; the call completes)
//	after-pending   0                  INDETERMINATE, reason recovered_on_start  consumed   EF_INDETERMINATE, not sent
//	during-invoke   0 or 1             INDETERMINATE, reason recovered_on_start  consumed   EF_INDETERMINATE, not sent
//	after-invoke    1                  INDETERMINATE, reason recovered_on_start  consumed   EF_INDETERMINATE, not sent
//
// In every row the receipt log verifies after the restart, and where a dispatch was journaled
// its DISPATCH_PENDING receipt is in the log (it is durable before anything is sent).
//
// after-consume collapses in the embedded store: IssueConsumeAndPend spends the authority and
// writes the DISPATCH_PENDING record in one bbolt transaction, so a crash leaves either both or
// neither. That is the stronger guarantee: there is no state in which authority is spent and no
// intent record exists to tell recovery that an effect may be under way. The test shows the
// instant is never reached there (the armed failpoint does not fire and the call completes).
package faults
