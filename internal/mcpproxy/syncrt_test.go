package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// TestDirectUpstreamKeepsOneConnection: through the whole proxy, sequential hot-path calls to
// an upstream that answers with an event stream or a JSON body share one upstream connection;
// so do calls whose stream ends well after their response (the end is read in the background
// and the connection returned to the pool then).
func TestDirectUpstreamKeepsOneConnection(t *testing.T) {
	// ended has the end of each late-ending stream: the next call waits for it, then for the
	// pause, so the machine's load does not decide whether the connection was back in the pool.
	ended := make(chan struct{}, 16)
	lateEnd := func(w http.ResponseWriter, r *http.Request) bool {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.Method != wire.MethodCallTool {
			r.Body = io.NopCloser(bytes.NewReader(body))
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"late end\"}]}}\n\n", req.ID)
		w.(http.Flusher).Flush()
		time.Sleep(30 * time.Millisecond) // the stream's end comes after the agent has its answer
		ended <- struct{}{}
		return true
	}
	for _, c := range []struct {
		name  string
		opts  mcptest.Options
		pause time.Duration // between calls: time for a stream end read in the background
		want  string
	}{
		{"event stream", mcptest.Options{}, 20 * time.Millisecond, `{"ok":true}`},
		{"JSON", mcptest.Options{JSONResponse: true}, 20 * time.Millisecond, `{"ok":true}`},
		{"stream ends late", mcptest.Options{Intercept: lateEnd}, 50 * time.Millisecond, "late end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var dials atomic.Int32
			tr := http.DefaultTransport.(*http.Transport).Clone()
			d := &net.Dialer{}
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			}
			f := newFixture(t, fixtureOpts{upstream: c.opts, configure: func(cfg *Config) { cfg.Transport = tr }})
			cs := f.agent()
			var before int32
			for i := range 8 {
				if i == 1 {
					before = dials.Load() // the SDK client's own connection(s) opened the session
				}
				res := call(t, cs, "get_balance", fmt.Sprintf(`{"account":"a%d"}`, i), nil)
				if res.IsError || !strings.Contains(text(res), c.want) {
					t.Fatalf("call %d: isError=%v %q", i, res.IsError, text(res))
				}
				if c.opts.Intercept != nil {
					select {
					case <-ended:
					case <-time.After(5 * time.Second):
						t.Fatalf("call %d: the upstream's stream did not end", i)
					}
				}
				time.Sleep(c.pause)
			}
			if n := dials.Load() - before; n != 0 {
				t.Fatalf("calls 2-8 dialled %d new upstream connections, want 0", n)
			}
			if got := f.proxy.directUpstream(); got != 8 {
				t.Fatalf("the direct upstream path carried %d calls, want 8", got)
			}
		})
	}
}
