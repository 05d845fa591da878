package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy"
)

// TestServeRateLimit: a rule's rateLimit through a real `actgate serve` and upstream: an agent
// makes its burst of get_balance calls on MCP 2025-11-25, and the next call — on that revision,
// on 2026-07-28, and through the host-loop API — is refused with EF_RATE_LIMITED and the wait
// until the bucket refills (the result's actgate.io/retry-after, the host loop's retry_after and
// Retry-After header), and the upstream never sees it.
func TestServeRateLimit(t *testing.T) {
	g := startTestGate(t)
	g.stop()
	b, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "    tools: [get_balance]\n    consequenceClass: INFORMATIONAL\n",
		"    tools: [get_balance]\n    consequenceClass: INFORMATIONAL\n    rateLimit: {calls: 3, period: 1h}\n", 1)
	if doc == string(b) {
		t.Fatal("the demo policy has no balances rule to limit")
	}
	if err := os.WriteFile(g.cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	ctx := context.Background()
	cs := g.agent()
	for i := range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{"account":"main"}`)})
		if err != nil || res.IsError {
			t.Fatalf("call %d within the limit: %v %+v", i+1, err, res)
		}
	}
	const wait = 1200 // 3 calls per hour: one every 20 minutes
	check := func(how string, res *mcp.CallToolResult) {
		t.Helper()
		if !res.IsError || res.Meta[mcpproxy.MetaEFCode] != string(ef.EFRateLimited) || res.Meta["actgate.io/retry-after"] != float64(wait) {
			t.Fatalf("%s over the limit: isError %v meta %v", how, res.IsError, res.Meta)
		}
		if n := g.up.Count("get_balance"); n != 3 {
			t.Fatalf("%s over the limit: the upstream ran %d calls, want 3", how, n)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{"account":"main"}`)})
	if err != nil {
		t.Fatal(err)
	}
	check("MCP 2025-11-25", res)

	hc, err := agentClient(g.cfg, g.cfg.Agent.Name)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v2"}, nil)
	modern, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"), HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	if res, err = modern.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{"account":"main"}`)}); err != nil {
		t.Fatal(err)
	}
	check("MCP 2026-07-28", res)

	// The host-loop API: the decision, with Retry-After.
	body, _ := json.Marshal(hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "rate", Server: "finance",
		Block: toolUse("toolu_rate", "get_balance", `{"account":"main"}`)})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/enforce", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.host().token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var d hostloop.Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if resp.StatusCode != http.StatusOK || d.Allow || d.Code != ef.EFRateLimited || d.RetryAfter != wait || resp.Header.Get("Retry-After") != "1200" || len(d.Deny) == 0 {
		t.Fatalf("host loop over the limit: HTTP %d Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	if n := g.up.Count("get_balance"); n != 3 {
		t.Fatalf("the upstream ran %d calls, want 3", n)
	}
}
