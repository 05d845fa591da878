package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

// oauthWalk is oauth.mjs's output.
type oauthWalk struct {
	HTTP []struct {
		Method, URL, WWWAuthenticate string
		Status                       int
		Authorized                   bool
	} `json:"http"`
	Result *struct {
		IsError bool `json:"isError"`
	} `json:"result"`
	Error string `json:"error"`
}

// TestOAuthDiscoveryTypeScript: the official MCP TypeScript SDK client, given only the gate's
// URL and its client credentials, performs the MCP authorization discovery against a real
// `actgate serve` with agent.authentication oauth — the 401's resource_metadata, the RFC 9728
// document, the provider's metadata, the client credentials grant at the real provider
// (test/testutil/idp) — and its call runs once upstream, which never sees the agent's token.
func TestOAuthDiscoveryTypeScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Node, an OpenID provider and actgate serve")
	}
	requireNodeModules(t)
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}}, mcptest.Options{Name: "bank"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	addr := testutil.FreeAddr(t)
	base := "http://" + addr
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "ts-agent", Secret: "ts-agent-secret", Audience: []string{base}, Scopes: []string{"mcp.call"}}}})

	data := t.TempDir()
	cfg := fmt.Sprintf(`listen: %s
dataDir: %s
agent:
  name: default-agent
  authentication: oauth
  oauth:
    issuer: %s
    caFile: %s
    agentClaim: client_id
    scopes: [mcp.call]
principals:
- name: alice
policy:
  podSelector: {}
  servers:
  - name: bank
    url: %s
  rules:
  - name: reads
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
`, addr, data, p.Issuer(), p.CAFile(), up.URL)
	path := filepath.Join(t.TempDir(), "actgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := testutil.StartServe(t, testutil.BuildActgate(t, ""), []string{"serve", "--config", path}, filepath.Join(data, "endpoint"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("actgate serve output:\n%s", serve.Out.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--import", preload, "oauth.mjs", base+"/mcp/bank", "ts-agent", "ts-agent-secret", "mcp.call")
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1", "NODE_EXTRA_CA_CERTS="+p.CAFile())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("oauth.mjs: %v\n%s", err, tail(stderr.String(), 4000))
	}
	var w oauthWalk
	if err := json.Unmarshal(stdout.Bytes(), &w); err != nil {
		t.Fatalf("oauth.mjs printed %q: %v", stdout.String(), err)
	}
	var seen []string
	for _, h := range w.HTTP {
		seen = append(seen, fmt.Sprintf("%s %s %d", h.Method, h.URL, h.Status))
	}
	t.Logf("the TypeScript client's exchanges:\n%s", strings.Join(seen, "\n"))
	if w.Error != "" || w.Result == nil || w.Result.IsError {
		t.Fatalf("the TypeScript client: %s %+v", w.Error, w.Result)
	}
	// The discovery the MCP authorization specification describes, in order.
	want := []string{
		"POST " + base + "/mcp/bank 401",
		"GET " + base + "/.well-known/oauth-protected-resource/mcp/bank 200",
		"POST " + p.Issuer() + "/oauth/token 200",
	}
	i := 0
	for _, s := range seen {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("the discovery did not go %q", want)
	}
	if !strings.Contains(w.HTTP[0].WWWAuthenticate, `resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp/bank"`) {
		t.Fatalf("the first 401's challenge: %q", w.HTTP[0].WWWAuthenticate)
	}
	if n := up.Count("get_balance"); n != 1 {
		t.Fatalf("upstream ran get_balance %d times, want 1", n)
	}
	for _, a := range up.Authorizations() {
		if a != "" {
			t.Fatalf("the upstream saw Authorization %q; the gate has no upstream credential here", a)
		}
	}
}
