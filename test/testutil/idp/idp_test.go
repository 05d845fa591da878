package idp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/actgate/actgate/test/testutil/idp"
)

const clientID = "actgate-approval"

// rp is a relying party of the test's own: its /callback exchanges the code with the PKCE
// verifier of the last authorization URL it made and answers with the ID token.
type rp struct {
	srv      *httptest.Server
	conf     oauth2.Config
	p        *idp.Provider
	mu       sync.Mutex
	verifier string
	state    string
	codes    int // authorization codes that reached /callback
}

// startRPs starts a relying party for each client id (secret id+"-secret") and a provider
// that registers them.
func startRPs(t *testing.T, ids ...string) (*idp.Provider, []*rp) {
	t.Helper()
	var rps []*rp
	var clients []idp.Client
	for _, id := range ids {
		r := &rp{}
		r.srv = httptest.NewServer(http.HandlerFunc(r.callback))
		t.Cleanup(r.srv.Close)
		r.conf = oauth2.Config{
			ClientID: id, ClientSecret: id + "-secret", RedirectURL: r.srv.URL + "/callback",
			Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"},
		}
		clients = append(clients, idp.Client{ID: id, Secret: r.conf.ClientSecret, RedirectURIs: []string{r.conf.RedirectURL}})
		rps = append(rps, r)
	}
	p := idp.Start(t, idp.Options{Clients: clients})
	for _, r := range rps {
		r.p = p
		r.conf.Endpoint = oauth2.Endpoint{AuthURL: p.Issuer() + "/authorize", TokenURL: p.Issuer() + "/oauth/token"}
	}
	return p, rps
}

func newRP(t *testing.T) (*idp.Provider, *rp) {
	t.Helper()
	p, rps := startRPs(t, clientID)
	return p, rps[0]
}

// authURL makes an authorization URL with PKCE and a fresh state; extra adds parameters.
func (r *rp) authURL(extra ...oauth2.AuthCodeOption) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verifier = oauth2.GenerateVerifier()
	r.state = oauth2.GenerateVerifier()
	return r.conf.AuthCodeURL(r.state, append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(r.verifier)}, extra...)...)
}

func (r *rp) callback(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	if e := q.Get("error"); e != "" {
		http.Error(w, "error="+e+" "+q.Get("error_description"), http.StatusForbidden)
		return
	}
	r.mu.Lock()
	r.codes++
	verifier, state := r.verifier, r.state
	r.mu.Unlock()
	if q.Get("state") != state {
		http.Error(w, "state mismatch", http.StatusBadRequest)
		return
	}
	ctx := context.WithValue(req.Context(), oauth2.HTTPClient, r.p.HTTPClient())
	tok, err := r.conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		http.Error(w, "exchange: "+err.Error(), http.StatusBadGateway)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	_, _ = io.WriteString(w, raw)
}

func (r *rp) codeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.codes
}

type claims struct {
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified"`
	Name          string   `json:"name"`
	Groups        []string `json:"groups"`
	AuthTime      int64    `json:"auth_time"`
}

// signIn runs SignIn with c and verifies the returned ID token with go-oidc.
func signIn(t *testing.T, p *idp.Provider, r *rp, c *http.Client, u idp.User, extra ...oauth2.AuthCodeOption) (*oidc.IDToken, claims, string) {
	t.Helper()
	resp := p.SignIn(t, c, r.authURL(extra...), u.Login, u.Password)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.String(), r.srv.URL+"/callback") {
		t.Fatalf("sign-in as %s ended at %s with %d: %s", u.Login, resp.Request.URL, resp.StatusCode, body)
	}
	ctx := oidc.ClientContext(context.Background(), p.HTTPClient())
	prov, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := prov.Verifier(&oidc.Config{ClientID: r.conf.ClientID}).Verify(ctx, string(body))
	if err != nil {
		t.Fatalf("go-oidc refuses the ID token: %v", err)
	}
	var cl claims
	if err := tok.Claims(&cl); err != nil {
		t.Fatal(err)
	}
	return tok, cl, string(body)
}

func TestDiscovery(t *testing.T) {
	p := idp.Start(t, idp.Options{})
	if strings.HasSuffix(p.Issuer(), "/") || !strings.HasPrefix(p.Issuer(), "https://127.0.0.1:") {
		t.Fatalf("issuer %q", p.Issuer())
	}
	resp, err := p.HTTPClient().Get(p.Issuer() + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var d struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(b, &d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery %d: %s", resp.StatusCode, b)
	}
	if d.Issuer != p.Issuer() || !strings.HasPrefix(d.JWKSURI, p.Issuer()+"/") {
		t.Fatalf("discovery names issuer %q and jwks %q, want %q", d.Issuer, d.JWKSURI, p.Issuer())
	}
	if !strings.Contains(string(b), `"S256"`) {
		t.Fatalf("discovery does not offer PKCE S256: %s", b)
	}
	// A client that does not trust the run's CA is refused at TLS.
	if _, err := http.Get(p.Issuer() + "/.well-known/openid-configuration"); err == nil {
		t.Fatal("a client without the run's CA reached the provider")
	}
}

func TestSignInVerifiedByGoOIDC(t *testing.T) {
	p, r := newRP(t)
	before := time.Now().Add(-time.Second)
	tok, cl, _ := signIn(t, p, r, p.HTTPClient(), idp.Alice)
	if tok.Issuer != p.Issuer() || tok.Subject == "" || tok.Subject == "alice" || len(tok.Audience) != 1 || tok.Audience[0] != clientID {
		t.Fatalf("token iss %q sub %q aud %v", tok.Issuer, tok.Subject, tok.Audience)
	}
	if cl.Email != "alice@example.com" || !cl.EmailVerified || cl.Name != idp.Alice.Name || len(cl.Groups) != 1 || cl.Groups[0] != "finance" {
		t.Fatalf("claims %+v", cl)
	}
	if at := time.Unix(cl.AuthTime, 0); at.Before(before.Truncate(time.Second)) || at.After(time.Now()) {
		t.Fatalf("auth_time %v not the sign-in's time", at)
	}
	// bob's token names bob.
	_, clb, _ := signIn(t, p, r, p.HTTPClient(), idp.Bob)
	if clb.Email != "bob@example.com" {
		t.Fatalf("bob's token names %q", clb.Email)
	}
	// A verifier for another client id refuses alice's token.
	_, _, raw := signIn(t, p, r, p.HTTPClient(), idp.Alice)
	ctx := oidc.ClientContext(context.Background(), p.HTTPClient())
	prov, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prov.Verifier(&oidc.Config{ClientID: "someone-else"}).Verify(ctx, raw); err == nil {
		t.Fatal("a verifier for another audience accepted the token")
	}
}

func TestWrongPasswordYieldsNoCode(t *testing.T) {
	p, r := newRP(t)
	c := p.HTTPClient()
	resp := p.SignIn(t, c, r.authURL(), "alice", "not-her-password")
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !p.IsLoginPage(resp) || !strings.Contains(string(body), "Wrong login or password") {
		t.Fatalf("wrong password: %d at %s: %s", resp.StatusCode, resp.Request.URL, body)
	}
	// Unknown user likewise.
	resp = p.SignIn(t, c, r.authURL(), "mallory", "x")
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !p.IsLoginPage(resp) {
		t.Fatalf("unknown user: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	if n := r.codeCount(); n != 0 {
		t.Fatalf("%d authorization codes reached the relying party", n)
	}
	// No provider session was started: a new request still shows the form.
	resp, err := c.Get(r.authURL())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !p.IsLoginPage(resp) {
		t.Fatalf("after failed sign-ins the provider answered %s without a login", resp.Request.URL)
	}
}

func TestMaxAgeAndPromptLoginForceNewLogin(t *testing.T) {
	p, r := newRP(t)
	c := p.HTTPClient()
	_, first, _ := signIn(t, p, r, c, idp.Alice)

	// The provider's session answers a plain request without the form, with the same auth_time.
	resp, err := c.Get(r.authURL())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if p.IsLoginPage(resp) || resp.StatusCode != http.StatusOK {
		t.Fatalf("single sign-on: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	_, again, _ := signIn(t, p, r, c, idp.Alice, oauth2.SetAuthURLParam("max_age", "300"))
	if again.AuthTime != first.AuthTime {
		t.Fatalf("within max_age auth_time moved from %d to %d", first.AuthTime, again.AuthTime)
	}

	time.Sleep(2100 * time.Millisecond)
	// max_age=1: the authentication is older, so the form is shown again.
	resp, err = c.Get(r.authURL(oauth2.SetAuthURLParam("max_age", "1")))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !p.IsLoginPage(resp) {
		t.Fatalf("max_age=1 after 2s was answered without a login: %s", resp.Request.URL)
	}
	_, stepped, _ := signIn(t, p, r, c, idp.Alice, oauth2.SetAuthURLParam("max_age", "1"))
	if stepped.AuthTime <= first.AuthTime {
		t.Fatalf("max_age: auth_time %d not later than %d", stepped.AuthTime, first.AuthTime)
	}

	time.Sleep(1100 * time.Millisecond)
	// prompt=login always asks again.
	resp, err = c.Get(r.authURL(oauth2.SetAuthURLParam("prompt", "login")))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !p.IsLoginPage(resp) {
		t.Fatal("prompt=login was answered without a login")
	}
	_, prompted, _ := signIn(t, p, r, c, idp.Alice, oauth2.SetAuthURLParam("prompt", "login"))
	if prompted.AuthTime <= stepped.AuthTime {
		t.Fatalf("prompt=login: auth_time %d not later than %d", prompted.AuthTime, stepped.AuthTime)
	}

	// prompt=none with no session is refused with login_required at the redirect URI.
	fresh := p.HTTPClient()
	resp, err = fresh.Get(r.authURL(oauth2.SetAuthURLParam("prompt", "none")))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "login_required") {
		t.Fatalf("prompt=none without a session: %d %s", resp.StatusCode, body)
	}
}

func TestBadRequestsRefused(t *testing.T) {
	p, r := newRP(t)
	noRedirect := p.HTTPClient()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	verifier := oauth2.GenerateVerifier()
	challenge := oauth2.S256ChallengeFromVerifier(verifier)
	base := url.Values{
		"client_id": {clientID}, "redirect_uri": {r.conf.RedirectURL}, "response_type": {"code"},
		"scope": {"openid email"}, "state": {"s"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	with := func(k, v string) url.Values {
		q := url.Values{}
		for kk, vv := range base {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return q
	}
	for _, tc := range []struct {
		name string
		q    url.Values
		// wantRedirectError: refused with an error sent to the (registered) redirect URI;
		// otherwise refused with 400 at the provider, never redirected.
		wantRedirectError string
	}{
		{"unknown client", with("client_id", "nobody"), ""},
		{"redirect_uri not registered", with("redirect_uri", "https://evil.example/callback"), ""},
		{"redirect_uri with another path", with("redirect_uri", r.srv.URL+"/other"), ""},
		{"missing PKCE", with("code_challenge", ""), "invalid_request"},
		{"plain PKCE", with("code_challenge_method", "plain"), "invalid_request"},
		{"no openid scope", with("scope", "email"), "invalid_scope"},
		{"response type token", with("response_type", "token"), "unauthorized_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := noRedirect.Get(p.Issuer() + "/authorize?" + tc.q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			loc := resp.Header.Get("Location")
			if strings.Contains(loc, "/login") || strings.Contains(loc, "code=") {
				t.Fatalf("accepted: %d Location %s", resp.StatusCode, loc)
			}
			if tc.wantRedirectError == "" {
				if resp.StatusCode == http.StatusFound && strings.HasPrefix(loc, r.conf.RedirectURL) {
					// An error sent to the registered redirect URI is a refusal too (no code).
					if !strings.Contains(loc, "error=") {
						t.Fatalf("redirected without error: %s", loc)
					}
					return
				}
				if resp.StatusCode < 400 {
					t.Fatalf("status %d Location %q body %s", resp.StatusCode, loc, body)
				}
				return
			}
			if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, r.conf.RedirectURL) || !strings.Contains(loc, "error="+tc.wantRedirectError) {
				t.Fatalf("status %d Location %q body %s", resp.StatusCode, loc, body)
			}
		})
	}

	// At the token endpoint: a code exchanged without the verifier, with a wrong one, with the
	// wrong client secret, or twice, yields no tokens.
	c := p.HTTPClient()
	code := func() string {
		c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), r.conf.RedirectURL) {
				return http.ErrUseLastResponse
			}
			return nil
		}
		resp := p.SignIn(t, c, r.conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), "alice", idp.Alice.Password)
		_ = resp.Body.Close()
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || u.Query().Get("code") == "" {
			t.Fatalf("no code: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		return u.Query().Get("code")
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, p.HTTPClient())
	if _, err := r.conf.Exchange(ctx, code()); err == nil {
		t.Fatal("a code was exchanged without the PKCE verifier")
	}
	if _, err := r.conf.Exchange(ctx, code(), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("a code was exchanged with a wrong PKCE verifier")
	}
	wrong := r.conf
	wrong.ClientSecret = "guess"
	if _, err := wrong.Exchange(ctx, code(), oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a code was exchanged with a wrong client secret")
	}
	good := code()
	if _, err := r.conf.Exchange(ctx, good, oauth2.VerifierOption(verifier)); err != nil {
		t.Fatalf("the right exchange failed: %v", err)
	}
	if _, err := r.conf.Exchange(ctx, good, oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a code was exchanged twice")
	}
}
