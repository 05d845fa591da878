// Package failpoint injects crashes, delays and errors at the dispatch boundaries of the
// finality sink, for the fault tests (test/faults, test/conformance T-G) only.
//
// Inject is compiled to a no-op returning nil unless the binary is built with
// `-tags failpoints` on a Unix system; the environment is then never read, so a production
// binary has no way to be made to crash or stall through it. In a failpoints build the
// environment variable ACTGATE_FAILPOINT selects one point and what happens there:
//
//	ACTGATE_FAILPOINT=<point>[=<action>]
//
//	kill       SIGKILL this process at the point (the default): a crash at exactly that
//	           instant, with nothing after it run and nothing flushed
//	sleep:DUR  sleep DUR (a time.ParseDuration string) at the point, then go on
//	error      Inject returns ErrInjected; a call site that can fail treats it as its own
//	           failure: AfterPending as an upstream that cannot be reached (nothing sent),
//	           AfterInvoke as an answer lost on the way back (internal/mcpproxy). The other
//	           sites ignore it, and the action is a no-op there
//
// The points (tool-use-binding §22 T-G; action-evidence-boundary "Atomically Consume or
// Reserve Before Invocation", "Invoke the Frozen Action", "Classify the Effect Outcome"):
//
//	BeforeConsume  the call was checked and is about to spend its authority; nothing consumed
//	AfterConsume   the authority is consumed and no DISPATCH_PENDING record exists yet. Only
//	               where these are two writes: the sidecar (the Lease compare-and-swap at the
//	               authority service, then its own journal) and a sink over a store that does
//	               not consume and journal in one commit. The embedded store does both in one
//	               bbolt transaction, so there is no such instant there.
//	AfterPending   DISPATCH_PENDING is durable; the upstream has not been contacted
//	DuringInvoke   the tools/call request has been written to the upstream connection and no
//	               response has been read
//	AfterInvoke    the upstream has answered; the outcome is not recorded
//
// and, for a binding moment's final option resolution in a sink with a MomentStore:
//
//	MomentGranted  the option's authority is issued (durable); the resolution is not stored
//	MomentStored   the resolution and its grant are stored; the principal has no answer yet
//
// The call sites are single lines in internal/sink, internal/sidecar and internal/mcpproxy.
package failpoint
