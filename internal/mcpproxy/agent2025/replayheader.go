package agent2025

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
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
//     the request's header map the SDK hands the call (sdkAnswers).
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
	if req.Extra != nil && !b.p.sdkAnswers.mark(req.Extra.Header) {
		b.p.log.V(1).Info("Replay not marked: the answer's headers are out")
	}
}

// sdkAnswers are the agents' POSTs the SDK's handler is answering, by the identity of their
// request's header map: the SDK hands a call's handler that map (mcp.RequestExtra.Header) and
// nothing else of its HTTP request.
type sdkAnswers struct{ m sync.Map }

// headerKey is the identity of a header map.
func headerKey(h http.Header) uintptr { return reflect.ValueOf(h).Pointer() }

// serve runs the SDK's handler on r with w wrapped so that a call answered on it can be marked.
func (a *sdkAnswers) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	if r.Header == nil {
		h.ServeHTTP(w, r)
		return
	}
	mw := &markWriter{ResponseWriter: w}
	k := headerKey(r.Header)
	a.m.Store(k, mw)
	defer a.m.Delete(k)
	h.ServeHTTP(mw, r)
}

// mark marks the SDK's answer to the request whose header map is h a journal replay; false
// when there is none or its headers are out.
func (a *sdkAnswers) mark(h http.Header) bool {
	if h == nil {
		return false
	}
	v, ok := a.m.Load(headerKey(h))
	if !ok {
		return false
	}
	mw := v.(*markWriter)
	mw.replayed.Store(true)
	return !mw.wrote.Load()
}

// markWriter is the SDK handler's response writer: it adds wire.HeaderReplayed as the headers
// go out when a call it answers was marked.
type markWriter struct {
	http.ResponseWriter
	replayed, wrote atomic.Bool
}

func (w *markWriter) out() {
	if !w.wrote.Swap(true) && w.replayed.Load() {
		w.ResponseWriter.Header().Set(wire.HeaderReplayed, "true")
	}
}

// WriteHeader implements http.ResponseWriter.
func (w *markWriter) WriteHeader(status int) {
	w.out()
	w.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (w *markWriter) Write(b []byte) (int, error) {
	w.out()
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher (the SDK flushes its event streams).
func (w *markWriter) Flush() {
	w.out()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath (deadlines).
func (w *markWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
