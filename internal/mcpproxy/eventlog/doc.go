// Package eventlog keeps the events of the gate's resumable answer streams for the agent's
// resumption (MCP streamable HTTP, resumability and redelivery): one Log per answer stream, a
// Set of them per agent session, under the bounds docs/api.md "Per transport feature" (SSE
// event ids) states: per log, per session and for the whole process. It also reads and checks
// the event ids involved: the gate's own answer-stream ids (actgate:g{stream}-{n}, ParseID)
// and the Last-Event-ID an agent sends (CheckLastEventID).
//
// The package knows nothing of sessions, HTTP or the upstream: internal/mcpproxy writes the
// events (answerstream.Stream), decides which log answers a resumption (Set.For) and serves it.
package eventlog
