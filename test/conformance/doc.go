// Package conformance runs the conformance tests of tool-use-binding §22 (T-A through T-G)
// against actgate over real MCP: the official Go SDK's client as the agent, the SDK's server as
// each upstream, the gate's MCP proxy between them, all over loopback HTTP, with the policy of
// testdata/actgate.yaml. Every assertion about whether a tool ran reads the upstream's own
// invocation counter.
//
//	T-A  tool_use email_send to an address not in the user turn → not invoked
//	     (EF_INSTRUCTION_PROVENANCE_FAILURE); the same call instructed by the user runs.
//	T-B  two calls in parallel, search and payout: search runs, payout escalates; a payout above
//	     the policy's cap is denied.
//	T-C  a consumed authority is never invoked twice: the authorised call repeated, in
//	     parallel, in the same session and in another, runs once.
//	T-D  the MCP call sent to a swapped server URL is refused (EF_DESTINATION_MISMATCH), before
//	     and after a human authorised the call at the real server.
//	T-E  a computer-use submit authorised on one origin is refused after the origin changes.
//	T-F  BenchmarkToolsCallRoundTrip: p50/p95/p99 of a hot-path tools/call through the gate and
//	     directly, and the gate's overhead.
//	T-G  the `actgate serve` process is killed after consume and before invoke (and, in a second
//	     case, after invoke and before the outcome is recorded); on restart the retry is refused
//	     with EF_INDETERMINATE, the upstream is never called twice, and the journal holds the act
//	     INDETERMINATE. It builds the binary with -tags failpoints.
//
// Pass-through of methods other than tools/call is checked here too.
package conformance
