package wire_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// TestReplayCounter counts exactly the answers whose HeaderReplayed is "true", and shares its
// count between counters given one N.
func TestReplayCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("mark"); v != "" {
			w.Header().Set(wire.HeaderReplayed, v)
		}
	}))
	t.Cleanup(srv.Close)
	var n atomic.Int64
	a, b := &http.Client{Transport: wire.ReplayCounter{N: &n}}, &http.Client{Transport: wire.ReplayCounter{Base: http.DefaultTransport, N: &n}}
	for _, tc := range []struct {
		c    *http.Client
		mark string
		want int64
	}{{a, "", 0}, {a, "true", 1}, {b, "false", 1}, {b, "TRUE", 1}, {b, "true", 2}} {
		resp, err := tc.c.Get(srv.URL + "/?mark=" + tc.mark)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := n.Load(); got != tc.want {
			t.Fatalf("after an answer marked %q: %d, want %d", tc.mark, got, tc.want)
		}
	}
}
