package authority

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

// agentAudience is the audience of the agents' tokens the policy's spec.agentAuth names.
const agentAudience = "api://actgate-agents"

// agentAuthFixture is a rig whose policy has spec.agentAuth on a real provider, and the pod's
// sidecar (sidecar.New and Serve, as `actgate sidecar` runs) following the rig's service.
type agentAuthFixture struct {
	r    *rig
	p    *idp.Provider
	up   *mcptest.Server
	base string // the sidecar's URL
	// With onBehalf, the subjects of the exchanged tokens the upstream admitted, and every
	// bearer token it saw.
	mu             sync.Mutex
	subjects, seen []string
}

// The sidecar's client at the provider when it exchanges the agents' tokens (onBehalf).
const (
	sidecarClient = "sidecar"
	sidecarSecret = "sidecar-secret"
)

// newAgentAuthFixture starts the fixture. With onBehalf the upstream admits only the provider's
// JWTs for its own URL (recording each one's sub), and the sidecar presents it, for each call,
// a token the provider issued in exchange for the call's agent token (RFC 8693;
// docs/identity.md "On behalf of the agent").
func newAgentAuthFixture(t *testing.T, onBehalf ...bool) *agentAuthFixture {
	t.Helper()
	obo := len(onBehalf) > 0 && onBehalf[0]
	f := &agentAuthFixture{r: newRig(t, rigOptions{})}
	cachedService(t, f.r, 0) // the policy endpoint the sidecar follows needs the informers
	var verifier atomic.Pointer[oidc.IDTokenVerifier]
	opts := mcptest.Options{}
	if obo {
		opts.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			f.mu.Lock()
			f.seen = append(f.seen, tok)
			f.mu.Unlock()
			if idt, err := verifier.Load().Verify(r.Context(), tok); err == nil {
				f.mu.Lock()
				f.subjects = append(f.subjects, idt.Subject)
				f.mu.Unlock()
				return false
			}
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		}
	}
	var err error
	f.up, err = mcptest.Start([]mcptest.Tool{
		{Name: "get_balance", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return mcptest.Text("42"), nil }},
		{Name: "post_note", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text("posted"), nil
		}},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.up.Close() })
	f.p = idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: "agent-a", Secret: "a-secret", Audience: []string{agentAudience}},
		{ID: "agent-b", Secret: "b-secret", Audience: []string{agentAudience}},
		{ID: "elsewhere", Secret: "e-secret", Audience: []string{"api://another-resource"}},
		{ID: sidecarClient, Secret: sidecarSecret, Audience: []string{f.up.URL, agentAudience}, TokenExchange: true},
	}})
	kctx := oidc.ClientContext(context.Background(), f.p.HTTPClient())
	verifier.Store(oidc.NewVerifier(f.p.Issuer(), oidc.NewRemoteKeySet(kctx, f.p.Issuer()+"/keys"), &oidc.Config{ClientID: f.up.URL}))
	auth := &v1alpha1.AgentAuth{Issuer: f.p.Issuer(), Audience: agentAudience, AgentClaim: "client_id", AgentPrefix: "idp:",
		CABundle: string(f.p.CAPEM())}
	ctx := context.Background()
	pol := &v1alpha1.ToolPolicy{}
	if err := f.r.env.Client.Get(ctx, client.ObjectKeyFromObject(f.r.policy), pol); err != nil {
		t.Fatal(err)
	}
	pol.Spec.Servers = []v1alpha1.ToolServer{{Name: "payments", URL: f.up.URL, Protocol: v1alpha1.ServerProtocolMCP}}
	pol.Spec.AgentAuth = auth
	pol.Spec.Rules = append([]v1alpha1.ToolRule{{Name: "notes", Tools: []string{"post_note"}, ConsequenceClass: v1alpha1.ConsequencePersistentStateChange,
		Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}}}, pol.Spec.Rules...)
	if err := f.r.env.Client.Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	envtest.AcceptPolicy(t, f.r.env.Client, pol, 2)

	pki := testutil.NewPKI(t, t.TempDir())
	mux := http.NewServeMux()
	mux.Handle(review.Path, f.r.svc)
	mux.Handle(review.PolicyPath, f.r.svc.PolicyHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pki.Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(f.r.agentTk), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := sidecar.EncodePublicKey(f.r.signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.base = "http://" + ln.Addr().String()
	upstream := sidecar.Upstream{Name: "payments", URL: f.up.URL}
	if obo {
		// What the sidecar reads from ACTGATE_UPSTREAM_OAUTH for spec.servers[].auth with
		// subject Agent.
		raw := fmt.Sprintf(`{"grant":"token_exchange","subject":"agent","tokenURL":%q,"clientID":%q,"clientSecretFile":"secret","caFile":%q}`,
			f.p.TokenURL(), sidecarClient, f.p.CAFile())
		testutil.WriteFile(t, dir, "secret", []byte(sidecarSecret+"\n"))
		uo, err := gateconfig.ParseUpstreamOAuth([]byte(raw), dir, f.up.URL, true)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := uo.SourceConfig(f.up.URL)
		if err != nil {
			t.Fatal(err)
		}
		upstream.OAuth = &sc
	}
	sc, err := sidecar.New(sidecar.Config{
		Listen: ln.Addr().String(), AuthorityURL: srv.URL, AuthorityCA: string(pki.CAPEM), TokenFile: tokenFile, PublicKey: string(pub),
		Namespace: f.r.ns, Agent: f.r.agent, SinkID: sinkID, JournalDir: filepath.Join(dir, "journal"), ReviewTimeout: 10 * time.Second,
		Upstreams: []sidecar.Upstream{upstream}, AgentOAuth: auth,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "the sidecar to hold its pod's policy at epoch 2", func() error {
		if st := sc.Policy().Status(); !st.Ready || st.Epoch != 2 {
			return &statusError{st.Reason + ": " + st.Message}
		}
		return nil
	})
	return f
}

// token is a client-credentials access token of client id, issued by the provider.
func (f *agentAuthFixture) token(t *testing.T, id, secret string) string {
	t.Helper()
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, f.p.HTTPClient())
	tok, err := (&clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: f.p.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}).Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// claims are an agent token's claims as the provider issues them, for tokens the provider
// would not issue (expired, another issuer or audience, unsigned, signed by another key).
func (f *agentAuthFixture) claims(id string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": f.p.Issuer(), "sub": id, "client_id": id, "aud": []string{agentAudience},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
}

// unsigned is a JWT with alg none and no signature.
func unsigned(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + enc.EncodeToString(b) + "."
}

// forged is claims signed by a key the provider never had, under the provider's current key id.
func forged(t *testing.T, kid string, claims map[string]any) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bearer adds an agent's token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connect is an MCP client session of the agent presenting token to the sidecar.
func (f *agentAuthFixture) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return f.connectAt(t, token, "")
}

// connectAt is connect offering MCP revision version ("" the SDK's default).
func (f *agentAuthFixture) connectAt(t *testing.T, token, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.base + "/mcp/payments", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// initialize POSTs an MCP initialize to the sidecar with Authorization authz ("" for none)
// and returns the status and the WWW-Authenticate challenge.
func (f *agentAuthFixture) initialize(t *testing.T, authz string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, f.base+"/mcp/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// agentsOf are the agents the namespace's Acts of tool name.
func (f *agentAuthFixture) agentsOf(t *testing.T, tool string) []string {
	t.Helper()
	var acts v1alpha1.ActList
	if err := f.r.env.Client.List(context.Background(), &acts, client.InNamespace(f.r.ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range acts.Items {
		if a.Spec.Tool == tool {
			out = append(out, a.Spec.Agent)
		}
	}
	return out
}

// TestAgentOAuthSidecar: in a pod whose ToolPolicy has spec.agentAuth, an agent signs in to the
// sidecar with a client-credentials token of the organisation's provider; its call (under a
// policy permit, so the sidecar's Permit carries the token to the service) runs, and the Act
// the authority service records names the agent by the token's client_id (with the
// policy's prefix), not the pod's service account. The sidecar publishes RFC 9728 metadata
// and answers a request without a token, and every unusable token — expired, for another
// audience, of another issuer, unsigned (alg none), signed by a key the provider never had —
// with 401 and the MCP authorization specification's WWW-Authenticate challenge, before any
// upstream call. After the provider rotated its key (the old one withdrawn), a token of the
// new key is accepted and one of the withdrawn key refused.
func TestAgentOAuthSidecar(t *testing.T) {
	f := newAgentAuthFixture(t)
	old := f.token(t, "agent-a", "a-secret")
	cs := f.connect(t, old)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "post_note", Arguments: json.RawMessage(`{"text":"hello"}`)})
	if err != nil || res.IsError {
		t.Fatalf("the signed-in agent's call: %+v %v", res, err)
	}
	if got := f.agentsOf(t, "post_note"); len(got) != 1 || got[0] != "idp:agent-a" || f.up.Count("post_note") != 1 {
		t.Fatalf("Acts name %v (want idp:agent-a); upstream ran %d", got, f.up.Count("post_note"))
	}

	// The 2026-07-28 revision (stateless: no session, each request on its own): the agent's
	// token of each request reaches the service with that request's Permit.
	cs26 := f.connectAt(t, old, "2026-07-28")
	if v := cs26.InitializeResult(); v == nil || v.ProtocolVersion != "2026-07-28" {
		t.Fatalf("the 2026 client negotiated %+v", v)
	}
	res, err = cs26.CallTool(context.Background(), &mcp.CallToolParams{Name: "post_note", Arguments: json.RawMessage(`{"text":"stateless"}`)})
	if err != nil || res.IsError {
		t.Fatalf("the agent's call on 2026-07-28: %+v %v", res, err)
	}
	if got := f.agentsOf(t, "post_note"); len(got) != 2 || got[0] != "idp:agent-a" || got[1] != "idp:agent-a" || f.up.Count("post_note") != 2 {
		t.Fatalf("Acts name %v (want idp:agent-a twice); upstream ran %d", got, f.up.Count("post_note"))
	}

	// The metadata names the provider; a request without a token is told where to find it.
	resp, err := http.Get(f.base + agentoauth.MetadataPath + "/mcp/payments")
	if err != nil {
		t.Fatal(err)
	}
	var md agentoauth.Metadata
	err = json.NewDecoder(resp.Body).Decode(&md)
	_ = resp.Body.Close()
	if err != nil || md.Resource != f.base+"/mcp/payments" || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != f.p.Issuer() {
		t.Fatalf("metadata %+v: %v", md, err)
	}
	status, challenge := f.initialize(t, "")
	if status != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+f.base+agentoauth.MetadataPath+"/mcp/payments") {
		t.Fatalf("no token: HTTP %d, challenge %q", status, challenge)
	}

	// The host-loop endpoints are behind the same tokens.
	hl, err := http.Post(f.base+hostloop.EnforcePath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = hl.Body.Close()
	if hl.StatusCode != http.StatusUnauthorized || !strings.Contains(hl.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("host loop without a token: HTTP %d, challenge %q", hl.StatusCode, hl.Header.Get("WWW-Authenticate"))
	}

	expired := f.claims("agent-a")
	expired["exp"], expired["iat"], expired["nbf"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-2*time.Hour).Unix()
	wrongIss := f.claims("agent-a")
	wrongIss["iss"] = f.p.Issuer() + "/other"
	bad := map[string]string{
		"expired":        f.p.Sign(t, expired),
		"wrong audience": f.token(t, "elsewhere", "e-secret"),
		"wrong issuer":   f.p.Sign(t, wrongIss),
		"alg none":       unsigned(t, f.claims("agent-a")),
		"forged key":     forged(t, f.p.KeyID(), f.claims("agent-a")),
	}
	for name, tok := range bad {
		status, challenge := f.initialize(t, "Bearer "+tok)
		if status != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) || !strings.Contains(challenge, "resource_metadata=") {
			t.Errorf("%s: HTTP %d, challenge %q", name, status, challenge)
		}
	}
	if f.up.Count("post_note") != 2 {
		t.Fatalf("refused tokens reached the upstream: %d calls", f.up.Count("post_note"))
	}

	// Rotation: the key set is fetched again for a key id it lacks (at most every 30s).
	f.p.RotateKey(false)
	time.Sleep(31 * time.Second)
	fresh := f.token(t, "agent-b", "b-secret")
	cs2 := f.connect(t, fresh)
	res, err = cs2.CallTool(context.Background(), &mcp.CallToolParams{Name: "post_note", Arguments: json.RawMessage(`{"text":"hello"}`)})
	if err != nil || res.IsError {
		t.Fatalf("a token of the new key: %+v %v", res, err)
	}
	if status, challenge := f.initialize(t, "Bearer "+old); status != http.StatusUnauthorized || !strings.Contains(challenge, "invalid_token") {
		t.Fatalf("a token of the withdrawn key: HTTP %d, challenge %q", status, challenge)
	}
	if got := f.agentsOf(t, "post_note"); len(got) != 3 || !strings.Contains(strings.Join(got, ","), "idp:agent-b") {
		t.Fatalf("Acts name %v", got)
	}
}

// TestAgentOAuthServiceVerifies: the authority service does not take an agent's name from the
// sidecar, which the pod's author controls. A review sent around the sidecar with the pod's
// own (valid, pod-bound) service-account token but no agent token is refused
// AgentUnauthenticated; so is one carrying an expired, unsigned, forged or other-audience
// token; none of them records an Act. A valid token of agent-b names agent-b on the Act,
// whatever agent the act itself claims.
func TestAgentOAuthServiceVerifies(t *testing.T) {
	f := newAgentAuthFixture(t)
	r := f.r
	send := func(agentToken string, session string) (*review.Response, error) {
		c := r.callAt(t, session, "get_balance", `{}`, f.up.URL)
		return r.client(r.agentTk).Do(agentoauth.WithToken(context.Background(), agentToken), c.req)
	}
	expired := f.claims("agent-b")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	for name, tok := range map[string]string{
		"no agent token":  "",
		"expired":         f.p.Sign(t, expired),
		"alg none":        unsigned(t, f.claims("agent-b")),
		"forged key":      forged(t, f.p.KeyID(), f.claims("agent-b")),
		"other audience":  f.token(t, "elsewhere", "e-secret"),
		"not even a JWT":  "opaque-token-value",
		"issuer mismatch": forged(t, "", map[string]any{"iss": "https://evil.example", "aud": agentAudience, "client_id": "agent-b", "exp": time.Now().Add(time.Hour).Unix()}),
	} {
		resp, err := send(tok, "s-"+strings.ReplaceAll(name, " ", "-"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.Allowed || resp.Reason != review.ReasonAgentUnauthenticated || resp.Code != ef.EFAgentUnauthenticated {
			t.Errorf("%s: %+v", name, resp)
		}
	}
	if got := f.agentsOf(t, "get_balance"); len(got) != 0 {
		t.Fatalf("refused reviews recorded Acts naming %v", got)
	}
	resp, err := send(f.token(t, "agent-b", "b-secret"), "s-valid")
	if err != nil || resp.Reason == review.ReasonAgentUnauthenticated {
		t.Fatalf("a valid agent token: %+v %v", resp, err)
	}
	if got := f.agentsOf(t, "get_balance"); len(got) != 1 || got[0] != "idp:agent-b" {
		t.Fatalf("the Act names %v, want idp:agent-b (the act claimed %s)", got, r.agent)
	}
}

// TestAgentOAuthSidecarOnBehalf: the pod's sidecar exchanges each call's agent token at the
// provider for a token of the upstream (subject Agent; RFC 8693): two agents' calls reach the
// upstream under their own subjects, on both revisions, and the upstream never sees an agent's
// own token. An agent without a token never reaches the upstream.
func TestAgentOAuthSidecarOnBehalf(t *testing.T) {
	f := newAgentAuthFixture(t, true)
	ta, tb := f.token(t, "agent-a", "a-secret"), f.token(t, "agent-b", "b-secret")
	for _, c := range []struct {
		tok, version string
	}{{ta, "2025-11-25"}, {tb, "2025-11-25"}, {tb, "2026-07-28"}} {
		res, err := f.connectAt(t, c.tok, c.version).CallTool(context.Background(), &mcp.CallToolParams{Name: "post_note",
			Arguments: json.RawMessage(fmt.Sprintf(`{"text":"from %s"}`, c.version))})
		if err != nil || res.IsError {
			t.Fatalf("the agent's call on %s: %+v %v", c.version, res, err)
		}
	}
	if f.up.Count("post_note") != 3 {
		t.Fatalf("the upstream ran %d calls, want 3", f.up.Count("post_note"))
	}
	f.mu.Lock()
	subjects, seen := slices.Clone(f.subjects), slices.Clone(f.seen)
	f.mu.Unlock()
	if !slices.Contains(subjects, "agent-a") || !slices.Contains(subjects, "agent-b") {
		t.Fatalf("the upstream admitted subjects %v, want agent-a and agent-b", subjects)
	}
	for _, s := range subjects {
		if s != "agent-a" && s != "agent-b" {
			t.Fatalf("the upstream admitted subject %q", s)
		}
	}
	for _, tok := range seen {
		if tok == ta || tok == tb {
			t.Fatal("an agent's own token reached the upstream")
		}
	}
	if code, _ := f.initialize(t, ""); code != http.StatusUnauthorized || f.up.Count("post_note") != 3 {
		t.Fatalf("a request without a token: HTTP %d (upstream %d)", code, f.up.Count("post_note"))
	}
}
