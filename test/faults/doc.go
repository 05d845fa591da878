// Package faults is actgate's fault suite (docs/operations.md "Failure behaviour"): the failpoint
// matrix — the sink killed at each dispatch boundary, restarted, and the call retried — and the
// dependency faults, each of which must fail closed for protected tools and say why with its EF
// code (tool-use-binding §16, §22 T-G, §23; action-evidence-boundary "Classify the Effect Outcome",
// "prohibit a blind replay").
//
// Everything is real and on loopback: `actgate` built once per package with -tags failpoints
// (internal/failpoint; TestMain), run as `actgate serve`, `actgate-controlplane authority` and `actgate
// sidecar` processes; envtest's kube-apiserver and etcd (test/envtest, started once, only by the
// Kubernetes tests; they skip under -short); counting MCP upstreams (internal/mcpproxy/mcptest);
// the SDK's MCP client as the agent. Faults are injected only at the wire: a fault-injecting
// reverse proxy in front of the API server (apiFaults) and one in front of the authority
// service (authorityFaults); the Lease store, the journal and the compare-and-swap are the real
// ones. What is asserted is the state of the world after the processes exit: the upstream's own
// invocation count, the bbolt journal, the authority store or the Leases in etcd, and
// `actgate receipts verify --key` on the standalone gate's receipt log.
//
// # The matrix
//
// A call of a protected tool (a PolicyPermit: authority issued, consumed, journaled) is killed
// at the boundary with ACTGATE_FAILPOINT; the process restarts over the same data; the agent
// retries the same arguments in a new session.
//
// Standalone gate (`actgate serve`, embedded bbolt store; TestStandaloneMatrix):
//
//	boundary        upstream  journal after restart                     authority   retry
//	before-consume  0         nothing                                   none        runs once (the first dispatch)
//	after-consume   —         no such instant: consume and DISPATCH_PENDING are one bbolt commit;
//	                          the armed failpoint never fires and the call completes EXECUTED
//	after-pending   0         INDETERMINATE, reason recovered_on_start  CONSUMED    EF_INDETERMINATE, not sent
//	during-invoke   0 or 1    INDETERMINATE, reason recovered_on_start  CONSUMED    EF_INDETERMINATE, not sent
//	after-invoke    1         INDETERMINATE, reason recovered_on_start  CONSUMED    EF_INDETERMINATE, not sent
//
// In every row `actgate receipts verify` accepts the receipt log after the restart, and where
// the call was journaled its DISPATCH_PENDING receipt is in the log (durable before anything is
// sent).
//
// Sidecar (`actgate sidecar` → `actgate-controlplane authority` → kube-apiserver; TestSidecarMatrix):
//
//	boundary        upstream  sidecar journal after restart             Lease       retry
//	before-consume  0         nothing                                   ISSUED      runs once, own authority
//	after-consume   0         nothing                                   CONSUMED    runs once, own authority
//	after-pending   0         INDETERMINATE, reason recovered_on_start  CONSUMED    EF_INDETERMINATE, nothing consumed
//	during-invoke   0 or 1    INDETERMINATE, reason recovered_on_start  CONSUMED    EF_INDETERMINATE, nothing consumed
//	after-invoke    1         INDETERMINATE, reason recovered_on_start  CONSUMED    EF_INDETERMINATE, nothing consumed
//
// The sidecar's evidence is its journal, its receipt log (in the journal directory: the
// allow of a dispatch is durable before the invoke, as in the standalone gate), the Leases and
// the Act objects.
//
// Where the boundary collapses, and why that is stronger: in the embedded store
// IssueConsumeAndPend spends the authority and writes DISPATCH_PENDING in one bbolt
// transaction, so a crash leaves both or neither. In the sidecar they are two writes in two
// places (the Lease compare-and-swap in etcd, then the pod's journal), and a crash between them
// leaves an authority spent by an operation nobody recorded: nothing ran for it (the upstream
// never saw that operation id — asserted), but the act is lost rather than INDETERMINATE, and
// its Act object stays CONSUMED with no outcome for an operator to find. The one-commit path has
// no such state.
//
// during-invoke kills the process the moment the tools/call request is written to the upstream
// connection; whether the upstream read it first is a race, so 0 or 1 is accepted, and the
// retry must not change the count either way.
//
// # Dependency faults
//
// Upstream (TestUpstreamFaults, standalone; TestSidecarUpstreamHang, sidecar): the call was
// dispatched, so the question is its outcome. Hanging past CallTimeout, resetting the connection
// mid-response, a non-JSON body, a result of the wrong shape, HTTP 500 and a JSON-RPC internal
// error are INDETERMINATE (EF_INDETERMINATE) and are never re-invoked by a retry, in any
// session, after a restart; JSON-RPC invalid params is the upstream's refusal before execution,
// FAILED.
//
// Injected errors (TestInjectedErrors, standalone): ACTGATE_FAILPOINT=after-pending=error is an
// upstream that cannot be reached after DISPATCH_PENDING — FAILED, reason not_sent, and the
// identical call later runs as a new act; after-invoke=error is an answer lost on its way back —
// the upstream ran once, INDETERMINATE, the retry refused.
//
// Authority service (TestAuthorityServiceFaults): connection refused, connection closed
// unanswered, non-JSON, JSON that is not an ActReview → EF_STORE_UNAVAILABLE; slower than the
// sidecar's --review-timeout → EF_060; an authority whose signature does not verify → EF_002,
// with the Lease left ISSUED. Nothing is consumed or sent, hot-path tools included.
//
// API server (TestAPIServerFaults, behind the authority service): down → EF_060; 500 to
// everything or to Leases → EF_STORE_UNAVAILABLE; 409 to every Lease update → the consume did
// not happen, EF_STORE_UNAVAILABLE, Lease ISSUED. After each fault clears the same call runs
// once.
//
// # Retries after an unknown outcome
//
// Every new act gets a fresh authority from the service, so in a pod only the sidecar stands
// between a retry after a crash or an unknown upstream answer and a second run: it refuses a
// call of an action whose earlier dispatch is INDETERMINATE with EF_INDETERMINATE before
// consuming anything (internal/sidecar unsettled.go), as internal/sink's dispatch index does.
//
// The package runs in `make test`; it takes about a minute and a half with a warm build cache
// (the envtest start and the failpoints build are most of it).
package faults
