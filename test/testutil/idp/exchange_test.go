package idp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/actgate/actgate/test/testutil/idp"
)

const upstreamAud = "https://upstream.example/mcp"

// workload is a subject-token issuer of the test's own (as a Kubernetes API server issues
// service-account tokens).
type workload struct {
	key    *rsa.PrivateKey
	issuer string
}

func newWorkload(t *testing.T) *workload {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &workload{key: k, issuer: "https://kubernetes.default.svc.cluster.local"}
}

func (w *workload) trusted(aud string) idp.SubjectIssuer {
	return idp.SubjectIssuer{Issuer: w.issuer, Audience: aud, Keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &w.key.PublicKey, KeyID: "sa", Algorithm: "RS256", Use: "sig"}}}}
}

func (w *workload) token(t *testing.T, key *rsa.PrivateKey, iss, aud string, exp time.Duration) string {
	t.Helper()
	return signJWT(t, jose.SigningKey{Algorithm: jose.RS256, Key: key}, "sa", jwt.Claims{
		Issuer: iss, Subject: "system:serviceaccount:shop:agent", Audience: jwt.Audience{aud},
		IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(exp)),
	})
}

func signJWT(t *testing.T, k jose.SigningKey, kid string, c jwt.Claims) string {
	t.Helper()
	s, err := jose.NewSigner(k, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	out, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// post sends a token request and returns the status and the decoded answer.
func post(t *testing.T, p *idp.Provider, form url.Values, basic ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if len(basic) == 2 {
		req.SetBasicAuth(basic[0], basic[1])
	}
	resp, err := p.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func verifyFor(t *testing.T, p *idp.Provider, aud, tok string) *oidc.IDToken {
	t.Helper()
	ctx := oidc.ClientContext(context.Background(), p.HTTPClient())
	v := oidc.NewVerifier(p.Issuer(), oidc.NewRemoteKeySet(ctx, p.Issuer()+"/keys"), &oidc.Config{ClientID: aud})
	idt, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatalf("the issued token does not verify for %s: %v", aud, err)
	}
	return idt
}

// TestTokenExchange: a client allowed to exchange gets, for a subject token of a trusted issuer
// (signed by its key, for the configured audience, unexpired), a JWT access token with sub = the
// subject token's sub and aud = the upstream it asked for; a subject token of an untrusted key,
// of another audience, expired, an audience the client may not have, a client not allowed to
// exchange and a wrong secret get none.
func TestTokenExchange(t *testing.T) {
	w := newWorkload(t)
	p := idp.Start(t, idp.Options{
		Clients: []idp.Client{
			{ID: "gate", Secret: "gate-secret", Audience: []string{upstreamAud}, TokenExchange: true, AccessTokenLifetime: time.Minute},
			{ID: "nox", Secret: "nox-secret", Audience: []string{upstreamAud}},
		},
		SubjectIssuers: []idp.SubjectIssuer{w.trusted("https://idp.example")},
	})
	form := func(subject, aud string) url.Values {
		return url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:jwt"}, "audience": {aud}, "resource": {aud},
		}
	}
	good := w.token(t, w.key, w.issuer, "https://idp.example", time.Hour)
	st, out := post(t, p, form(good, upstreamAud), "gate", "gate-secret")
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, out)
	}
	idt := verifyFor(t, p, upstreamAud, out["access_token"].(string))
	if idt.Subject != "system:serviceaccount:shop:agent" || !slices.Equal(idt.Audience, []string{upstreamAud}) || time.Until(idt.Expiry) > time.Minute+5*time.Second {
		t.Fatalf("exchanged token: sub %q aud %v exp %v", idt.Subject, idt.Audience, idt.Expiry)
	}
	if out["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" {
		t.Fatalf("issued_token_type %v", out["issued_token_type"])
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for name, tc := range map[string]struct {
		form  url.Values
		basic []string
	}{
		"subject token of another key":     {form(w.token(t, other, w.issuer, "https://idp.example", time.Hour), upstreamAud), []string{"gate", "gate-secret"}},
		"subject token of another issuer":  {form(w.token(t, w.key, "https://evil.example", "https://idp.example", time.Hour), upstreamAud), []string{"gate", "gate-secret"}},
		"subject token for another aud":    {form(w.token(t, w.key, w.issuer, "https://else.example", time.Hour), upstreamAud), []string{"gate", "gate-secret"}},
		"expired subject token":            {form(w.token(t, w.key, w.issuer, "https://idp.example", -time.Minute), upstreamAud), []string{"gate", "gate-secret"}},
		"audience the client may not have": {form(good, "https://bank.example/mcp"), []string{"gate", "gate-secret"}},
		"client not allowed to exchange":   {form(good, upstreamAud), []string{"nox", "nox-secret"}},
		"wrong secret":                     {form(good, upstreamAud), []string{"gate", "nope"}},
		"no client":                        {form(good, upstreamAud), nil},
	} {
		if st, out := post(t, p, tc.form, tc.basic...); st == http.StatusOK || out["access_token"] != nil {
			t.Errorf("%s: %d %v", name, st, out)
		}
	}
}

// TestPrivateKeyJWT: a client registered with a public key gets tokens by client credentials
// and by token exchange with a private_key_jwt assertion (RFC 7523 §2.2); an assertion signed by
// another key, for another audience, expired, replayed (same jti), without a jti, expiring too
// late, combined with a secret, or of a client without a key is refused (401 invalid_client),
// and the token endpoint counts every request.
func TestPrivateKeyJWT(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t)
	p := idp.Start(t, idp.Options{
		Clients: []idp.Client{
			{ID: "gate", PublicKey: &key.PublicKey, Audience: []string{upstreamAud}, TokenExchange: true},
			{ID: "sec", Secret: "sec-secret", Audience: []string{upstreamAud}},
		},
		SubjectIssuers: []idp.SubjectIssuer{w.trusted("https://idp.example")},
	})
	assertion := func(k any, id, aud, jti string, exp time.Duration) string {
		return signJWT(t, jose.SigningKey{Algorithm: jose.ES256, Key: k}, "k1", jwt.Claims{
			Issuer: id, Subject: id, Audience: jwt.Audience{aud}, ID: jti,
			IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(exp)),
		})
	}
	cc := func(a string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
	}
	before := p.TokenRequests()
	a1 := assertion(key, "gate", p.TokenURL(), "j1", time.Minute)
	st, out := post(t, p, cc(a1))
	if st != http.StatusOK {
		t.Fatalf("client credentials by assertion: %d %v", st, out)
	}
	verifyFor(t, p, upstreamAud, out["access_token"].(string))
	ex := cc(assertion(key, "gate", p.Issuer(), "j2", time.Minute))
	ex.Set("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange")
	ex.Set("subject_token", w.token(t, w.key, w.issuer, "https://idp.example", time.Hour))
	ex.Set("subject_token_type", "urn:ietf:params:oauth:token-type:jwt")
	ex.Set("audience", upstreamAud)
	if st, out := post(t, p, ex); st != http.StatusOK {
		t.Fatalf("token exchange by assertion: %d %v", st, out)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	withSecret := cc(assertion(key, "gate", p.TokenURL(), "j9", time.Minute))
	withSecret.Set("client_secret", "x")
	for name, f := range map[string]url.Values{
		"another key":          cc(assertion(other, "gate", p.TokenURL(), "j3", time.Minute)),
		"another audience":     cc(assertion(key, "gate", "https://else.example/token", "j4", time.Minute)),
		"expired":              cc(assertion(key, "gate", p.TokenURL(), "j5", -time.Minute)),
		"replayed":             cc(a1),
		"no jti":               cc(assertion(key, "gate", p.TokenURL(), "", time.Minute)),
		"expiring in an hour":  cc(assertion(key, "gate", p.TokenURL(), "j6", time.Hour)),
		"client without a key": cc(assertion(key, "sec", p.TokenURL(), "j7", time.Minute)),
		"with a secret too":    withSecret,
		"not a JWT":            cc("not-a-jwt"),
	} {
		if st, out := post(t, p, f); st == http.StatusOK || out["access_token"] != nil {
			t.Errorf("%s: %d %v", name, st, out)
		}
	}
	if n := p.TokenRequests() - before; n != 11 {
		t.Fatalf("token requests counted: %d, want 11", n)
	}
}
