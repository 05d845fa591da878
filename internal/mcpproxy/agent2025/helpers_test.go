package agent2025

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

// The tests of this package that need a session's insides run the session side alone: a real
// gate (testdata/policy.yaml of internal/mcpproxy, a seeded bbolt store) and a real upstream MCP
// server (mcptest), the Handler served over loopback HTTP as internal/mcpproxy mounts it after
// admission. The proxy's own tests (internal/mcpproxy) drive the same side through Proxy.

const agentName = "agent-1"

// fixture is the session side in front of an upstream.
type fixture struct {
	up *mcptest.Server
	h  *Handler
	// endpoint is the agent-facing URL.
	endpoint string
}

func newFixture(tb testing.TB, o mcptest.Options) *fixture {
	tb.Helper()
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance", Description: "Reads a balance."}}, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = up.Close() })
	u, err := url.Parse(up.URL)
	if err != nil {
		tb.Fatal(err)
	}
	client := upstream.Client(&upstream.Transport{Base: http.DefaultTransport.(*http.Transport).Clone(), Origin: upstream.Origin(u)})
	h := New(Config{
		Server: "bank", URL: up.URL, Gate: newGate(tb, up.URL), Agent: agentName,
		CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second,
		AgentOf: func(context.Context) string { return agentName },
	}, logr.Discard(), nil, client, client, &tasks.Owners{Max: 64, MaxPerAgent: 16})
	srv := httptest.NewServer(http.HandlerFunc(h.Serve))
	tb.Cleanup(func() {
		h.Close()
		srv.Close()
		client.CloseIdleConnections()
	})
	return &fixture{up: up, h: h, endpoint: srv.URL + "/mcp/bank"}
}

// newGate builds the sink on a seeded bbolt store with internal/mcpproxy's test policy, its bank
// server at bankURL.
func newGate(tb testing.TB, bankURL string) *sink.Gate {
	tb.Helper()
	raw, err := os.ReadFile("../testdata/policy.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	spec, err := policy.ParseSpec(bytes.ReplaceAll(raw, []byte("{{BANK}}"), []byte(bankURL)))
	if err != nil {
		tb.Fatal(err)
	}
	compiled, err := policy.Compile("default/proxy-test", spec, 1)
	if err != nil {
		tb.Fatal(err)
	}
	st, signer := testutil.SeededStore(tb, "agent2025 tests")
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := sink.New(sink.Options{SinkID: "proxy-test", Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st, Signer: signer, IDs: ids})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// rawSession is an agent session driven over plain HTTP.
type rawSession struct {
	tb                tb
	endpoint, session string
	version           string
}

type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// newRawSession initializes a session at version and sends notifications/initialized.
func newRawSession(t tb, endpoint, version string) *rawSession {
	t.Helper()
	r := &rawSession{tb: t, endpoint: endpoint}
	status, hdr, body := r.exchange(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+
		`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	r.session = hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || r.session == "" {
		t.Fatalf("initialize: HTTP %d, no session id: %s", status, body)
	}
	r.version = version
	r.exchange(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	return r
}

// exchange sends one agent HTTP request on the session and returns the answer.
func (r *rawSession) exchange(method, body string, hdr map[string]string) (int, http.Header, string) {
	r.tb.Helper()
	req, err := http.NewRequest(method, r.endpoint, strings.NewReader(body))
	if err != nil {
		r.tb.Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
		req.Header.Set("Mcp-Protocol-Version", r.version)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

type sseEvent struct{ id, data string }

// getStream opens the agent's GET stream on the session (with Last-Event-ID when last is not
// empty) and returns its events as they come; cancel closes it.
func (r *rawSession) getStream(last string) (events <-chan sseEvent, status int, cancel func()) {
	r.tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint, nil)
	if err != nil {
		r.tb.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", r.session)
	req.Header.Set("Mcp-Protocol-Version", r.version)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		r.tb.Fatal(err)
	}
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				ch <- ev
				ev = sseEvent{}
				continue
			}
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				ev.id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
	}()
	r.tb.Cleanup(cancel)
	return ch, resp.StatusCode, cancel
}

// nextEvent returns the next event with data or an id, failing the test after a while.
func nextEvent(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the GET stream ended")
			}
			if ev.id != "" || ev.data != "" {
				return ev
			}
		case <-timeout:
			t.Fatal("no event on the GET stream")
		}
	}
}
