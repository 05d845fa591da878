package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/standalone"
)

// testGate is a gate served in-process, as `actgate serve` does, on a temp data dir.
type testGate struct {
	t       *testing.T
	dir     string
	cfgFile string
	cfg     *gateconfig.Config
	up      *mcptest.Server
	base    string
	stop    func()
	rt      *standalone.Runtime
}

// countingDemoUpstream starts a counting upstream with the demo policy's tools and writes the finance
// server's token file into a fresh directory: what demoConfig(up.URL, …, tok) needs.
func countingDemoUpstream(t *testing.T) (up *mcptest.Server, dir, tok string) {
	t.Helper()
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}, {Name: "send_payment"}, {Name: "email_send"}}, mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	dir = t.TempDir()
	tok = filepath.Join(dir, "finance.token")
	if err := os.WriteFile(tok, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return up, dir, tok
}

func startTestGate(t *testing.T) *testGate {
	t.Helper()
	up, dir, tok := countingDemoUpstream(t)
	cfgFile := filepath.Join(dir, "actgate.yaml")
	doc := strings.Replace(string(demoConfig(up.URL, filepath.Join(dir, "data"), tok)), "- name: alice\n", "- name: alice\n- name: bob\n", 1)
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &testGate{t: t, dir: dir, cfgFile: cfgFile, up: up}
	g.start()
	return g
}

func (g *testGate) start() {
	g.t.Helper()
	cfg, err := gateconfig.Load(g.cfgFile)
	if err != nil {
		g.t.Fatal(err)
	}
	g.cfg = cfg
	rt, err := standalone.Open(context.Background(), cfg, logr.Discard(), standalone.Hooks{})
	if err != nil {
		g.t.Fatal(err)
	}
	g.rt = rt
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- rt.Serve(ctx, ln, &out) }()
	g.base = "http://" + ln.Addr().String()
	stopped := false
	g.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			g.t.Errorf("serve: %v", err)
		}
	}
	g.t.Cleanup(g.stop)
	// serve writes the endpoint file before it answers.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(cfg.Path(gateconfig.EndpointFile)); err == nil && strings.TrimSpace(string(b)) == g.base {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatal("the endpoint file was not written")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cli runs an actgate command against this gate's data dir.
func (g *testGate) cli(args ...string) (int, string, string) {
	g.t.Helper()
	var out, errb bytes.Buffer
	code := run(append(args, "--data-dir", g.cfg.DataDir), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func (g *testGate) agent() *mcp.ClientSession {
	g.t.Helper()
	hc, err := agentClient(g.cfg, g.cfg.Agent.Name)
	if err != nil {
		g.t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"), HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func escalate(t *testing.T, cs *mcp.ClientSession, args string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Meta[mcpproxy.MetaMomentID].(string)
	if id == "" {
		t.Fatalf("no binding moment: %+v", res.Meta)
	}
	return id
}

// TestServeFiles: first start creates the private state; a restart reuses it.
func TestServeFiles(t *testing.T) {
	g := startTestGate(t)
	files := map[string]os.FileMode{
		gateconfig.AuthorityKeyFile: 0o600, gateconfig.ReceiptKeyFile: 0o600, gateconfig.ActIDKeyFile: 0o600,
		gateconfig.StoreFile: 0o600, gateconfig.ReceiptsFile: 0o600, gateconfig.EndpointFile: 0o600,
		"principals/alice.token": 0o600, "principals/bob.token": 0o600, gateconfig.ReceiptPubFile: 0o644,
	}
	before := map[string][]byte{}
	for f, mode := range files {
		fi, err := os.Stat(g.cfg.Path(f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", f, fi.Mode().Perm(), mode)
		}
		before[f], _ = os.ReadFile(g.cfg.Path(f))
	}
	if fi, _ := os.Stat(g.cfg.DataDir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dataDir mode %v", fi.Mode().Perm())
	}
	g.stop()
	if _, err := os.Stat(g.cfg.Path(gateconfig.EndpointFile)); !os.IsNotExist(err) {
		t.Errorf("endpoint file left behind after shutdown: %v", err)
	}
	g.start()
	for _, f := range []string{gateconfig.AuthorityKeyFile, gateconfig.ReceiptKeyFile, gateconfig.ActIDKeyFile, "principals/alice.token"} {
		if after, _ := os.ReadFile(g.cfg.Path(f)); !bytes.Equal(after, before[f]) {
			t.Errorf("%s changed across a restart", f)
		}
	}
}

// TestMomentsAndResolveCLI: a principal lists and resolves through the local API; the
// authorised call then runs once.
func TestMomentsAndResolveCLI(t *testing.T) {
	g := startTestGate(t)
	cs := g.agent()
	id := escalate(t, cs, `{"to":"bob","amount":250}`)

	code, out, errOut := g.cli("moments", "--as", "alice")
	if code != exitOK {
		t.Fatalf("moments: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"MOMENT " + id, "call send_payment on finance", "Synopsis:", "Findings:", "Recommendations:",
		"Offer:", "(recommended)", "Why:", "[a] Answer", "[q] Reject", "[d] Decline", "Resolve: actgate resolve " + id} {
		if !strings.Contains(out, want) {
			t.Errorf("moments output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := g.cli("moments"); code != exitUsage || !strings.Contains(errOut, "--as") {
		t.Errorf("two principals and no --as: exit %d %s", code, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		exit int
		code string
	}{
		{"no resolution", []string{"resolve", id, "--as", "alice"}, exitUsage, "USAGE"},
		{"two resolutions", []string{"resolve", id, "--as", "alice", "--question", "--decline"}, exitUsage, "USAGE"},
		{"option 0", []string{"resolve", id, "--as", "alice", "--option", "0"}, exitUsage, "USAGE"},
		{"out of range", []string{"resolve", id, "--as", "alice", "--option", "9"}, exitRejected, "RESOLUTION_INVALID"},
		{"unknown moment", []string{"resolve", "bm-nope", "--as", "alice", "--option", "1"}, exitRejected, "MOMENT_NOT_FOUND"},
		{"no token", []string{"resolve", id, "--as", "carol", "--option", "1"}, exitUsage, "USAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := g.cli(tc.args...)
			if code != tc.exit || !strings.HasPrefix(errOut, tc.code) {
				t.Fatalf("exit %d stderr %q, want %d %s", code, errOut, tc.exit, tc.code)
			}
		})
	}
	if n := g.up.Count("send_payment"); n != 0 {
		t.Fatalf("ran %d times before the resolution", n)
	}
	code, out, errOut = g.cli("resolve", id, "--as", "alice", "--option", "1")
	if code != exitOK || !strings.HasPrefix(out, "RESOLVED "+id+" option 1 by alice: authority authz-") {
		t.Fatalf("resolve: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := g.cli("resolve", id, "--as", "alice", "--decline"); code != exitRejected || !strings.HasPrefix(errOut, "MOMENT_RESOLVED") {
		t.Errorf("second resolution: exit %d %q", code, errOut)
	}
	// bob is a configured principal, but the policy addresses payments to alice only.
	if code, _, errOut := g.cli("resolve", id, "--as", "bob", "--decline"); code != exitRejected || !strings.HasPrefix(errOut, "MOMENT_NOT_FOUND") {
		t.Errorf("resolution by a principal the moment is not addressed to: exit %d %q", code, errOut)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: json.RawMessage(`{"amount":250,"to":"bob"}`)})
	if err != nil || res.IsError {
		t.Fatalf("authorised call: %v %+v", err, res)
	}
	if n := g.up.Count("send_payment"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	if code, out, _ := g.cli("moments", "--as", "alice"); code != exitOK || !strings.Contains(out, "No pending binding moments for alice") {
		t.Errorf("after resolution: %d %q", code, out)
	}
}

// TestResolveHatches: answer, question and decline are distinct resolutions (envelope-04
// §7.3) and authorise nothing.
func TestResolveHatches(t *testing.T) {
	g := startTestGate(t)
	cs := g.agent()
	for i, args := range [][]string{{"--answer", "Pay half now."}, {"--question"}, {"--decline"}} {
		id := escalate(t, cs, fmt.Sprintf(`{"to":"bob","amount":%d}`, 10+i))
		code, out, errOut := g.cli(append([]string{"resolve", id, "--as", "alice"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		want := map[int]string{0: "answer", 1: "question", 2: "declined"}[i]
		if out != fmt.Sprintf("RESOLVED %s %s by alice\n", id, want) {
			t.Errorf("%v: %q", args, out)
		}
	}
	if n := g.up.Count("send_payment"); n != 0 {
		t.Fatalf("hatches authorised %d calls", n)
	}
}

// TestMomentsAPIAuthentication: only a principal's token opens the API, and a principal sees
// only the moments addressed to it.
func TestMomentsAPIAuthentication(t *testing.T) {
	g := startTestGate(t)
	escalate(t, g.agent(), `{"to":"bob","amount":5}`)
	get := func(auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, g.base+"/v1/moments", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Basic YWxpY2U6eA==", "tok"} {
		if code, body := get(auth); code != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHENTICATED") {
			t.Errorf("Authorization %q: %d %s", auth, code, body)
		}
	}
	tok, err := os.ReadFile(g.cfg.PrincipalTokenPath("alice"))
	if err != nil {
		t.Fatal(err)
	}
	code, body := get("Bearer " + strings.TrimSpace(string(tok)))
	if code != http.StatusOK || !strings.Contains(body, `"tool":"send_payment"`) {
		t.Fatalf("alice: %d %s", code, body)
	}
	// bob is a configured principal but the policy addresses payments to alice only.
	tok, _ = os.ReadFile(g.cfg.PrincipalTokenPath("bob"))
	if code, body := get("Bearer " + strings.TrimSpace(string(tok))); code != http.StatusOK || strings.Contains(body, "send_payment") {
		t.Fatalf("bob sees alice's moment: %d %s", code, body)
	}
}

func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("dataDir: d\nagent: {name: a}\nlisten: 0.0.0.0:1\npolicy: {podSelector: {}, servers: [{name: s, url: 'ftp://x'}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--config", bad}, strings.NewReader(""), &out, &errb)
	if code != exitRejected {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	var fields []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "CONFIG_INVALID ") {
			t.Errorf("line %q", l)
		}
		fields = append(fields, strings.SplitN(strings.TrimPrefix(l, "CONFIG_INVALID "), ":", 2)[0])
	}
	for _, want := range []string{"listen", "policy.servers[0].url"} {
		found := false
		for _, f := range fields {
			found = found || f == want
		}
		if !found {
			t.Errorf("no error names %s: %q", want, errb.String())
		}
	}
	if code := run([]string{"serve"}, strings.NewReader(""), &out, &errb); code != exitUsage {
		t.Errorf("serve without --config: exit %d", code)
	}
}
