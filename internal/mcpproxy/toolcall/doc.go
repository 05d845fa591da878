// Package toolcall is the one place a tools/call is handed to the finality sink, for both MCP
// revisions: the Gate the proxy needs of the sink, the canonical arguments the sink digests and
// the upstream receives (Arguments), what is done with the gate's answer (Handoff: Settle, then
// Decide), the virtual request_binding_moment tool (Moment), the results the agent is given
// (AllowedResult, RefusalFor, RegisteredMoment, WithDeliveries) and the gate's one change to
// tools/list (AugmentToolsRaw). The revisions build the sink.Call and the Invoker that sends
// the call upstream; everything between is here (docs/architecture.md "The MCP proxy"). It
// imports the wire and nothing else of the proxy.
package toolcall
