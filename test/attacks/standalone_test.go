package attacks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/sink"

	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/rig"
)

// The rows of this file attack a running `actgate serve` (the binary, built from this tree) or
// the parts it wires, as a local process that is not the agent, a greedy agent, a slow client,
// a redirecting upstream and a listener on another loopback port would.

// served is one `actgate serve` process on testdata/actgate.yaml plus extra configuration.
type served struct {
	t    *testing.T
	dir  string // the data dir
	base string // http://127.0.0.1:PORT
	up   *rig.Upstreams
	logs *bytes.Buffer
}

// serve starts bin on testdata/actgate.yaml with extra appended (top-level YAML) and waits for
// it to listen.
func serve(t *testing.T, bin, extra string) *served {
	t.Helper()
	return serveOn(t, bin, extra, rig.StartUpstreams(t, false))
}

// serveOn is serve in front of the upstreams u.
func serveOn(t *testing.T, bin, extra string, u *rig.Upstreams) *served {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	conf := string(rig.Config(t, "testdata/actgate.yaml", u, dir)) + extra
	if !strings.Contains(extra, "metrics:") {
		conf += "metrics:\n  address: \"off\"\n"
	}
	cfgFile := filepath.Join(root, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &served{t: t, dir: dir, up: u, logs: &bytes.Buffer{}}
	cmd := exec.Command(bin, "serve", "--config", cfgFile)
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, s.logs}, lockedWriter{&mu, s.logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "endpoint")); err == nil && strings.HasPrefix(string(b), "http://") {
			s.base = strings.TrimSpace(string(b))
			return s
		}
		select {
		case <-exited:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("actgate serve exited:\n%s", s.logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("actgate serve did not write its endpoint")
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// token reads a token file of the gate's data dir (agents/NAME.token, principals/NAME.token).
func (s *served) token(kind, name string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, kind, name+".token"))
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// connect opens an MCP session to server presenting token ("" presents none).
func (s *served) connect(server, token string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Sessions (their limits, their binding to an agent) are the subject: the stateful revision.
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + mcpproxy.Path(server), HTTPClient: hc, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil {
		s.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (s *served) mustConnect(server, token string) *mcp.ClientSession {
	s.t.Helper()
	cs, err := s.connect(server, token)
	if err != nil {
		s.t.Fatalf("connect as %.8s…: %v", token, err)
	}
	return cs
}

// moments lists the moments pending for alice through the moments API.
func (s *served) moments() []struct{ ID, Agent, Session string } {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.base+"/v1/moments", nil)
	req.Header.Set("Authorization", "Bearer "+s.token("principals", principal))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Moments []struct{ ID, Agent, Session string } `json:"moments"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		s.t.Fatal(err)
	}
	return out.Moments
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// TestStandaloneServe mounts, against a running `actgate serve`, the attacks of a local
// process that is not the agent, of agents that hold more than their share, and of slow
// clients. Before agent authentication the gate took any local process for the agent; before
// the limits 2,000 sessions or pending moments grew it without bound; before read timeouts a
// slow client held its connection forever.
func TestStandaloneServe(t *testing.T) {
	bin := testutil.BuildActgate(t, "")

	t.Run("a local process that is not the agent", func(t *testing.T) {
		s := serve(t, bin, "agents:\n- name: other-agent\n")
		// No token, a wrong one, the principal's: nothing is read, nothing runs.
		for name, tok := range map[string]string{"none": "", "wrong": strings.Repeat("0", 64), "principal's": s.token("principals", principal)} {
			if cs, err := s.connect("tools", tok); err == nil {
				_ = cs.Close()
				t.Fatalf("%s token: a session was opened", name)
			}
		}
		for _, path := range []string{mcpproxy.Path("tools"), mcpproxy.Path("pay")} {
			req, _ := http.NewRequest(http.MethodPost, s.base+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), string(ef.EFAgentUnauthenticated)) {
				t.Fatalf("%s without a token: HTTP %d %s", path, resp.StatusCode, body)
			}
		}
		if n := s.up.Tools.Count("search"); n != 0 {
			t.Fatalf("search ran %d times for unauthenticated callers", n)
		}
		// Each agent, with its own token, is named in the moments it raises.
		mine := s.mustConnect("pay", s.token("agents", agentName))
		other := s.mustConnect("pay", s.token("agents", "other-agent"))
		escalation(t, call(t, mine, "payout_create", `{"to":"acme","amount":10}`, "user"))
		escalation(t, call(t, other, "payout_create", `{"to":"acme","amount":20}`, "user"))
		agents := map[string]int{}
		for _, m := range s.moments() {
			agents[m.Agent]++
		}
		if agents[agentName] != 1 || agents["other-agent"] != 1 || len(agents) != 2 {
			t.Fatalf("moments name the agents %v, want one each of %s and other-agent", agents, agentName)
		}
		// One agent cannot ride another's session.
		req, _ := http.NewRequest(http.MethodPost, s.base+mcpproxy.Path("pay"), strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"payout_create","arguments":{"to":"acme","amount":30}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", mine.ID())
		req.Header.Set("Mcp-Protocol-Version", mine.InitializeResult().ProtocolVersion)
		req.Header.Set("Authorization", "Bearer "+s.token("agents", "other-agent"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("other-agent on %s's session: HTTP %d", agentName, resp.StatusCode)
		}
		if n := len(s.moments()); n != 2 {
			t.Fatalf("%d moments after the hijack attempt, want 2", n)
		}
	})

	t.Run("MCP 2026-07-28 admission", func(t *testing.T) {
		s := serve(t, bin, "")
		tok := s.token("agents", agentName)
		const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		post := func(host, body string, hdr map[string]string) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, s.base+mcpproxy.Path("tools"), strings.NewReader(body))
			if host != "" {
				req.Host = host
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(out)
		}
		callHdr := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "search"}
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"rebound"},` + meta + `}}`
		// DNS rebinding: a page of evil.example.com whose name resolves to the gate's loopback
		// address, with the agent's token (a browser would not have it; a local proxy might).
		for _, rq := range []struct{ name, body string }{
			{"server/discover", `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{` + meta + `}}`},
			{"tools/call", call},
		} {
			hdr := callHdr
			if rq.name == "server/discover" {
				hdr = map[string]string{"Mcp-Method": "server/discover"}
			}
			if status, out := post("evil.example.com", rq.body, hdr); status != http.StatusForbidden || !strings.Contains(out, string(ef.EFHostRefused)) {
				t.Fatalf("%s with Host evil.example.com: HTTP %d %s, want 403 %s", rq.name, status, out, ef.EFHostRefused)
			}
		}
		// A tools/call sent as a notification (no id): refused, never relayed undecided.
		note := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search","arguments":{"q":"unjournaled"},` + meta + `}}`
		if status, out := post("", note, callHdr); status != http.StatusBadRequest || !strings.Contains(out, string(ef.EFNotificationInvalid)) {
			t.Fatalf("tools/call without an id: HTTP %d %s, want 400 %s", status, out, ef.EFNotificationInvalid)
		}
		if n := s.up.Tools.Count("search"); n != 0 {
			t.Fatalf("search ran %d times", n)
		}
		// The same call, addressed to the gate by its own name and with an id, runs once.
		if status, out := post("", call, callHdr); status != http.StatusOK || s.up.Tools.Count("search") != 1 {
			t.Fatalf("a 2026-07-28 tools/call: HTTP %d %s; search ran %d times, want once", status, out, s.up.Tools.Count("search"))
		}
	})

	t.Run("sessions beyond the limits", func(t *testing.T) {
		s := serve(t, bin, "agents:\n- name: other-agent\nlimits:\n  sessions: 4\n  sessionsPerAgent: 3\n")
		mine, theirs := s.token("agents", agentName), s.token("agents", "other-agent")
		var held []*mcp.ClientSession
		for range 3 {
			held = append(held, s.mustConnect("tools", mine))
		}
		if _, err := s.connect("tools", mine); err == nil || !strings.Contains(err.Error(), string(ef.EFSessionLimit)) {
			t.Fatalf("a 4th session of one agent: %v, want %s", err, ef.EFSessionLimit)
		}
		s.mustConnect("pay", theirs) // other agents keep their share
		if _, err := s.connect("pay", theirs); err == nil || !strings.Contains(err.Error(), string(ef.EFSessionLimit)) {
			t.Fatalf("a 5th session in all: %v, want %s", err, ef.EFSessionLimit)
		}
		_ = held[0].Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			cs, err := s.connect("tools", mine)
			if err == nil {
				_ = cs.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a closed session's place was not freed: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("pending moments beyond the limits", func(t *testing.T) {
		s := serve(t, bin, "limits:\n  pendingMomentsPerSession: 3\n  pendingMomentsPerAgent: 5\n")
		tok := s.token("agents", agentName)
		one, two := s.mustConnect("pay", tok), s.mustConnect("pay", tok)
		for i := range 3 {
			escalation(t, call(t, one, "payout_create", fmt.Sprintf(`{"to":"acme","amount":%d}`, i+1), "user"))
		}
		refused(t, call(t, one, "payout_create", `{"to":"acme","amount":99}`, "user"), string(ef.EFMomentLimit))
		for i := range 2 {
			escalation(t, call(t, two, "payout_create", fmt.Sprintf(`{"to":"acme","amount":%d}`, 10+i), "user"))
		}
		refused(t, call(t, two, "payout_create", `{"to":"acme","amount":98}`, "user"), string(ef.EFMomentLimit))
		// A proposed moment counts the same.
		prop := `{"synopsis":"s","findings":["f"],"recommendations":["r"],"stem":"Which?","recommended":0,"options":[` +
			`{"label":"a","reasoning":"r","tool":"payout_create","server":"pay","args":{"to":"acme","amount":1000}},` +
			`{"label":"b","reasoning":"r","tool":"payout_create","server":"pay","args":{"to":"acme","amount":2000}}]}`
		refused(t, call(t, two, sink.RequestBindingMomentTool, prop, ""), string(ef.EFMomentLimit))
		if n := len(s.moments()); n != 5 {
			t.Fatalf("%d moments pending, want the limit 5", n)
		}
		if n := s.up.Pay.Count("payout_create"); n != 0 {
			t.Fatalf("payout_create ran %d times", n)
		}
	})

	t.Run("slow clients", func(t *testing.T) {
		s := serve(t, bin, "limits:\n  readTimeout: 2s\n")
		addr := strings.TrimPrefix(s.base, "http://")
		var conns []net.Conn
		for i := range 50 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			path := mcpproxy.Path("tools")
			if i%3 == 2 {
				path = "/v1/moments/x/resolve"
			}
			if i%2 == 0 { // headers that never end
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nX-Slow: 1\r\n", path, addr)
			} else { // a body that never ends
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
					"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", path, addr, s.token("agents", agentName))
			}
		}
		stop := make(chan struct{})
		defer close(stop)
		go func() { // trickle a byte every 500ms to each
			tk := time.NewTicker(500 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
					for _, c := range conns {
						_, _ = c.Write([]byte(" "))
					}
				}
			}
		}()
		// Each connection is read until the gate closes it (EOF or a reset, after whatever
		// answer it wrote) or 8s pass (a timeout: still open).
		stillOpen := make(chan bool, len(conns))
		for _, c := range conns {
			go func() {
				_ = c.SetReadDeadline(time.Now().Add(8 * time.Second))
				_, err := io.Copy(io.Discard, c)
				ne, ok := err.(net.Error)
				stillOpen <- ok && ne.Timeout()
			}()
		}
		open := 0
		for range conns {
			if <-stillOpen {
				open++
			}
		}
		for _, c := range conns {
			_ = c.Close()
		}
		if open != 0 {
			t.Fatalf("%d of %d slow connections were still open after 8s (readTimeout 2s)", open, len(conns))
		}
		// The gate still serves.
		if _, err := s.connect("tools", s.token("agents", agentName)); err != nil {
			t.Fatalf("the gate after the slow clients: %v", err)
		}
	})
}

// TestStandaloneFootprintAtCaps fills a running gate to its default limits — 256 sessions in
// all (limits.sessions), 64 for each of four agents (limits.sessionsPerAgent), and 64 pending
// moments for each (limits.pendingMomentsPerAgent, at most 16 a session) — checks that one
// more of each is refused with its code, and logs the process's RSS and goroutine count there
// (the numbers docs/security.md records). Then one agent reads a 1 MB resource 32 times on
// each of 8 of its sessions from an upstream whose answer streams carry event ids (each answer
// a resumable stream with a log): the gate keeps no log a resumption could not use and bounds
// the rest per session and in all (mcpproxy resume.go), so its RSS grows by far less than the
// 256 MB those reads carried (before, each session kept its last 64 logs whole: ~4 GiB for
// one agent at the caps).
func TestStandaloneFootprintAtCaps(t *testing.T) {
	bin := testutil.BuildActgate(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := ln.Addr().String()
	_ = ln.Close()
	agents := []string{agentName, "agent-2", "agent-3", "agent-4"}
	u := rig.StartUpstreams(t, false)
	u.Pay = rig.StartUpstream(t, mcptest.Options{Name: "pay", EventStore: true}, "payout_create")
	s := serveOn(t, bin, "metrics:\n  address: "+metrics+"\nagents:\n- name: agent-2\n- name: agent-3\n- name: agent-4\n- name: agent-5\n", u)
	rss0, g0 := s.footprint(metrics)
	held := map[string][]*mcp.ClientSession{}
	for _, a := range agents {
		tok := s.token("agents", a)
		for range gateconfig.DefaultMaxSessionsPerAgent {
			held[a] = append(held[a], s.mustConnect("pay", tok))
		}
	}
	if _, err := s.connect("pay", s.token("agents", agentName)); err == nil || !strings.Contains(err.Error(), string(ef.EFSessionLimit)) {
		t.Fatalf("session 65 of one agent: %v, want %s", err, ef.EFSessionLimit)
	}
	if _, err := s.connect("pay", s.token("agents", "agent-5")); err == nil || !strings.Contains(err.Error(), string(ef.EFSessionLimit)) {
		t.Fatalf("session 257 in all: %v, want %s", err, ef.EFSessionLimit)
	}
	rssS, gS := s.footprint(metrics)
	amount := 1000 // above the policy's alternative (100), so each moment offers two calls
	for _, a := range agents {
		n := 0
		for i := 0; n < gateconfig.DefaultMaxPendingMomentsPerAgent; i++ {
			for range gateconfig.DefaultMaxPendingMomentsPerSession {
				if n == gateconfig.DefaultMaxPendingMomentsPerAgent {
					break
				}
				amount++
				escalation(t, call(t, held[a][i], "payout_create", fmt.Sprintf(`{"to":"acme","amount":%d}`, amount), "user"))
				n++
			}
		}
		refused(t, call(t, held[a][10], "payout_create", `{"to":"acme","amount":9999}`, "user"), string(ef.EFMomentLimit))
	}
	rssM, gM := s.footprint(metrics)
	if n := len(s.moments()); n != 4*gateconfig.DefaultMaxPendingMomentsPerAgent {
		t.Fatalf("%d moments pending, want %d", n, 4*gateconfig.DefaultMaxPendingMomentsPerAgent)
	}
	t.Logf("actgate serve footprint: idle RSS %d KiB, %d goroutines; at 256 sessions RSS %d KiB, %d goroutines; "+
		"with 256 pending moments too RSS %d KiB, %d goroutines", rss0, g0, rssS, gS, rssM, gM)
	if gM > g0+256*8 {
		t.Errorf("%d goroutines at the caps (%d idle): more than 8 per session", gM, g0)
	}

	big := strings.Repeat("r", 1_000_000) // under the 1 MiB a log may hold with its framing
	u.Pay.MCP().AddResource(&mcp.Resource{URI: "mcptest://big", Name: "big", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mcptest://big", Text: big}}}, nil
		})
	for _, cs := range held[agentName][:8] {
		for range 32 {
			res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcptest://big"})
			if err != nil || len(res.Contents) != 1 || len(res.Contents[0].Text) != len(big) {
				t.Fatalf("resources/read of 1 MB: %v", err)
			}
		}
	}
	rssR, gR := s.footprint(metrics)
	t.Logf("after 256 reads of a 1 MB resource on resumable streams: RSS %d KiB, %d goroutines", rssR, gR)
	if rssR-rssM > 128<<10 {
		t.Errorf("the gate's RSS grew by %d MiB over 256 reads of 1 MB on resumable streams: the event logs are not bounded", (rssR-rssM)>>10)
	}
}

// footprint reads the gate's resident set (KiB) and goroutine count from its own metrics
// (process_resident_memory_bytes, go_goroutines).
func (s *served) footprint(metrics string) (rssKiB, goroutines int) {
	s.t.Helper()
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "process_resident_memory_bytes":
			rssKiB = int(v / 1024)
		case "go_goroutines":
			goroutines = int(v)
		}
	}
	return rssKiB, goroutines
}

// TestUpstreamRedirectIsNotFollowed: the bound upstream answers the permitted email_send with
// 307 to another origin. Before, the proxy's clients followed it: the call ran at that origin
// while the journal and receipts named the bound one. Now the redirect is the upstream's
// answer: the call ran nowhere, the journal records FAILED and the agent sees
// EF_UPSTREAM_REDIRECT.
func TestUpstreamRedirectIsNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			// The redirect's target is the attacker's: it runs whatever tools/call reaches it.
			var ranElsewhere atomic.Int64
			elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"email_send"`)) {
					ranElsewhere.Add(1)
				}
				var req struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal(body, &req)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"sent"}]}}`, req.ID)
			}))
			t.Cleanup(elsewhere.Close)
			// The bound upstream: a real one behind a front that redirects each tools/call.
			var front http.Handler
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { front.ServeHTTP(w, r) }))
			t.Cleanup(redirector.Close)
			g := newGateBound(t, "tools", redirector.URL)
			target, err := url.Parse(g.Up.Tools.URL)
			if err != nil {
				t.Fatal(err)
			}
			rp := httputil.NewSingleHostReverseProxy(target)
			rp.FlushInterval = -1 // event streams pass as they come
			front = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"tools/call"`)) {
					w.Header().Set("Location", elsewhere.URL)
					w.WriteHeader(status)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				rp.ServeHTTP(w, r) // session setup, tools/list: the real upstream answers
			})
			cs := agent(t, g.Endpoint("tools"))
			r := call(t, cs, "email_send", `{"to":"bob@example.com","body":"the statement"}`, "user")
			if n := ranElsewhere.Load(); n != 0 {
				t.Fatalf("email_send ran %d times at the redirect's target", n)
			}
			if n := g.Up.Tools.Count("email_send"); n != 0 {
				t.Fatalf("email_send ran %d times at the bound upstream", n)
			}
			if !r.IsError || code(r) != string(ef.EFUpstreamRedirect) {
				t.Fatalf("result isError=%v code %q: %s", r.IsError, code(r), text(r))
			}
			recs, err := g.Store.InState(context.Background(), journal.StateFailed)
			if err != nil {
				t.Fatal(err)
			}
			if g.journaled() != 1 || len(recs) != 1 {
				t.Fatalf("the dispatch is not recorded FAILED: %d records, %d FAILED", g.journaled(), len(recs))
			}
		})
	}
}

// newGateBound is newGate with policy server's URL replaced by serverURL (the upstreams still
// run).
func newGateBound(t *testing.T, server, serverURL string) *gate {
	t.Helper()
	return newGateWith(t, func(cfg *gateconfig.Config) {
		for i := range cfg.Policy.Servers {
			if cfg.Policy.Servers[i].Name == server {
				cfg.Policy.Servers[i].URL = serverURL
			}
		}
	})
}

// TestAgentFieldsInLogsAreBounded: a 1 MiB tool name (and a newline trying to forge a line)
// reaches the logs bounded, on every call, with a digest that tells it apart.
func TestAgentFieldsInLogsAreBounded(t *testing.T) {
	g := newGate(t)
	var logs lineLog
	p, err := mcpproxy.New(mcpproxy.Config{Server: "tools", URL: g.Up.Tools.URL, Gate: g.Sink, Agent: agentName,
		CallTimeout: g.Runtime().Config().Timeout(), Logger: logr.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	mux := http.NewServeMux()
	mux.Handle(mcpproxy.Path("tools"), p)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cs := agent(t, srv.URL+mcpproxy.Path("tools"))
	huge := strings.Repeat("x", 1<<20)
	for _, name := range []string{huge, huge + "y", "search\nlevel=ERROR msg=\"forged\""} {
		r := call(t, cs, name, `{}`, "user")
		if !r.IsError {
			t.Fatalf("an undeclared tool ran: %s", text(r))
		}
	}
	lines := logs.all()
	if len(lines) < 3 {
		t.Fatalf("%d log lines, want one per refused call", len(lines))
	}
	digests := map[string]bool{}
	for _, l := range lines {
		if len(l) > 2048 {
			t.Fatalf("a log line of %d bytes: %.200s…", len(l), l)
		}
		if strings.Contains(l, "\n") {
			t.Fatalf("a log line holds a line break: %q", l)
		}
		if m := regexp.MustCompile(`sha256:[0-9a-f]{16}`).FindString(l); m != "" {
			digests[m] = true
		}
	}
	if len(digests) < 3 {
		t.Fatalf("the three tool names are not told apart by digest in the logs: %v", digests)
	}
}

// lineLog is a logr sink that keeps each line it is given (message and key/values, %v).
type lineLog struct {
	mu    sync.Mutex
	lines []string
	kv    []any
}

func (l *lineLog) Init(logr.RuntimeInfo)  {}
func (l *lineLog) Enabled(level int) bool { return true }
func (l *lineLog) Info(_ int, msg string, kv ...any) {
	l.add(msg, kv)
}
func (l *lineLog) Error(err error, msg string, kv ...any) { l.add(msg+" "+err.Error(), kv) }
func (l *lineLog) WithValues(kv ...any) logr.LogSink {
	return &lineLogChild{root: l, kv: append(append([]any(nil), l.kv...), kv...)}
}
func (l *lineLog) WithName(string) logr.LogSink { return l }

func (l *lineLog) add(msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(append([]any{msg}, kv...)...))
}

func (l *lineLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

type lineLogChild struct {
	root *lineLog
	kv   []any
}

func (c *lineLogChild) Init(logr.RuntimeInfo)  {}
func (c *lineLogChild) Enabled(level int) bool { return true }
func (c *lineLogChild) Info(_ int, msg string, kv ...any) {
	c.root.add(msg, append(append([]any(nil), c.kv...), kv...))
}
func (c *lineLogChild) Error(err error, msg string, kv ...any) {
	c.root.add(msg+" "+err.Error(), append(append([]any(nil), c.kv...), kv...))
}
func (c *lineLogChild) WithValues(kv ...any) logr.LogSink {
	return &lineLogChild{root: c.root, kv: append(append([]any(nil), c.kv...), kv...)}
}
func (c *lineLogChild) WithName(string) logr.LogSink { return c }

// TestConsoleCredentialStaysOnItsPort: the principal's browser opens the console and then
// visits another listener on the same machine's loopback (another local user's). Cookies are
// scoped by host, not port, so before, that listener received the console's cookie, whose value
// was also the page's anti-CSRF token, and resolved alice's moment with a forged POST. Now it
// receives nothing of the console's credential, and every forgery built from what it saw is
// refused: the moment stays pending and the payout does not run.
func TestConsoleCredentialStaysOnItsPort(t *testing.T) {
	g := newGate(t)
	cs := agent(t, g.Endpoint("pay"))
	momentID, _ := escalation(t, call(t, cs, "payout_create", `{"to":"acme","amount":2500}`, "user"))

	con, err := console.New(console.Options{Backend: sinkBackend{g}, Principal: principal, Surface: "attacks"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := console.Listen(console.DefaultAddress)
	if err != nil {
		t.Fatal(err)
	}
	csrv := &http.Server{Handler: con}
	go func() { _ = csrv.Serve(ln) }()
	t.Cleanup(func() { _ = csrv.Close() })

	// The browser: one cookie jar for every origin, as browsers keep cookies (RFC 6265 §8.5).
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(con.URL(ln))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), momentID) {
		t.Fatalf("the console did not show the moment: HTTP %d", resp.StatusCode)
	}

	// The other listener records everything the browser sends it.
	var seen []string
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range r.Cookies() {
			seen = append(seen, c.Value)
		}
		if ref := r.Header.Get("Referer"); ref != "" {
			seen = append(seen, ref)
		}
	}))
	t.Cleanup(other.Close)
	if resp, err := browser.Get(other.URL + "/"); err == nil {
		resp.Body.Close()
	}
	consoleURL := "http://" + ln.Addr().String()
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	for _, v := range got {
		if strings.Contains(con.URL(ln), v) || strings.Contains(v, strings.TrimPrefix(con.URL(ln), consoleURL)) {
			t.Errorf("the other port received the console's key: %q", v)
		}
	}

	// Forge resolutions from what it saw, as a local process can (any headers it likes).
	ms, _ := sinkBackend{g}.List(context.Background())
	var digest string
	for _, m := range ms {
		if m.ID == momentID {
			digest = m.Envelope.Digest()
		}
	}
	for _, v := range append(got, "") {
		for _, target := range []string{consoleURL + "/resolve", consoleURL + "/" + v + "/resolve"} {
			form := url.Values{"token": {v}, "moment": {momentID}, "envelope": {digest}, "choice": {"option:0"}}
			req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", consoleURL)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			for _, c := range got {
				req.Header.Add("Cookie", fmt.Sprintf("actgate_console_%d=%s", ln.Addr().(*net.TCPAddr).Port, c))
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	if m := g.moment(momentID); m.Resolved {
		t.Fatalf("a forged POST resolved alice's moment (%s)", m.Resolution)
	}
	if n := g.Up.Pay.Count("payout_create"); n != 0 {
		t.Fatalf("payout_create ran %d times", n)
	}
}

// sinkBackend is the console's Backend over the attacked gate's sink, as alice.
type sinkBackend struct{ g *gate }

func (b sinkBackend) List(ctx context.Context) ([]console.Moment, error) {
	ms, err := b.g.Sink.Moments(ctx, sink.MomentFilter{Pending: true})
	if err != nil {
		return nil, err
	}
	var out []console.Moment
	for _, m := range ms {
		out = append(out, console.Moment{ID: m.ID, Principal: principal, Agent: m.Agent, Envelope: m.Envelope})
	}
	return out, nil
}

func (b sinkBackend) Resolve(ctx context.Context, id string, raw []byte) (console.Result, error) {
	r, err := b.g.Sink.Resolve(ctx, id, principal, raw)
	if err != nil {
		return console.Result{}, fmt.Errorf("%w: %v", console.ErrRefused, err)
	}
	return console.Result{Message: fmt.Sprintf("%s resolved: %v", id, r.Kind)}, nil
}
