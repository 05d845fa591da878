package answerstream

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// TestSDKAnswers: a replay marked while the SDK's handler answers a request, before the answer's
// headers go out, puts wire.HeaderReplayed on that answer; one marked after they went out, one
// of another request, and a request unknown to the table are not marked, and Mark says so.
func TestSDKAnswers(t *testing.T) {
	var a SDKAnswers
	for _, tc := range []struct {
		name       string
		handler    func(w http.ResponseWriter, r *http.Request) bool // returns Mark's answer
		wantMarked bool
	}{
		{"marked before the headers", func(w http.ResponseWriter, r *http.Request) bool {
			ok := a.Mark(r.Header)
			_, _ = w.Write([]byte("{}"))
			return ok
		}, true},
		{"marked before a flush", func(w http.ResponseWriter, r *http.Request) bool {
			ok := a.Mark(r.Header)
			w.(http.Flusher).Flush()
			return ok
		}, true},
		{"marked after the headers", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(http.StatusOK)
			return a.Mark(r.Header)
		}, false},
		{"another request's header map", func(w http.ResponseWriter, _ *http.Request) bool {
			ok := a.Mark(http.Header{})
			_, _ = w.Write([]byte("{}"))
			return ok
		}, false},
		{"no header map", func(w http.ResponseWriter, _ *http.Request) bool {
			ok := a.Mark(nil)
			_, _ = w.Write([]byte("{}"))
			return ok
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var marked bool
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/mcp/bank", nil)
			a.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { marked = tc.handler(w, r) }), w, r)
			if marked != tc.wantMarked {
				t.Fatalf("Mark = %v, want %v", marked, tc.wantMarked)
			}
			if got := w.Header().Get(wire.HeaderReplayed) == "true"; got != tc.wantMarked {
				t.Fatalf("the answer's %s header set: %v, want %v", wire.HeaderReplayed, got, tc.wantMarked)
			}
			if a.Mark(r.Header) {
				t.Fatal("a finished answer can still be marked")
			}
		})
	}
}
