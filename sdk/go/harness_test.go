package actgate_test

// The real parts every test runs against: a real `actgate serve` built from this repository
// with a configuration of the test's own, a real upstream MCP server (the released MCP Go SDK)
// that counts its own invocations, the host's tools calling that upstream as an MCP client, and
// a scripted model server on loopback that the vendor SDKs are pointed at.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	actgate "github.com/actgate/actgate/sdk/go"
)

// actgateDir holds the actgate binary built from ../../cmd/actgate, once per process, by the
// first test that starts a gate (fuzz workers and gate-less tests build nothing).
var (
	actgateDir   string
	actgateOnce  sync.Once
	actgatePath  string
	actgateBuild error
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		// A host process of TestHostKilledAfterConsumeNeverInvokes, not a test run.
		os.Exit(hostProcessMain())
	}
	code := m.Run()
	if actgateDir != "" {
		_ = os.RemoveAll(actgateDir)
	}
	os.Exit(code)
}

// actgateBin builds actgate from this repository (the first call) and returns its path.
func actgateBin(t testing.TB) string {
	t.Helper()
	actgateOnce.Do(func() {
		dir, err := os.MkdirTemp("", "actgate-sdk-go-")
		if err != nil {
			actgateBuild = err
			return
		}
		actgateDir, actgatePath = dir, filepath.Join(dir, "actgate")
		build := exec.Command("go", "build", "-o", actgatePath, "./cmd/actgate")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			actgateBuild = fmt.Errorf("building actgate from ../../cmd/actgate: %w\n%s", err, out)
		}
	})
	if actgateBuild != nil {
		t.Fatal(actgateBuild)
	}
	return actgatePath
}

// ---- the upstream MCP server ----

const upstreamToken = "sdk-go-upstream-token"

// upstream is a tiny bank as an MCP server: it counts every invocation of each tool itself.
type upstream struct {
	URL    string
	mu     sync.Mutex
	counts map[string]int
	args   map[string][]json.RawMessage
}

func (u *upstream) Count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[tool]
}

func (u *upstream) Args(tool string) []json.RawMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]json.RawMessage(nil), u.args[tool]...)
}

func startUpstream(t testing.TB) *upstream {
	t.Helper()
	u := &upstream{counts: map[string]int{}, args: map[string][]json.RawMessage{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "finance", Version: "v1"}, nil)
	add := func(name, schema string, answer func(args json.RawMessage) string) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(schema)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				u.mu.Lock()
				u.counts[name]++
				u.args[name] = append(u.args[name], append(json.RawMessage(nil), req.Params.Arguments...))
				u.mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer(req.Params.Arguments)}}}, nil
			})
	}
	add("get_balance", `{"type":"object","properties":{"account":{"type":"string"}}}`, func(json.RawMessage) string { return `{"balance":1000}` })
	add("send_payment", `{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`,
		func(a json.RawMessage) string { return `{"paid":` + string(a) + `}` })
	add("email_send", `{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"}},"required":["to"]}`,
		func(json.RawMessage) string { return `{"sent":true}` })
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u.URL = "http://" + ln.Addr().String() + "/mcp"
	return u
}

// hostTools are the host's tools: each calls the upstream MCP server as an MCP client (the host
// loop runs the tool itself once the gate allowed it, tool-use-binding §27 item 6).
func hostTools(t testing.TB, upstreamURL string) actgate.Tools {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := connectUpstream(ctx, upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return toolsOf(cs)
}

func connectUpstream(ctx context.Context, url string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v1"}, nil)
	hc := &http.Client{Transport: bearer{token: upstreamToken, base: http.DefaultTransport}}
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
}

func toolsOf(cs *mcp.ClientSession) actgate.Tools {
	call := func(ctx context.Context, c actgate.Call) (string, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: c.Arguments})
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		if res.IsError {
			return "", fmt.Errorf("%s", b.String())
		}
		return b.String(), nil
	}
	return actgate.Tools{"get_balance": call, "send_payment": call, "email_send": call}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// ---- the gate ----

// gate is a running `actgate serve`.
type gate struct {
	Base, Token, DataDir string // the gate's URL, the agent's token, the data dir
	cmd                  *exec.Cmd
	stderr               *strings.Builder
}

// gatePolicy is the policy of testdata/gate/actgate.yaml (the demo's), over the servers given,
// and a computer-use rule allowed at https://pay.example only (tool-use-binding §22 T-E).
const gatePolicy = `  rules:
  - name: balances
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
  - name: payments
    tools: [send_payment]
    consequenceClass: FINANCIAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    arguments:
    - name: amount-cap
      expression: double(args.amount) <= 10000.0
      message: an agent may not pay more than 10000 at once
    alternatives:
    - label: Pay at most 10 now
      reasoning: Caps the amount while the rest is checked.
      args:
        amount: 10
  - name: email
    tools: [email_send]
    consequenceClass: COMMUNICATION
    evidence:
      role: PolicyPermit
    provenance:
    - sources: [retrieval, tool_output]
      action: Deny
  - name: computer-use
    tools: [computer]
    consequenceClass: COMMUNICATION
    destinations: ["https://pay.example"]
`

// startGate runs `actgate serve` with servers (name → upstream URL) and returns once it
// listens.
func startGate(t testing.TB, servers map[string]string) *gate {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "upstream.token")
	if err := os.WriteFile(tokenFile, []byte(upstreamToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ups, pol strings.Builder
	for name, url := range servers {
		fmt.Fprintf(&ups, "- server: %s\n  bearerTokenFile: %q\n", name, tokenFile)
		fmt.Fprintf(&pol, "  - name: %s\n    url: %q\n", name, url)
	}
	dataDir := filepath.Join(dir, "data")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
dataDir: %q
sinkID: sdk-go-test
metrics:
  address: "off"
agent:
  name: host-agent
  trustDeclaredProvenance: true
principals:
- name: alice
upstreams:
%scallTimeout: 30s
policy:
  podSelector: {}
  servers:
%s%s`, dataDir, ups.String(), pol.String(), gatePolicy)
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gate{DataDir: dataDir, stderr: &strings.Builder{}}
	g.cmd = exec.Command(actgateBin(t), "serve", "--config", cfgFile)
	g.cmd.Stderr = &lockedWriter{w: g.stderr}
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = g.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = g.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("actgate serve stderr:\n%s", g.stderr.String())
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for g.Base == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("actgate serve exited: %s", g.stderr.String())
			}
			if rest, ok := strings.CutPrefix(l, "actgate serving on "); ok {
				g.Base, _, _ = strings.Cut(rest, " ")
			}
		case <-deadline:
			t.Fatalf("actgate serve did not start: %s", g.stderr.String())
		}
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "agents", "host-agent.token"))
	if err != nil {
		t.Fatalf("the agent's token: %v", err)
	}
	g.Token = strings.TrimSpace(string(tok))
	return g
}

// client is the wrapper's Client for the gate's agent.
func (g *gate) client() *actgate.Client {
	return &actgate.Client{BaseURL: g.Base, Token: g.Token}
}

// resolve chooses option 1 of a binding moment as alice with the actgate CLI.
func (g *gate) resolve(t testing.TB, momentID string) {
	t.Helper()
	actgateBin(t)
	if err := g.resolveErr(momentID); err != nil {
		t.Fatal(err)
	}
}

func (g *gate) resolveErr(momentID string) error {
	out, err := exec.Command(actgatePath, "resolve", momentID, "--option", "1", "--as", "alice", "--data-dir", g.DataDir, "--server", g.Base).CombinedOutput()
	if err != nil {
		return fmt.Errorf("actgate resolve %s: %w\n%s", momentID, err, out)
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ---- the scripted model server ----

// modelServer answers the vendors' APIs with recorded outputs, in order per path, and keeps
// what the SDKs sent.
type modelServer struct {
	URL      string
	mu       sync.Mutex
	script   map[string][]string
	requests map[string][]json.RawMessage
}

func startModel(t testing.TB) *modelServer {
	t.Helper()
	m := &modelServer{script: map[string][]string{}, requests: map[string][]json.RawMessage{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(m.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.URL = "http://" + ln.Addr().String()
	return m
}

// answer queues recorded answers for path (/v1/messages, /v1/chat/completions,
// /v1/responses); an answer starting with "event:" is served as a server-sent event stream.
func (m *modelServer) answer(path string, answers ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script[path] = append(m.script[path], answers...)
}

func (m *modelServer) sent(path string) []json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]json.RawMessage(nil), m.requests[path]...)
}

func (m *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.requests[r.URL.Path] = append(m.requests[r.URL.Path], body)
	q := m.script[r.URL.Path]
	var a string
	if len(q) > 0 {
		a, m.script[r.URL.Path] = q[0], q[1:]
	}
	m.mu.Unlock()
	if a == "" {
		http.Error(w, `{"error":{"message":"nothing scripted"}}`, http.StatusInternalServerError)
		return
	}
	if strings.HasPrefix(a, "event:") {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f, _ := w.(http.Flusher)
		for ev := range strings.SplitSeq(a, "\n\n") {
			if strings.TrimSpace(ev) == "" {
				continue
			}
			_, _ = io.WriteString(w, ev+"\n\n")
			if f != nil {
				f.Flush()
			}
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, a)
}

// countingTransport counts the host-loop requests the wrapper sends, per path.
type countingTransport struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.paths == nil {
		c.paths = map[string]int{}
	}
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}
