package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/upstreamauth"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/idp"
)

// TestSidecarUpstreamTokenExchange: the sidecar exchanges the pod's service-account token — a
// real one, issued by a kube-apiserver's TokenRequest API for the provider's audience, as the
// kubelet projects it — at the organisation's provider (RFC 8693) for a token of the upstream
// (aud = its URL, sub = the service account), which the upstream verifies against the
// provider's keys; the token is cached across calls; once it expired with the provider down, the
// call is not sent and the agent gets EF_UPSTREAM_IDP_UNAVAILABLE.
func TestSidecarUpstreamTokenExchange(t *testing.T) {
	env := envtest.Start(t, envtest.WithoutCRDs())
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(testNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "billing-agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's service-account issuer and its public keys, as an IdP trusting the
	// cluster is configured with them.
	var disc struct {
		Issuer string `json:"issuer"`
	}
	raw, err := cs.RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil || json.Unmarshal(raw, &disc) != nil || disc.Issuer == "" {
		t.Fatalf("the API server's issuer: %v %s", err, raw)
	}
	var keys jose.JSONWebKeySet
	if raw, err = cs.RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx); err != nil || json.Unmarshal(raw, &keys) != nil || len(keys.Keys) == 0 {
		t.Fatalf("the API server's keys: %v %s", err, raw)
	}
	const idpAudience = "https://idp.actgate.test"
	tr, err := cs.CoreV1().ServiceAccounts(testNS).CreateToken(ctx, "billing-agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{idpAudience}, ExpirationSeconds: ptr.To[int64](3600),
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var verifier atomic.Pointer[oidc.IDTokenVerifier]
	var mu sync.Mutex
	var subjects []string
	up, err := mcptest.Start(bankTools(), mcptest.Options{Intercept: func(w http.ResponseWriter, r *http.Request) bool {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if idt, err := verifier.Load().Verify(r.Context(), tok); err == nil {
				mu.Lock()
				subjects = append(subjects, idt.Subject)
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
	p := idp.Start(t, idp.Options{
		Clients:        []idp.Client{{ID: "sidecar", Secret: "sidecar-secret", Audience: []string{up.URL}, TokenExchange: true, AccessTokenLifetime: 3 * time.Second}},
		SubjectIssuers: []idp.SubjectIssuer{{Issuer: disc.Issuer, Audience: idpAudience, Keys: keys}},
	})
	verifier.Store(oidc.NewVerifier(p.Issuer(), oidc.NewRemoteKeySet(oidc.ClientContext(ctx, p.HTTPClient()), p.Issuer()+"/keys"), &oidc.Config{ClientID: up.URL}))

	s := newStub(t, bankModes)
	files := writeSidecarFiles(t, s)
	s.spec, s.epoch = testPolicy(t, up.URL), 1
	sc, err := New(Config{
		Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCAFile: files.ca, TokenFile: files.token,
		PublicKeyFile: files.key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
		Upstreams: []Upstream{{Name: "payments", URL: up.URL, OAuth: &upstreamauth.Config{
			Grant: upstreamauth.GrantTokenExchange, TokenURL: p.TokenURL(), ClientID: "sidecar",
			ClientSecretFile: writeFile(t, files.dir, "client-secret", []byte("sidecar-secret")),
			SubjectTokenFile: writeFile(t, files.dir, "sa-token", []byte(tr.Status.Token)), HTTPClient: p.HTTPClient(),
		}}},
		JournalDir: filepath.Join(files.dir, "journal"),
	})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOnLoopback(t, sc)
	start := time.Now()
	agent := connectTo(t, base+"/mcp/payments")
	for i := range 2 {
		if res := call(t, agent, "send_payment", fmt.Sprintf(`{"amount":%d}`, i+1)); res.IsError {
			t.Fatalf("call %d through the sidecar: %s", i, text(res))
		}
	}
	mu.Lock()
	got := append([]string(nil), subjects...)
	mu.Unlock()
	if up.Count("send_payment") != 2 || len(got) == 0 || got[0] != "system:serviceaccount:"+testNS+":billing-agent" {
		t.Fatalf("upstream ran %d, saw subjects %v", up.Count("send_payment"), got)
	}
	if n := p.TokenRequests(); n != 1 {
		t.Fatalf("%d token exchanges for a session and two calls, want 1", n)
	}
	for _, a := range up.Authorizations() {
		if strings.Contains(a, tr.Status.Token) {
			t.Fatal("the service-account token itself reached the upstream")
		}
	}
	p.Stop()
	seen := len(up.Authorizations())
	time.Sleep(time.Until(start.Add(4 * time.Second)))
	res := call(t, agent, "send_payment", `{"amount":9}`)
	if !res.IsError || efCode(res) != string(ef.EFUpstreamIDPUnavailable) || len(up.Authorizations()) != seen || up.Count("send_payment") != 2 {
		t.Fatalf("provider down: %s (%s); upstream saw %d more requests", text(res), efCode(res), len(up.Authorizations())-seen)
	}
}
