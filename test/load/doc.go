// Command load is actgate's load generator (docs/operations.md "Load testing"): it drives the
// standalone gate (`actgate serve`) and the sidecar (`actgate sidecar` beside `actgate-controlplane authority`
// on a real kube-apiserver, test/envtest) with real MCP clients (the official Go SDK over
// streamable HTTP) at fixed concurrency for a bounded time, reports throughput, latency through
// the sink and straight to the upstream, and the sink process's CPU per call, and after every run
// checks the invariants the sink promises. With both targets, the runs interleave by concurrency
// (standalone 1, sidecar 1, standalone 16, …) and the report ends with the sidecar against
// standalone at each concurrency (calls/s and CPU per call ratios, hot-path overhead p50 of each).
//
//	go run ./test/load -target standalone|sidecar|both -concurrency 1,16,64 -duration 10s \
//	    -mix hot=60,permit=20,escalate=8,replay=6,substitute=6 -out report.json
//
// `make load` runs it at 1, 16 and 64 on both targets (LOADTIME per run) into bin/load/. Every
// listener is on the loopback interface: -listen accepts only a loopback IP.
//
// # One run
//
// A run is one target at one concurrency, on fresh state (a new data dir and gate process, or a
// new namespace, policy and sidecar process) and a fresh counting upstream (internal/mcpproxy/
// mcptest: the upstream's own record of every invocation, with its arguments and the operation
// id the sink forwarded). Each worker owns one MCP client session to the sink and, for the
// direct phase, one to an identical second upstream. The direct phase runs first (the same
// tools, no sink) for -direct-duration; then the mix runs through the sink for -duration:
//
//   - hot: get_balance, an INFORMATIONAL call on the policy's hot path (no authority);
//   - permit: email_send under PolicyPermit (authority issued, consumed, DISPATCH_PENDING);
//   - escalate: send_payment needs a human: the direct call is refused EF_ESCALATION_REQUIRED
//     with a gate-authored binding moment; the scripted principal resolves the option that is
//     exactly the requested call; the agent's retry runs once ("granted");
//   - replay: the worker's latest permitted call and latest approved payment that ran are sent
//     again in the same session: each must come back as the recorded result or a refusal, never
//     as a second invocation (tool-use-binding §9; docs/architecture.md "Retries");
//   - substitute: a payment is escalated and approved, then the agent calls send_payment with
//     another payee: it must be refused and the upstream must never see those arguments.
//
// Every argument set is unique to its worker and sequence number, so a second invocation of
// the same act is visible upstream. A call whose answer is not what its kind expects is counted
// in the report (check "expected-answers").
//
// # Invariants checked after every run (named checks, PASS/FAIL; any FAIL exits 1)
//
//   - authority-single-use: each authority was consumed at most once — one dispatch record per
//     authority, and the store's consumer (bbolt ConsumedBy, the Lease's holderIdentity, or
//     for a pod's machine Permit the permit record on its Act) is that record's operation;
//   - upstream-equals-executed: per tool, the upstream's own invocation count equals the
//     journal's EXECUTED records plus the hot-path allows (the standalone gate's allow receipts
//     without authority; the sidecar journals nothing on the hot path, so there the authority
//     service's Allowed Acts without authority), and every upstream invocation carries the
//     operation id of one of them (a hot call's id through the sidecar is recorded nowhere: those
//     are matched by count);
//   - no-dangling-dispatch: no record is left CONSUMED, DISPATCH_PENDING or INVOKED (an
//     INDETERMINATE record is allowed and counted: it is the honest answer to an unknown outcome);
//   - denied-never-reached: no refused call's arguments, and no substitution's, reached the
//     upstream, and no protected act was invoked twice;
//   - receipt-chain: the receipt log verifies (internal/receipt): the standalone gate's in its
//     data directory, the sidecar's in its journal directory;
//   - expected-answers: every call got the answer its kind expects.
//
// The checks are pure functions of a World (what the upstream, the journal, the store and the
// receipt log hold after the gate stopped) and the workload's own tally, so a test feeds them
// deliberately broken worlds and sees each FAIL.
//
// # In the sidecar rig
//
// Nothing runs Pods and no manager runs (test/e2e covers the chart, the manager, admission and
// the injection): the rig writes the status the ToolPolicy controller would (Accepted, epoch 1),
// and the scripted principal writes the BindingMoment resolution and the status the
// BindingMoment controller records after admission, then waits until the API server's watch
// cache shows it (the authority service reads moments from the cache).
//
// # The API floor
//
// After each sidecar run (unless -floor=false) the same workers draw the same operations for
// the same time and make only the API writes the protected path cannot do without, straight to
// the same API server, with copies of the run's own Acts and BindingMoments (floor.go): what the
// API server alone gives the mix at that concurrency. The report prints it below the run's
// latencies (docs/performance.md "The API floor under the protected path").
package main
