package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// holdingListens is a 2026-07-28 upstream in front of a stateless mcptest server that answers
// subscriptions/listen itself: the response's headers (status 200, ctype) at once, flushed,
// then nothing until release is closed, then body(upstream id) (an application/json answer's
// whole body, or an event stream's last event). Everything else is the mcptest server's.
type holdingListens struct {
	ctype   string
	body    func(id json.RawMessage) string
	release chan struct{}
	url     string
}

func (h *holdingListens) wrap(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get(wire.HeaderMethod) != wire.MethodListen {
			rp.ServeHTTP(w, r)
			return
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &req)
		w.Header().Set("Content-Type", h.ctype)
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, h.body(req.ID))
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return srv.URL
}

// postListen POSTs a 2026-07-28 subscriptions/listen with id 42 to endpoint and returns the
// response once its headers arrive, failing if they do not within d.
func postListen(t *testing.T, endpoint string, d time.Duration) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":42,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(wire.HeaderProtocolVersion, "2026-07-28")
	req.Header.Set(wire.HeaderMethod, wire.MethodListen)
	timer := time.AfterFunc(d, cancel)
	resp, err := http.DefaultClient.Do(req)
	if !timer.Stop() || err != nil {
		t.Fatalf("no response headers to the listen within %s (the upstream's came at once): %v", d, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestListenRelayedHeadersAtOnce: an upstream that answers subscriptions/listen with its
// headers at once and its body much later (a listen lives until one side ends it) has the
// gate's response headers reach the agent at once too, as they reach a client of the upstream
// direct, in either framing; the body that follows is relayed as ever: the upstream's
// response under the agent's id, and, for a body that is not an answer to the request, the
// gate's error (never the upstream's bytes).
func TestListenRelayedHeadersAtOnce(t *testing.T) {
	complete := func(id json.RawMessage) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete"}}`, id)
	}
	for _, tc := range []struct {
		name, ctype string
		body        func(json.RawMessage) string
		wantError   bool
	}{
		{"json", wire.MediaJSON, complete, false},
		{"json-not-an-answer", wire.MediaJSON, func(json.RawMessage) string { return `{"jsonrpc":"2.0","id":"someone-else","result":{}}` }, true},
		{"json-garbage", wire.MediaJSON, func(json.RawMessage) string { return `<html>not json` }, true},
		{"event-stream", wire.MediaSSE, func(id json.RawMessage) string { return "event: message\ndata: " + complete(id) + "\n\n" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &holdingListens{ctype: tc.ctype, body: tc.body, release: make(chan struct{})}
			f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true}, configure: func(c *Config) { c.URL = h.wrap(t, c.URL) }})

			direct := postListen(t, h.url, 2*time.Second)
			gated := postListen(t, f.endpoint(), 2*time.Second)
			if gated.StatusCode != http.StatusOK || !strings.HasPrefix(gated.Header.Get("Content-Type"), tc.ctype) {
				t.Fatalf("gated listen: HTTP %d %q, want 200 %s as direct (%d %q)", gated.StatusCode, gated.Header.Get("Content-Type"),
					tc.ctype, direct.StatusCode, direct.Header.Get("Content-Type"))
			}
			close(h.release)
			raw, err := io.ReadAll(gated.Body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype == wire.MediaSSE {
				data, ok := strings.CutPrefix(strings.TrimSpace(string(raw[strings.LastIndex(string(raw), "data: "):])), "data: ")
				if !ok {
					t.Fatalf("gated listen body: %q, want its response event", raw)
				}
				raw = []byte(data)
			}
			var m struct {
				ID     any             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("gated listen body %q: %v", raw, err)
			}
			if m.ID != float64(42) {
				t.Fatalf("gated listen answer %s: id %v, want the agent's 42", raw, m.ID)
			}
			if tc.wantError {
				if m.Error == nil || m.Error.Code != wire.CodeInternalError || m.Result != nil {
					t.Fatalf("gated listen answer %s, want the gate's -32603 and nothing of the upstream's", raw)
				}
				return
			}
			if m.Error != nil || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
				t.Fatalf("gated listen answer %s, want the upstream's result", raw)
			}
		})
	}
}
