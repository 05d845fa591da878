// Package mcpproxy is the MCP transport around the finality sink: an http.Handler per protected
// upstream server that speaks MCP streamable HTTP to the agent and, as a real MCP client (the
// official Go SDK), to the upstream. It is what `actgate serve` mounts at /mcp/{server} (Path)
// and what the Kubernetes sidecar reuses. docs/architecture.md "The MCP proxy" describes its
// sessions, what passes through, the direct tools/call paths, tools/list, elicitation and its
// limitations.
//
// The main types: Proxy (New, Config), the handler of one upstream server; Gate, the finality
// sink it hands every tools/call to (internal/sink, or the sidecar's remote gate); and, when
// elicitation is configured, ElicitationPolicy and MomentResolver.
//
// This package is the front: construction (New, Config), Proxy.ServeHTTP (admission first, the
// body read within its bound, then the choice of revision) and the task owners both revisions
// share (taskowners.go). Its parts are packages under it with one job each, none of which
// imports this one: wire (JSON-RPC framing, headers, event streams), upstream (the client
// toward the protected server), toolcall (the one tools/call → sink hand-off both revisions
// reach), tasks, eventlog and answerstream (an answer stream and its resumption), getrelay (a
// session's relayed GET stream), stateless and rounds (the 2026-07-28 request and its input
// rounds), elicitform, admission (rebinding refusal, agent authentication, session bounds),
// agent2026 (the 2026-07-28 agent side, which ServeHTTP hands a sessionless request first) and
// agent2025 (the sessions of 2025-11-25 and earlier: the bridge and its files, which get the
// rest). docs/architecture.md "How a request travels, and the packages" walks a request
// through them.
//
// Invariants:
//
//   - A tools/call reaches the upstream only through Gate.Handle, with an Invoker that sends it
//     at most once; every other method is passed through, not enforced: relayed as the agent
//     wrote it and answered with the upstream's bytes where the session allows (agent2025's
//     relay.go), through the SDK's sessions otherwise; the agent's GET stream is the upstream's,
//     relayed (agent2025's getstream.go). tools/list is the one answer the proxy changes. The forwarded
//     arguments are exactly the bytes the sink digested (their RFC 8785 canonical form), with
//     the sink's operation id in params._meta (MetaOperationID) as the upstream's idempotency
//     key; of the agent's own params._meta only progressToken is forwarded.
//   - The outcome of the one attempt is classified from what was observed on the wire
//     (net/http/httptrace), never guessed (docs/architecture.md "tools/call and its outcomes"):
//     EXECUTED or FAILED only on the upstream's authoritative answer, not sent when no request
//     byte was written, INDETERMINATE otherwise. Once dispatched, the call is bounded by
//     Config.CallTimeout, not by the agent's cancellation. A task-augmented call the upstream
//     answers with a CreateTaskResult is INVOKED, and its outcome is the task's result, recorded
//     when it comes through the gate or INDETERMINATE when it can no longer (agent2025's tasks.go,
//     docs/architecture.md "Tasks").
//   - tools/list never issues authority; it adds only the virtual tool request_binding_moment
//     and the emits_binding_moment annotation (envelope-04 §8.2), and hides an upstream tool of
//     that name.
//   - A POSTed body that is not exactly one well-formed JSON value is refused with HTTP 400
//     (envelope-04 §12.7). The direct tools/call paths give the answers the SDK's own paths give
//     (TestDirectAgentPathMatchesSDK, against Config.sdkOnly).
//   - Config.Credential is set on proxy→upstream requests only and never returned to the agent;
//     the agent's headers are never forwarded upstream. A declared instruction provenance is
//     used only with Config.TrustDeclaredProvenance; otherwise it is unknown (fail closed).
//   - No client of the proxy follows a redirect: the destination the authority binds is the only
//     one contacted, and a 3xx answer to a tools/call is FAILED with EF_UPSTREAM_REDIRECT.
//   - With Config.Agents (the standalone gate: one bearer token per agent) every request is
//     authenticated before anything reads it (HTTP 401, EF_AGENT_UNAUTHENTICATED); the agent
//     that initializes a session is its identity, and another agent's request on it is refused.
//     Config.Sessions bounds open sessions in total and per agent (EF_SESSION_LIMIT). A request's
//     body is read within Config.ReadTimeout (docs/architecture.md "The MCP proxy").
//   - Failpoints (internal/failpoint) exist only in binaries built with -tags failpoints.
package mcpproxy
