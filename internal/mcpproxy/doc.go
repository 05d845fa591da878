// Package mcpproxy is the MCP transport around the finality sink: an http.Handler per protected
// upstream server that speaks MCP streamable HTTP to the agent and, as a real MCP client (the
// official Go SDK), to the upstream. It is what `actgate serve` mounts at /mcp/{server} and what
// the Kubernetes sidecar reuses.
//
// # One agent session, one upstream session
//
// The agent side is the SDK's stateful StreamableHTTPHandler, so every agent session has an
// Mcp-Session-Id; that id is the sink.Call Session. Responses to POSTed requests are plain
// application/json (the handler's JSONResponse mode); messages the upstream sends on its own
// go to the agent's standalone SSE stream (GET). When the agent initializes, the proxy opens
// its own client session to the upstream, advertising the agent's own client capabilities (so
// the upstream asks for sampling, elicitation or roots only if the agent can answer), and
// answers the agent with the upstream's capabilities, serverInfo and instructions. Protocol
// version negotiation is hop by hop; ping is answered locally.
//
// # What passes through
//
// Every request other than tools/call is forwarded to the upstream with the SDK client's typed
// method of the same name and its result is returned to the agent unchanged: resources/list,
// resources/templates/list, resources/read, resources/subscribe, resources/unsubscribe,
// prompts/list, prompts/get, completion/complete, logging/setLevel, and tools/list (below). An
// upstream JSON-RPC error is returned to the agent with its code, message and data. In the other
// direction, the upstream's notifications (progress, log messages, resources/updated and the
// three list_changed) are forwarded to the agent's session, and its requests (sampling,
// elicitation, roots/list) are asked of the agent and the agent's answer returned. Fidelity is
// that of the SDK's MCP schema: a member the SDK's types do not model is not carried (see
// Limitations).
//
// # Direct tools/call paths
//
// A tools/call is the one message on the hot path, so it does not cross the SDK's sessions
// when it need not (agentcall.go, upstreamcall.go); everything else does:
//
//   - Toward the agent, a plain tools/call POST on a session this proxy bridged (the
//     session's negotiated protocol version in Mcp-Protocol-Version, below 2026-07-28; one
//     JSON-RPC request with object params; a Host, Content-Type and Accept the SDK's handler
//     would accept) is decoded with the SDK's own decoder and answered with the same
//     bridge.callTool and the same JSON the SDK's handler writes in its JSONResponse mode. Any
//     other request is left to the SDK's handler, unread or with its body restored. The agent
//     sessions' idle timeout (Config.SessionTimeout) is kept by the bridges, since direct calls
//     do not pass through the SDK's handler; a tools/call whose id is already in flight on the
//     session is refused as the SDK refuses it.
//   - Toward the upstream, on a stateful session negotiated below 2026-07-28, the call is one
//     HTTP POST of the proxy's own on the SDK client session's id, with a string JSON-RPC id
//     ("actgate-N", never one the SDK client uses), read on the calling goroutine. An
//     event-stream answer may carry, before the response, the upstream's notifications
//     (forwarded to the agent as the SDK client's handlers forward them) and requests
//     (sampling, elicitation, roots/list, ping: answered as the SDK client would, by asking the
//     agent, and POSTed back). A stream that ends before the response is not resumed: the
//     outcome is unknown (INDETERMINATE). A call abandoned at its deadline is followed by
//     notifications/cancelled, as the SDK client sends.
//
// Both are measured against the SDK-only proxy (Config.sdkOnly, for tests):
// TestDirectAgentPathMatchesSDK sends both the same raw requests and requires the same answers;
// TestInvokeOutcomes, TestUpstreamMessagesDuringCall and TestSessionIdleTimeout run on both.
// The SDK path costs a tools/call several goroutine hand-offs on each hop; as a separate
// process on 2 cores that was most of the gate's overhead (BenchmarkToolsCallRoundTripServe).
//
// A POSTed body that is not exactly one well-formed JSON value is refused with HTTP 400 on
// both paths: the SDK's decoder would read its first value and ignore the rest (envelope-04
// §12.7: malformed input is never repaired into an action).
//
// # tools/list
//
// tools/list is discovery and never issues authority (tool-use-binding §8). The upstream's list
// is returned with exactly two additions (envelope-04 §8.2):
//
//   - on the first page, the virtual tool request_binding_moment (sink.RequestBindingMomentTool,
//     inputSchema sink.ProposalSchema()), through which the agent proposes a binding moment;
//   - on every tool the sink says can escalate (sink.Gate.CanEscalate) and on the virtual tool,
//     the advisory boolean annotation emits_binding_moment: true. MCP's ToolAnnotations are
//     open hints, so it is carried in the tool's "annotations" object, and also in the tool's
//     "_meta" object under the same name, the place MCP reserves for extra data, for clients
//     that drop annotations they do not know.
//
// An upstream tool named request_binding_moment is hidden: the name is the gate's.
//
// # tools/call
//
// A tools/call becomes a sink.Call (Session: the agent's Mcp-Session-Id; Agent: the session's
// agent, below; Server: the mount name; Destination: the upstream URL this proxy contacts; Args:
// the RFC 8785 canonical form of params.arguments, which are also exactly the bytes forwarded)
// handed to Gate.Handle with an Invoker that calls the upstream once, with the sink's operation
// id in params._meta["actgate.io/operation-id"] (the upstream's idempotency key). The agent's
// own params._meta is not forwarded except its progressToken: it is not covered by the
// arguments digest, so nothing in it may reach the upstream as an instruction. The invoker
// classifies the one attempt:
//
//   - a CallToolResult with isError false → Executed; with isError true → Failed (the upstream
//     said so authoritatively);
//   - an HTTP redirect (3xx) → Failed, with a synthesized isError result carrying
//     EF_UPSTREAM_REDIRECT: no client of the proxy follows a redirect, so the destination the
//     authority binds is the only one contacted, and its 3xx says it did not serve the call;
//   - a JSON-RPC error answer with a code that means the request was refused before execution
//     (parse error, invalid request, method not found, invalid params), or an HTTP 4xx refusal
//     other than 408 and 429 → Failed, with a synthesized isError result;
//   - any other error after the request headers were written (timeout, connection loss, 5xx,
//     another JSON-RPC error) → Indeterminate: the upstream may have acted;
//   - an error before any request byte was written (dial refused, no upstream session) →
//     NotSent.
//
// Whether bytes were written is observed with net/http/httptrace on the POST that carries
// the call, never guessed from the error text. Once dispatched, the invocation is detached from
// the agent's cancellation and bounded by Config.CallTimeout instead, so an agent that gives up
// does not turn a result the upstream would have given into an INDETERMINATE record.
//
// An allowed call returns the upstream's result (or, to a retry, the recorded one). A deny
// returns a CallToolResult with isError true whose text content is the tool-use-binding §17
// error object, whose structuredContent carries the same object, and whose _meta carries
// "actgate.io/ef-code" (and act id and state when known). An escalation adds the additive
// top-level member binding_moment (envelope-04 §8.1) holding the gate-authored envelope, and
// its text content is the conventional payload: the code line followed by the plain-text
// rendering of the envelope (internal/envelope TextRenderer, every §9.1 invariant) and how the
// principal resolves it. The SDK's CallToolResult has no place for binding_moment, so the proxy
// writes such a result as its own JSON object (a Result type embedding mcp.ResultBase); the
// JSON-RPC id of the response is the agent's request id and never the act id.
//
// # Provenance
//
// An MCP client may declare where the instruction behind a call came from in
// params._meta["actgate.io/instruction-provenance"] (user, system, retrieval or tool_output).
// The declaration is used only when Config.TrustDeclaredProvenance is set — the agent host is
// then trusted to attest it, as in a local `actgate serve` next to the user's own agent — and
// ignored otherwise, so the sink sees unknown provenance, which policy treats as the worst
// listed source (fail closed).
//
// # Agents and limits
//
// With Config.Agents (the standalone gate: one bearer token per agent) every request is
// authenticated before anything reads it (HTTP 401 and EF_AGENT_UNAUTHENTICATED otherwise); the
// agent that initializes a session is that session's identity — the Agent of its calls and
// moments — and the SDK's handler (and the direct path) refuse another agent's request on it,
// as the SDK refuses another user's. Without it (the sidecar, whose pod is the boundary) the
// agent is Config.Agent. Config.Sessions bounds open sessions in total and per agent across
// the proxies that share it (EF_SESSION_LIMIT on initialize). A request's body is read within
// Config.ReadTimeout; then the connection's read deadline is lifted (a long call or an event
// stream is not cut by the server's read timeout) and a POST's answer must be written within
// the call's own bounds.
//
// # Credentials
//
// Config.Credential supplies the bearer token for the proxy→upstream leg only: it is set on
// each upstream HTTP request by the proxy's RoundTripper and is never part of anything returned
// to the agent; the agent's own headers are never forwarded upstream.
//
// # Elicitation
//
// With Config.Elicitation (the compiled ToolPolicy), a binding moment whose class the policy's
// spec.elicitation lists (only INFORMATIONAL can be: envelope-04 §12.4) is also offered, during
// the tools/call that surfaced it, as elicitation/create to an agent client that declared form
// elicitation, when the moment names exactly one principal other than the agent (elicit.go).
// The message is the §9.1 text rendering; the form enumerates the options, the open hatches and
// decline. An accepted form is applied through the gate's Resolve as that principal; a
// dismissed one resolves nothing. The result still carries binding_moment, and
// _meta["actgate.io/elicitation"] says what became of the offer.
//
// # Crash injection
//
// The invoker carries three of the failpoints of internal/failpoint (active only in binaries
// built with -tags failpoints, for tests): AfterPending when it is entered (for a journaled
// dispatch the authority is consumed and DISPATCH_PENDING committed; nothing is sent),
// DuringInvoke when the tools/call request has been written upstream and no response read, and
// AfterInvoke when the upstream has answered and nothing is recorded. Their "error" action makes
// AfterPending behave as an upstream that cannot be reached (nothing sent: FAILED) and
// AfterInvoke as an answer lost on the way back (INDETERMINATE). Other builds contain no such
// code.
//
// # Limitations
//
// Members of MCP messages that SDK v1.8.0 does not model are dropped on the way through (the
// direct paths decode and encode with the SDK's types too). The agent's notifications/cancelled
// for a tools/call the direct path carries is not seen by that call: a call at the sink is never
// abandoned half way anyway (its own deadline is Config.CallTimeout), and an elicitation wait
// ends when the agent's HTTP request does.
// When the upstream session breaks, the next request opens a new one: per-session upstream
// state (resource subscriptions) does not carry over.
// Server-to-agent notifications and requests are delivered on the agent's standalone SSE
// stream (GET), not on the stream of the request that caused them. The agent-facing side
// speaks the stateful (session) protocol versions; a client that starts with the sessionless
// 2026-07-28 discovery is answered with the versions it supports and falls back, as the SDK's
// own client does. Requests the SDK does not
// know are answered with "method not found".
package mcpproxy
