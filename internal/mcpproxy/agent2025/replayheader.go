package agent2025

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
)

// A retry of a tools/call that already ran is answered with the result recorded in the journal
// (tool-use-binding §9), exactly as it was first given: agent frameworks render a result's
// _meta to their model along with its text, and the model must read on a retry what it read the
// first time. The replay is marked in the gate's own HTTP response header instead,
// wire.HeaderReplayed: "true", set before the answer's headers go out, on every path a
// tools/call is answered by (docs/api.md "Per method"):
//   - a session's call on the direct path and a 2026-07-28 call: on the answer stream of the
//     request, before its response (answerstream.Stream.MarkReplayed);
//   - a session's call the SDK's handler carries: on the handler's response writer, found by
//     the request's header map the SDK hands the call (answerstream.SDKAnswers).
//
// An answer whose headers are already out when the replay is known cannot carry the header;
// the result is the recorded one all the same. A replay sends nothing upstream, so its answer
// has no event before its response and its headers are never out early.

// markReplayed marks the answer to a session's tools/call a journal replay, on whichever path
// carries it: the direct path's answer stream, or the SDK handler's response writer.
func (b *bridge) markReplayed(ctx context.Context, req *mcp.CallToolRequest) {
	if s := answerstream.Of(ctx); s != nil {
		if !s.MarkReplayed() {
			b.p.log.V(1).Info("Replay not marked: the answer's headers are out")
		}
		return
	}
	if req.Extra != nil && !b.p.sdkAnswers.Mark(req.Extra.Header) {
		b.p.log.V(1).Info("Replay not marked: the answer's headers are out")
	}
}
