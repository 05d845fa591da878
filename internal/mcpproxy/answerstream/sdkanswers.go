package answerstream

import (
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// SDKAnswers are the agents' POSTs the MCP SDK's handler is answering, by the identity of their
// request's header map: the SDK hands a call's handler that map (mcp.RequestExtra.Header) and
// nothing else of its HTTP request. A journal replay answered there is marked on the handler's
// response writer (wire.HeaderReplayed), as MarkReplayed marks it on a Stream. The zero value is
// ready.
type SDKAnswers struct{ m sync.Map }

// headerKey is the identity of a header map.
func headerKey(h http.Header) uintptr { return reflect.ValueOf(h).Pointer() }

// Serve runs the SDK's handler h on r with w wrapped so that a call answered on it can be marked.
func (a *SDKAnswers) Serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
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

// Mark marks the SDK's answer to the request whose header map is h a journal replay; false
// when there is none or its headers are out.
func (a *SDKAnswers) Mark(h http.Header) bool {
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
