package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/standalone"
)

// TestOAuthAgents2026: the official MCP Go SDK client at the 2026-07-28 revision (stateless:
// every request stands alone) calls through the standalone gate with the provider's access
// token: the read runs once upstream, and the binding moment its escalated call raises names
// the token's agent. When the token expires, the next request is refused and nothing more runs;
// a 2026 request without a token is 401 with the resource_metadata challenge.
func TestOAuthAgents2026(t *testing.T) {
	g := startOAuthGate(t, "")
	tok := g.token(oauthShortClient, "mcp.call")
	got := time.Now()
	c := mcp.NewClient(&mcp.Implementation{Name: "oauth-agent-2026", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"),
		HTTPClient: &http.Client{Transport: bearerTransport{token: tok, base: http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult(); v == nil || v.ProtocolVersion != "2026-07-28" {
		t.Fatalf("negotiated %+v", v)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)})
	if err != nil || res.IsError || g.up.Count("get_balance") != 1 {
		t.Fatalf("get_balance on 2026-07-28: %v %+v (upstream ran %d)", err, res, g.up.Count("get_balance"))
	}
	id := escalate(t, cs, `{"to":"bob","amount":6}`)
	alice, err := os.ReadFile(g.cfg.PrincipalTokenPath("alice"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, g.base+"/v1/moments/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(alice)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m standalone.MomentJSON
	err = json.NewDecoder(resp.Body).Decode(&m)
	_ = resp.Body.Close()
	if err != nil || m.Agent != "idp:"+oauthShortClient {
		t.Fatalf("the moment names agent %q (%v), want idp:%s", m.Agent, err, oauthShortClient)
	}
	time.Sleep(time.Until(got.Add(2500 * time.Millisecond)))
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)}); err == nil && !res.IsError {
		t.Fatalf("a call with an expired token ran: %+v", res)
	}
	if n := g.up.Count("get_balance"); n != 1 {
		t.Fatalf("upstream ran get_balance %d times, want 1", n)
	}
	raw, _ := http.NewRequest(http.MethodPost, g.base+mcpproxy.Path("finance"),
		strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_balance","arguments":{}}}`))
	raw.Header.Set("Content-Type", "application/json")
	raw.Header.Set("Accept", "application/json, text/event-stream")
	raw.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	r2, err := http.DefaultClient.Do(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = r2.Body.Close()
	if r2.StatusCode != http.StatusUnauthorized || !strings.Contains(r2.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("a 2026 request without a token: %d %q", r2.StatusCode, r2.Header.Get("WWW-Authenticate"))
	}
}
