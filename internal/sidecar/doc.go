// Package sidecar is the finality sink in an agent pod (`actgate sidecar`, Kubernetes mode): the
// enforcing sidecar the webhook injects. It listens on loopback only, for the agent's MCP traffic
// (internal/mcpproxy, one mount per protected server at /mcp/{server}) and for host loops that run
// OpenAI or Anthropic tool calls in-process (/v1/enforce, /v1/complete). The upstream credentials
// and the dispatch are the sidecar's alone (docs/architecture.md "Anti-bypass").
//
// # One dispatch core (docs/architecture.md "In a pod")
//
// Gate is internal/sink's Gate — the one `actgate serve` runs — wired for a pod, so a tool call
// goes through the same functions in both deployments: the act mapping, policy evaluation, the
// retry index and INDETERMINATE refusals, the journal, the receipts, the results and the
// tools/list annotation. What differs is behind sink.Options:
//
//   - Policy: the compiled ToolPolicy that governs the pod (internal/policysource, following the
//     authority service; Config.PolicySource). Without one every call is refused.
//   - Store and Journal: a bbolt journal in the pod's emptyDir (internal/authority/boltstore)
//     whose verifier holds the authority service's public keys. It keeps a copy of every
//     authority the sidecar dispatched, verified and journaled consumed with DISPATCH_PENDING in
//     one commit (IssueConsumeAndPend), so the retry index survives a restart as standalone.
//   - Authority (authority.go, serviceAuthority): a machine Permit is one Permit review — the
//     service evaluates its own policy again and records the Act carrying the authority
//     already consumed by the dispatch's operation (no Lease); an escalated call is one Review
//     naming the dispatch's operation (the service keeps the binding moments as BindingMoment
//     objects), in which a grant of exactly that call is consumed by that operation (a service
//     that only issues it is sent one Consume, the Lease compare-and-swap). The sink checks
//     every authority against the binding it built from the live call (authority.Match)
//     before the journal verifies its signature; any error, timeout, non-200 or undecodable
//     answer is a deny, and so is an allow that does not confirm the consumption of exactly
//     this authority by exactly this operation.
//   - Outcomes (outbox.go): every EXECUTED, FAILED and INDETERMINATE the journal records is
//     reported (Report, idempotent, up to OutboxInFlight at once) until the service
//     acknowledges it, off the call path, with backoff while it is down, and again after a
//     restart (the journal is the outbox's content; outbox.db remembers what was
//     acknowledged).
//   - Moments: an agent-authored moment is one Propose review (the service checks it again).
//   - Refusals (authority.go, refusals): the Act record of a call the pod's policy denied is
//     queued (RefusalQueue) and sent off the call path (Refusal); a full queue drops and counts.
//
// The hot path (a rule with evidence None) makes no network call: no review, no API request,
// no Act object.
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
// /v1/enforce is tool-use-binding §16 enforce() over HTTP, run through the sink's Handle with the
// host as the Invoker (internal/hostloop, the code `actgate serve` runs too): the block is mapped
// to a call, decided, and — when allowed under authority — answered allow once the authority is consumed and the dispatch journaled
// DISPATCH_PENDING; the host then runs the tool once and reports the outcome with /v1/complete,
// which the sink records (journal, receipt, outbox) as for an MCP call. A host that does not
// report within HostLoopTimeout leaves the dispatch INDETERMINATE. A retry of a dispatch already
// settled in the session is answered with replayed and the recorded result, never allowed again.
// A refusal carries the vendor-shaped deny payload to hand back to the model as the tool result.
//
// # Agent-authored moments
//
// The virtual request_binding_moment tool is the sink's, as standalone: the proposal is checked
// against the pod's policy and built into an envelope, which the authority service registers
// (Propose) as BindingMoments for the principals after checking every option's call again on
// the option's own server. The options may call different servers; the chosen option's call is
// granted on its own server and destination only.
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
