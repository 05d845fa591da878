package attacks

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeUpstreamOAuthProcess: the `actgate serve` binary, with upstreams[].oauth, presents an
// upstream that admits only the identity provider's tokens for its own URL a token it obtained
// by client credentials (private_key_jwt), once for several calls; the gate's verbose log and the
// agent's answers never carry that token, and the upstream never sees the agent's; with the
// provider down and the token expired, the call is not sent and the agent gets
// EF_UPSTREAM_IDP_UNAVAILABLE.
func TestServeUpstreamOAuthProcess(t *testing.T) {
	bin := testutil.BuildActgate(t, "")
	var mu sync.Mutex
	var verifier *oidc.IDTokenVerifier
	var seen []string // tokens the upstream admitted
	up, err := mcptest.Start([]mcptest.Tool{{Name: "search"}}, mcptest.Options{Intercept: func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		v := verifier
		mu.Unlock()
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && v != nil {
			if _, err := v.Verify(r.Context(), tok); err == nil {
				mu.Lock()
				seen = append(seen, tok)
				mu.Unlock()
				return false
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	key := testutil.NewPKI(t, t.TempDir(), "127.0.0.1") // only for its key pair
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "gate", PublicKey: key.Cert.PrivateKey.(crypto.Signer).Public(), Audience: []string{up.URL}, AccessTokenLifetime: 4 * time.Second}}})
	mu.Lock()
	verifier = oidc.NewVerifier(p.Issuer(), oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), p.HTTPClient()), p.Issuer()+"/keys"), &oidc.Config{ClientID: up.URL})
	mu.Unlock()

	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	conf := fmt.Sprintf(`listen: 127.0.0.1:0
dataDir: %q
sinkID: oauth-sink
agent:
  name: oauth-agent
principals:
- name: alice
upstreams:
- server: tools
  oauth:
    grant: client_credentials
    tokenURL: %s
    clientID: gate
    privateKeyFile: %q
    caFile: %q
metrics:
  address: "off"
policy:
  podSelector: {}
  servers:
  - name: tools
    url: %q
  rules:
  - name: reads
    tools: [search]
    consequenceClass: INFORMATIONAL
`, dataDir, p.TokenURL(), key.KeyFile, p.CAFile(), up.URL)
	cfgFile := filepath.Join(root, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	g := testutil.StartServe(t, bin, []string{"serve", "--config", cfgFile, "--verbose"}, filepath.Join(dataDir, gateconfig.EndpointFile))
	agentTok, err := os.ReadFile(filepath.Join(dataDir, "agents", "oauth-agent.token"))
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.Base + mcpproxy.Path("tools"),
		HTTPClient: &http.Client{Transport: bearerRT{strings.TrimSpace(string(agentTok))}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, g.Out.String())
	}
	defer cs.Close()
	start := time.Now()
	var answers []string
	for i := range 3 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Arguments: json.RawMessage(fmt.Sprintf(`{"q":"%d"}`, i))})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v\n%s", i, err, res, g.Out.String())
		}
		b, _ := json.Marshal(res)
		answers = append(answers, string(b))
	}
	if up.Count("search") != 3 || p.TokenRequests() != 1 {
		t.Fatalf("upstream ran %d, %d token requests (want 3, 1)", up.Count("search"), p.TokenRequests())
	}
	mu.Lock()
	toks := append([]string(nil), seen...)
	mu.Unlock()
	for _, tok := range toks {
		if tok == strings.TrimSpace(string(agentTok)) {
			t.Fatal("the upstream admitted the agent's token")
		}
		if strings.Contains(g.Out.String(), tok) {
			t.Fatal("the gate's log carries the upstream token")
		}
		for _, a := range answers {
			if strings.Contains(a, tok) {
				t.Fatal("an answer to the agent carries the upstream token")
			}
		}
	}
	p.Stop()
	time.Sleep(time.Until(start.Add(5 * time.Second)))
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Arguments: json.RawMessage(`{"q":"down"}`)})
	if err != nil || !res.IsError || testutil.MetaString(res, mcpproxy.MetaEFCode) != string(ef.EFUpstreamIDPUnavailable) || up.Count("search") != 3 {
		t.Fatalf("provider down: %v %+v; upstream ran %d", err, res, up.Count("search"))
	}
	if err := g.Stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, g.Out.String())
	}
}
