package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/test/testutil/smtpd"
)

// TestServeNotifications: `actgate serve` with a notifications section announces an escalated
// call's moment to a local receiver, with the bearer header from its file, and without the
// call's arguments; shutdown drains the queue.
func TestServeNotifications(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var auth []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)

	up, dir, tok := countingDemoUpstream(t)
	headers := filepath.Join(dir, "hook.headers")
	for p, c := range map[string]string{headers: "Authorization: Bearer hook-5ec\n"} {
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doc := string(demoConfig(up.URL, filepath.Join(dir, "data"), tok)) + `notifications:
  consoleURL: "http://127.0.0.1:8788/console?moment={id}"
  webhooks:
  - url: ` + recv.URL + `
    headersFrom: hook.headers
`
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &testGate{t: t, dir: dir, cfgFile: cfgFile, up: up}
	g.start()

	// Both argument values are strings no digest or id can contain (hex and base32 have no
	// "-" or "Q"), so finding either in the announcement means the arguments leaked.
	const payee, memo = "PAYEE-UNIQUE-4471", "MEMO-QQQ-7"
	id := escalate(t, g.agent(), `{"to":"`+payee+`","amount":250,"memo":"`+memo+`"}`)
	g.stop() // drains the announcement queue
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("receiver got %d announcements, want 1", len(bodies))
	}
	for _, want := range []string{id, "alice", "send_payment", "http://127.0.0.1:8788/console?moment=" + id} {
		if !strings.Contains(bodies[0], want) {
			t.Errorf("announcement lacks %q: %s", want, bodies[0])
		}
	}
	if strings.Contains(bodies[0], payee) || strings.Contains(bodies[0], memo) || strings.Contains(bodies[0], `"amount"`) {
		t.Errorf("announcement carries the call's arguments: %s", bodies[0])
	}
	if auth[0] != "Bearer hook-5ec" {
		t.Errorf("Authorization %q", auth[0])
	}
}

// TestServeElicitation: the standalone gate hands its compiled policy to the proxy, so a
// moment of a class spec.elicitation lists is offered to an MCP client that declared
// elicitation, and the answer resolves it as the principal; the chosen call then runs once.
func TestServeElicitation(t *testing.T) {
	up, dir, _ := countingDemoUpstream(t)
	cfgFile := filepath.Join(dir, "actgate.yaml")
	doc := `listen: 127.0.0.1:0
dataDir: data
agent:
  name: demo-agent
principals:
- name: alice
upstreams:
- server: finance
  bearerTokenFile: finance.token
policy:
  podSelector: {}
  elicitation:
    classes: [INFORMATIONAL]
  servers:
  - name: finance
    url: ` + up.URL + `
  rules:
  - name: balances
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    alternatives:
    - label: Read the main account
      reasoning: The usual one.
      args: {account: main}
`
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &testGate{t: t, dir: dir, cfgFile: cfgFile, up: up}
	g.start()

	var asked int
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"choice": "option:0"}}, nil
		},
	})
	hc, err := agentClient(g.cfg, g.cfg.Agent.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Elicitation is offered on a session: the client speaks the stateful revision.
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"), HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: map[string]any{"account": "savings"}})
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || res.Meta[mcpproxy.MetaMomentID] == nil {
		t.Fatalf("asked %d times; result meta %v", asked, res.Meta)
	}
	if up.Count("get_balance") != 0 {
		t.Fatal("invoked before the resolved call was made")
	}
	again, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: map[string]any{"account": "savings"}})
	if err != nil || again.IsError || up.Count("get_balance") != 1 {
		t.Fatalf("the elicited option did not run once: %v %+v (count %d)", err, again, up.Count("get_balance"))
	}
}

// TestServeEmailNotifications: `actgate serve` with an email section mails an escalated call's
// announcement to the principal's mapped address through a loopback SMTP server over STARTTLS
// with AUTH, with the moment's deep link and none of the call's arguments, and a Teams webhook
// beside it gets the Adaptive Card message.
func TestServeEmailNotifications(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	up, dir, tok := countingDemoUpstream(t)
	mailer := smtpd.Start(t, smtpd.Options{Users: map[string]string{"gate": "pw-77"}, Dir: t.TempDir()})
	if err := os.WriteFile(filepath.Join(dir, "smtp-auth"), []byte("gate\npw-77\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := string(demoConfig(up.URL, filepath.Join(dir, "data"), tok)) + `notifications:
  consoleURL: "https://approve.example/"
  webhooks:
  - url: ` + recv.URL + `
    format: teams
  email:
    addr: ` + mailer.Addr() + `
    caFile: ` + mailer.CAFile() + `
    authFile: smtp-auth
    from: gate@example.com
    recipients:
      alice: alice@example.com
`
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &testGate{t: t, dir: dir, cfgFile: cfgFile, up: up}
	g.start()
	const payee, memo = "PAYEE-UNIQUE-5582", "MEMO-QQQ-8"
	id := escalate(t, g.agent(), `{"to":"`+payee+`","amount":250,"memo":"`+memo+`"}`)
	g.stop() // drains the announcement queue

	mails := mailer.Mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails, want 1", len(mails))
	}
	m := mails[0]
	if len(m.To) != 1 || m.To[0] != "alice@example.com" || !m.TLS || m.AuthUser != "gate" || m.From != "gate@example.com" {
		t.Errorf("mail to %v from %q, TLS %v, auth %q", m.To, m.From, m.TLS, m.AuthUser)
	}
	link := "https://approve.example/#moment-" + id
	raw := string(m.Data)
	for _, want := range []string{link, "send_payment", id} {
		if !strings.Contains(raw, want) {
			t.Errorf("mail lacks %q:\n%s", want, raw)
		}
	}
	if strings.Contains(raw, payee) || strings.Contains(raw, memo) || strings.Contains(raw, "amount") {
		t.Errorf("mail carries the call's arguments:\n%s", raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || !strings.Contains(bodies[0], "application/vnd.microsoft.card.adaptive") || !strings.Contains(bodies[0], link) ||
		strings.Contains(bodies[0], payee) {
		t.Errorf("teams webhook got %q", bodies)
	}
}
