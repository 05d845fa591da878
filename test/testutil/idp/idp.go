// Package idp is a real OpenID provider for tests: an OP built on github.com/zitadel/oidc/v3
// (pkg/op) with the project's own in-memory storage (users and clients from Options) and its
// own minimal login page, served over HTTPS with a CA made for the run. It offers the
// Authorization Code flow with PKCE (S256, required of every client) and puts iss, sub, aud,
// email, name, groups and auth_time into its ID tokens, signed by an RSA key made per run. The
// login page honours prompt=login and max_age (docs/operations.md, "Identity provider for
// people who approve"), so step-up tests see a new auth_time.
//
// A kube-apiserver trusts it through AuthenticationConfig (structured authentication
// configuration); the approval service signs people in against it.
package idp

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"go.yaml.in/yaml/v3"

	"github.com/actgate/actgate/test/testutil"
)

// User is a person who can sign in at the provider.
type User struct {
	Login, Password, Email, Name string
	Groups                       []string
}

// Client is a registered relying party: confidential (client_secret_basic or _post) when Secret
// is set, public otherwise. Both must use PKCE; RedirectURIs are matched exactly.
//
// A client with an Audience is also a machine client: with its secret it may use the client
// credentials grant (RFC 6749 §4.4), and gets JWT access tokens (RFC 9068 shape: iss, sub and
// client_id = ID, aud = Audience, exp, iat, nbf, jti, scope) signed by the provider's current
// key, valid for AccessTokenLifetime (default 5m), for the scopes it asks for among Scopes.
type Client struct {
	ID, Secret   string
	RedirectURIs []string

	Audience            []string
	Scopes              []string
	AccessTokenLifetime time.Duration

	// PublicKey, when set, lets the client authenticate by a private_key_jwt assertion (RFC
	// 7523 §2.2) signed by the matching private key, for the client credentials and token
	// exchange grants; a client with a PublicKey and no Secret authenticates only so.
	PublicKey crypto.PublicKey
	// OpaqueAccessTokens makes a machine client's access tokens opaque (not JWTs): a resource
	// server learns what they say by introspection (RFC 7662, IntrospectionURL), which any
	// client with a secret may call.
	OpaqueAccessTokens bool
	// TokenExchange lets the client exchange a subject token (RFC 8693) for a JWT access token
	// whose audience is among its Audience (exchange.go).
	TokenExchange bool
}

// Options configure Start.
type Options struct {
	// Addr is the host:port to listen on; empty means 127.0.0.1 on a free port. The host must be
	// an address clients use as is (the node's own IP, so pods, the API server and a browser on
	// the host reach the same issuer URL); port 0 picks a free one.
	Addr string
	// Users who can sign in; empty means Alice and Bob.
	Users []User
	// Clients registered at the provider.
	Clients []Client
	// SubjectIssuers are the issuers whose JWTs a token exchange accepts as subject tokens
	// (the provider's own access tokens are accepted too).
	SubjectIssuers []SubjectIssuer
}

// The default users.
var (
	Alice = User{Login: "alice", Password: "alice-password", Email: "alice@example.com", Name: "Alice Approver", Groups: []string{"finance"}}
	Bob   = User{Login: "bob", Password: "bob-password", Email: "bob@example.com", Name: "Bob Bystander", Groups: []string{"ops"}}
)

// SessionCookie is the name of the provider's own sign-in session cookie.
const SessionCookie = "idp_session"

// Provider is a running OpenID provider.
type Provider struct {
	issuer  string
	pki     *testutil.PKI
	storage *storage
	op      *op.Provider
	srv     *http.Server

	tokenRequests atomic.Int64
}

// Start starts a provider; it stops when t ends.
func Start(t testing.TB, o Options) *Provider {
	t.Helper()
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("idp: address %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		t.Fatalf("idp: address %q: the host must be an IP address clients can reach", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("idp: listen: %v", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if len(o.Users) == 0 {
		o.Users = []User{Alice, Bob}
	}
	st, err := newStorage(o)
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	p := &Provider{issuer: "https://" + net.JoinHostPort(host, port), storage: st}
	st.issuer = p.issuer
	p.pki = testutil.NewPKI(t, t.TempDir(), host)
	st.loginURL = func(id string) string { return p.issuer + "/login?id=" + url.QueryEscape(id) }

	cfg := &op.Config{CodeMethodS256: true, AuthMethodPost: true, SupportedScopes: []string{"openid", "profile", "email", "groups"}}
	if _, err := rand.Read(cfg.CryptoKey[:]); err != nil {
		t.Fatal(err)
	}
	if p.op, err = op.NewProvider(cfg, st, op.StaticIssuer(p.issuer)); err != nil {
		_ = ln.Close()
		t.Fatalf("idp: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", p.login)
	mux.Handle("/oauth/token", p.tokenEndpoint(p.op))
	mux.Handle("/", p.op)
	p.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{p.pki.Cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

// Stop stops serving: the provider is down (its discovery document and keys unreachable)
// until the test ends.
func (p *Provider) Stop() { _ = p.srv.Close() }

// RotateKey makes a new signing key current. With keepOld the key set still publishes the
// previous key (a rotation in progress); without, it is removed (tokens it signed no longer
// verify at a relying party that fetches the set again).
func (p *Provider) RotateKey(keepOld bool) { p.storage.rotate(keepOld) }

// KeyID is the key id of the current signing key.
func (p *Provider) KeyID() string { return p.storage.signingKey().id }

// Sign signs claims with the provider's current key (RS256, its key id in the header): a
// token the provider could have issued, for tests that need claims it does not issue
// (expired, another issuer or audience).
func (p *Provider) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	k := p.storage.signingKey()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader(jose.HeaderKey("kid"), k.id))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// PublicKeyPEM is the current signing key's public key, PKIX PEM (what an attacker who wants
// an HS256 token "signed" with the public key uses as the HMAC secret).
func (p *Provider) PublicKeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&p.storage.signingKey().key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Issuer is the issuer URL, https://HOST:PORT with no trailing slash.
func (p *Provider) Issuer() string { return p.issuer }

// CAPEM is the PEM of the CA that signed the provider's TLS certificate.
func (p *Provider) CAPEM() []byte { return slices.Clone(p.pki.CAPEM) }

// CAFile is a file holding CAPEM.
func (p *Provider) CAFile() string { return p.pki.CAFile }

// HTTPClient is a client that trusts CAPEM, with its own cookie jar (a browser of its own).
func (p *Provider) HTTPClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: p.pki.Pool, MinVersion: tls.VersionTLS12},
			Proxy:           nil,
		},
	}
}

// SignIn opens authURL (an authorization request) with c, which must trust CAPEM, hold a
// cookie jar and follow redirects. When the provider shows its login page, SignIn submits
// login and password; when the provider's session already satisfies the request, no form is
// shown. It returns the final response: the relying party's answer at its redirect_uri, or the
// login page again (401) when the password is wrong. The caller closes its body.
func (p *Provider) SignIn(t testing.TB, c *http.Client, authURL, login, password string) *http.Response {
	t.Helper()
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatalf("idp: sign-in: open %s: %v", authURL, err)
	}
	if !p.isLoginPage(resp) {
		return resp
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	id := resp.Request.URL.Query().Get("id")
	resp, err = c.PostForm(p.issuer+"/login", url.Values{"id": {id}, "login": {login}, "password": {password}})
	if err != nil {
		t.Fatalf("idp: sign-in: submit the login form: %v", err)
	}
	return resp
}

// IsLoginPage reports whether resp is the provider's login page (the form SignIn fills).
func (p *Provider) IsLoginPage(resp *http.Response) bool { return p.isLoginPage(resp) }

func (p *Provider) isLoginPage(resp *http.Response) bool {
	u := resp.Request.URL
	return "https://"+u.Host == p.issuer && u.Path == "/login" && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html")
}

// The extra keys the API server maps from the ID token into userInfo.extra (docs/security.md:
// the approval service writes a resolution with the person's own token).
const (
	ExtraIssuer   = "actgate.io/oidc-issuer"
	ExtraSubject  = "actgate.io/oidc-subject"
	ExtraAuthTime = "actgate.io/auth-time"
)

// AuthenticationConfig is an AuthenticationConfiguration (apiserver.config.k8s.io/v1) that
// trusts this provider for ID tokens whose audience is audience: username 'oidc:' + email
// (which must be verified), groups 'oidc:' + each group, and the extra keys ExtraIssuer,
// ExtraSubject and ExtraAuthTime (decimal Unix seconds; absent when the token has none).
func (p *Provider) AuthenticationConfig(audience string) []byte {
	cfg := map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AuthenticationConfiguration",
		"jwt": []any{map[string]any{
			"issuer": map[string]any{
				"url":                  p.issuer,
				"certificateAuthority": string(p.pki.CAPEM),
				"audiences":            []string{audience},
			},
			"claimValidationRules": []any{map[string]any{
				"expression": "claims.?email_verified.orValue(false) == true",
				"message":    "the email claim must be verified",
			}},
			"claimMappings": map[string]any{
				"username": map[string]any{"expression": "'oidc:' + claims.email"},
				"groups":   map[string]any{"claim": "groups", "prefix": "oidc:"},
				"uid":      map[string]any{"expression": "claims.sub"},
				"extra": []any{
					map[string]any{"key": ExtraIssuer, "valueExpression": "claims.iss"},
					map[string]any{"key": ExtraSubject, "valueExpression": "claims.sub"},
					map[string]any{"key": ExtraAuthTime, "valueExpression": "has(claims.auth_time) ? string(int(claims.auth_time)) : ''"},
				},
			},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return b
}

// WriteAuthenticationConfig writes AuthenticationConfig(audience) to dir/authentication-config.yaml
// and returns its path (for --authentication-config).
func (p *Provider) WriteAuthenticationConfig(t testing.TB, dir, audience string) string {
	t.Helper()
	return testutil.WriteFile(t, dir, "authentication-config.yaml", p.AuthenticationConfig(audience))
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in — test identity provider</title></head>
<body><main>
<h1>Sign in</h1>
{{if .Error}}<p id="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<label>Login <input name="login" autocomplete="username" value="{{.Login}}"></label>
<label>Password <input type="password" name="password" autocomplete="current-password"></label>
<button id="sign-in" type="submit">Sign in</button>
</form>
</main></body></html>
`))

type loginData struct{ ID, Login, Error string }

// login is the provider's login page. GET shows the form unless the provider's session already
// satisfies the request (no prompt=login, and max_age, when given, not exceeded); POST checks
// the password, starts a session with a new auth_time and completes the request.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodGet:
		id := r.URL.Query().Get("id")
		req, ok := p.storage.request(id)
		if !ok {
			http.Error(w, "unknown or expired authorization request", http.StatusBadRequest)
			return
		}
		if ss, ok := p.currentSession(r); ok && satisfies(req, ss.authTime, time.Now()) {
			p.finish(w, r, id, ss.login, ss.authTime)
			return
		}
		if slices.Contains(req.prompt, oidc.PromptNone) {
			op.AuthRequestError(w, r, &req, oidc.ErrLoginRequired(), p.op)
			return
		}
		render(w, http.StatusOK, loginData{ID: id})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		id, login := r.PostForm.Get("id"), r.PostForm.Get("login")
		if _, ok := p.storage.request(id); !ok {
			http.Error(w, "unknown or expired authorization request", http.StatusBadRequest)
			return
		}
		if !p.storage.checkPassword(login, r.PostForm.Get("password")) {
			render(w, http.StatusUnauthorized, loginData{ID: id, Login: login, Error: "Wrong login or password."})
			return
		}
		authTime := time.Now().Truncate(time.Second) // auth_time has whole seconds
		sid, err := p.storage.newSession(login, authTime)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sid, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
		p.finish(w, r, id, login, authTime)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// satisfies reports whether an authentication at authTime may answer req at now.
func satisfies(req authRequest, authTime, now time.Time) bool {
	if slices.Contains(req.prompt, oidc.PromptLogin) {
		return false
	}
	if req.maxAge == nil {
		return true
	}
	return *req.maxAge > 0 && now.Sub(authTime) <= time.Duration(*req.maxAge)*time.Second
}

func (p *Provider) currentSession(r *http.Request) (session, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return session{}, false
	}
	return p.storage.session(c.Value)
}

func (p *Provider) finish(w http.ResponseWriter, r *http.Request, id, login string, authTime time.Time) {
	if err := p.storage.complete(id, login, authTime); err != nil {
		http.Error(w, "unknown or expired authorization request", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, p.op.AuthorizationEndpoint().Absolute(p.issuer)+"/callback?id="+url.QueryEscape(id), http.StatusFound)
}

func render(w http.ResponseWriter, status int, d loginData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, d)
}
