// Package sidecar is the finality sink in an agent pod (`actgate sidecar`, Kubernetes mode): the
// enforcing sidecar the webhook injects. It listens on loopback only, for the agent's MCP traffic
// (internal/mcpproxy, one mount per protected server at /mcp/{server}) and for host loops that run
// OpenAI or Anthropic tool calls in-process (/v1/enforce, /v1/complete). The decisions are the
// authority service's; the upstream credentials and the dispatch are the sidecar's alone
// (docs/architecture.md "Anti-bypass").
//
// # One tools/call (docs/architecture.md "In a pod")
//
// Gate satisfies mcpproxy.Gate, so the MCP proxy runs unchanged around it:
//
//  1. map the live call to a non-effective AgentCandidateAct (internal/act NewCandidate), with
//     the act id minted for the agent's MCP session, the destination the sidecar itself
//     forwards to and the configured sink id; nothing in it comes from the model but the tool
//     name and the arguments;
//  2. answer a retry — the same action at the same destination in the same session (the act id
//     is a MAC over the session) while the authority consumed for its EXECUTED or FAILED
//     dispatch is unexpired — with the recorded result, without asking the service or invoking
//     (retries.go; docs/architecture.md "Retries"; tool-use-binding §9); otherwise
//     POST an ActReview (operation Review) to the authority service (internal/review), with the
//     pod's projected service-account token as bearer;
//  3. on a deny or an escalation, return the refusal with its EF code (and, for an escalation,
//     the BindingMoment names and the gate-authored envelope) without contacting the upstream;
//  4. on allow without authority (the policy's hot path), invoke once;
//  5. on allow with authority, verify the signed authority here with the service's public key,
//     against a binding rebuilt from the live call and this sidecar's configuration (never from
//     the authority): namespace, act id, tool, arguments and action digests, destination, sink
//     (tool-use-binding §16 MUST 1–3); the policy epoch is the service's to check at consume;
//  6. refuse with EF_INDETERMINATE, before consuming, a call of an action (action digest and
//     destination) whose earlier dispatch by this sidecar has no outcome yet — in flight, or
//     INDETERMINATE after a crash or an unknown upstream answer — in any session and after a
//     restart (unsettled.go); otherwise POST a Consume review (the Lease compare-and-swap)
//     right before invoking, naming the operation id that will be forwarded upstream as the
//     idempotency key;
//  7. journal DISPATCH_PENDING durably (a bbolt journal in the pod's emptyDir,
//     internal/authority/boltstore), then invoke exactly once through the proxy's invoker;
//  8. classify the outcome EXECUTED | FAILED | INDETERMINATE (action-evidence-boundary "Classify
//     the Effect Outcome") and record it in the journal;
//  9. POST a Report review with that state and the evidence digest (never the result), so the
//     service moves the Act from CONSUMED to the outcome. The report is best effort under
//     Options.ReportTimeout: the journal is the source of truth, and a report that fails or is
//     refused is logged with ids and digests and changes nothing of what the agent gets.
//
// Any error, timeout, non-200 or undecodable answer of the service is a deny (EF_060 for a
// timeout, EF_STORE_UNAVAILABLE otherwise) and the upstream is never contacted
// (docs/architecture.md "Fail closed"). So is an authority that does not verify, a consume that is
// not confirmed for exactly this authority and operation, and a journal that cannot record
// DISPATCH_PENDING.
//
// # Host loops
//
// Handler also serves, on the same loopback listener:
//
//	POST /v1/enforce   {"vendor":"anthropic|openai|openai-responses","block":{…},
//	                    "server":"payments","session":"…","provenance":"user"}
//	                → {"allow":bool,"code":…,"message":…,"authority_id":…,"operation_id":…,…}
//	POST /v1/complete  {"operation_id":"…","outcome":"executed|failed|indeterminate","result":…}
//	                → {"operation_id":"…","state":"EXECUTED"}
//
// /v1/enforce is tool-use-binding §16 enforce() over HTTP: the raw tool_use block, tool_calls
// entry or Responses function_call item is mapped to an act, reviewed, and — when the answer is
// allow under authority — the authority is verified, consumed and the dispatch journaled
// DISPATCH_PENDING before allow is returned; the host then runs the tool once and reports the
// outcome with /v1/complete, which journals it and reports it to the service as step 9 does.
// A refusal carries the vendor-shaped deny payload to hand back to the model as the tool
// result.
//
// # Not available in Kubernetes mode
//
// The virtual request_binding_moment tool (agent-proposed binding moments) has no operation
// in the review protocol; RequestMoment refuses with EF_MOMENT_INVALID and says so. CanEscalate
// is false for every tool: the gate does not decide with the policy the sidecar holds, so it
// cannot annotate tools/list.
//
// # Policy and readiness
//
// The sidecar holds its pod's governing ToolPolicy (internal/policysource, following the
// authority service's policy endpoint; Config.PolicySource). /readyz answers 200 when that
// policy is held and every upstream accepts a TCP connection (checked at most every 5 s);
// /readyz?check=policy checks the policy only. The injected container's startup probe
// (policy) and readiness probe (policy and upstreams) run `actgate sidecar probe` in the
// container, because the listener is loopback-only and the kubelet sends HTTP probes to the
// pod's IP.
package sidecar
