package approval

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-logr/logr"
	"golang.org/x/oauth2"
	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/internal/console"
)

//go:embed static/*
var assets embed.FS

// Defaults of Options (and of the subcommand's flags).
const (
	DefaultSessionLifetime = 15 * time.Minute
	DefaultStepUpMaxAge    = 5 * time.Minute
	DefaultMaxSessions     = 10000
	DefaultMaxLogins       = 1000
	DefaultLoginTimeout    = 10 * time.Minute
)

// DefaultStepUpClasses are the consequence classes whose moments need a fresh authentication.
var DefaultStepUpClasses = []string{"FINANCIAL", "PHYSICAL", "NETWORK_CONTROL"}

// Paths the service answers.
const (
	pathRoot     = "/"
	pathResolve  = "/resolve"
	pathLogin    = "/login"
	pathCallback = "/callback"
	pathSignOut  = "/signout"
	pathHealthz  = "/healthz"
	pathReadyz   = "/readyz"
	pathScript   = "/static/approval.js"
	// queryMoment carries a deep link's NAMESPACE/NAME to /login; queryStepUp asks for max_age.
	queryMoment = "moment"
	queryStepUp = "stepup"
)

// Options configure a Service.
type Options struct {
	// ExternalURL is the service's address as browsers reach it (scheme and host, no path):
	// the Host and Origin every request must name, and the base of the redirect URI
	// (ExternalURL + "/callback").
	ExternalURL string
	// Issuer, ClientID and ClientSecret name the OpenID provider and this service's client.
	Issuer, ClientID, ClientSecret string
	// IssuerClient talks to the provider (its CA). Nil: http.DefaultClient.
	IssuerClient *http.Client
	// Kube is the API server's address and CA; its credentials, if any, are dropped: every
	// request is made with the signed-in person's ID token. Required unless Backends is set.
	Kube *rest.Config
	// Namespaces are where the service lists BindingMoments. Required unless Backends is set.
	Namespaces []string
	// Backends, when set, makes each signed-in person's principal name and backend instead of
	// the Kubernetes backend of Kube and Namespaces (the standalone gate's, which maps a
	// claim to one of its principals).
	Backends Backends
	// Surface names where the moments live, in the page's header. Empty: the namespaces.
	Surface string
	// SessionLifetime bounds a session (never beyond the ID token's expiry). Zero: 15m.
	SessionLifetime time.Duration
	// StepUpMaxAge is the oldest authentication that may resolve a moment of StepUpClasses.
	// Zero: 5m.
	StepUpMaxAge time.Duration
	// StepUpClasses are those classes. Nil: DefaultStepUpClasses.
	StepUpClasses []string
	// MaxSessions and MaxLogins bound the session and pending-login stores; LoginTimeout is
	// how long a sign-in may take. Zero: the defaults.
	MaxSessions, MaxLogins int
	LoginTimeout           time.Duration
	// Now is the service's clock (sessions, step-up); ID tokens are verified on the real
	// clock. Nil: time.Now.
	Now func() time.Time
	// Timeout bounds each call to the provider or the API server. Zero: 30s.
	Timeout time.Duration
	// Log receives one line per sign-in, sign-out and resolution: digests and names, never
	// a token, an argument or an answer.
	Log logr.Logger
}

// Service is the approval service's HTTP handler.
type Service struct {
	o        Options
	external *url.URL
	origin   string
	core     *console.Core
	sessions *sessions
	logins   *logins
	stepUp   map[string]bool
	static   http.Handler
	landing  *template.Template

	mu       sync.Mutex
	provider *oidc.Provider

	requests atomic.Int64
}

// New checks o and returns a Service. The provider's discovery document is fetched on first
// use (Ready).
func New(o Options) (*Service, error) {
	u, err := url.Parse(o.ExternalURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("external URL %q: want https://HOST[:PORT] without a path", o.ExternalURL)
	}
	switch {
	case o.Issuer == "" || o.ClientID == "":
		return nil, errors.New("an OIDC issuer and client id are required")
	case o.Backends != nil:
	case o.Kube == nil || o.Kube.Host == "":
		return nil, errors.New("no API server address")
	case len(o.Namespaces) == 0:
		return nil, errors.New("no namespaces to serve")
	}
	for _, ns := range o.Namespaces {
		if n, _, err := parseMomentRef(ns + "/x"); err != nil || n == "" {
			return nil, fmt.Errorf("namespace %q is not a DNS label", ns)
		}
	}
	if o.Backends == nil {
		o.Backends = &kubeBackends{kube: o.Kube, namespaces: o.Namespaces}
		if o.Surface == "" {
			o.Surface = "approval service · " + strings.Join(o.Namespaces, ", ")
		}
	}
	stepUp, err := o.defaults()
	if err != nil {
		return nil, err
	}
	core, err := console.NewCore(console.CoreOptions{Now: o.Now, Timeout: o.Timeout, Log: o.Log})
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	landing, err := template.New("landing").Parse(landingPage)
	if err != nil {
		return nil, err
	}
	if kb, ok := o.Backends.(*kubeBackends); ok {
		kb.now = o.Now
	}
	return &Service{o: o, external: u, origin: u.Scheme + "://" + u.Host, core: core, sessions: newSessions(o.MaxSessions),
		logins: newLogins(o.MaxLogins), stepUp: stepUp, static: http.StripPrefix("/static/", http.FileServerFS(static)), landing: landing}, nil
}

// defaults fills o's zero values and reads its step-up classes.
func (o *Options) defaults() (map[string]bool, error) {
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = DefaultSessionLifetime
	}
	if o.StepUpMaxAge <= 0 {
		o.StepUpMaxAge = DefaultStepUpMaxAge
	}
	if o.StepUpClasses == nil {
		o.StepUpClasses = DefaultStepUpClasses
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxLogins <= 0 {
		o.MaxLogins = DefaultMaxLogins
	}
	if o.LoginTimeout <= 0 {
		o.LoginTimeout = DefaultLoginTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.IssuerClient == nil {
		o.IssuerClient = http.DefaultClient
	}
	stepUp, err := parseClasses(o.StepUpClasses)
	if err != nil {
		return nil, fmt.Errorf("step-up classes: %w", err)
	}
	return stepUp, nil
}

// Requests is the number of HTTP requests the service has answered (the browser test counts
// the requests of one resolution with it).
func (s *Service) Requests() int64 { return s.requests.Load() }

// Sessions is the number of sessions held.
func (s *Service) Sessions() int { return s.sessions.count() }

// Ready reports whether the provider's discovery document has been read (fetching it if not).
func (s *Service) Ready(ctx context.Context) error {
	_, err := s.oidcProvider(ctx)
	return err
}

func (s *Service) oidcProvider(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.o.IssuerClient), s.o.Timeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, s.o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OpenID provider %s: %w", s.o.Issuer, err)
	}
	s.provider = p
	return p, nil
}

func (s *Service) oauth2Config(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: s.o.ClientID, ClientSecret: s.o.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.origin + pathCallback, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	console.SecurityHeaders(w.Header())
	switch r.URL.Path {
	case pathHealthz:
		_, _ = w.Write([]byte("ok\n"))
		return
	case pathReadyz:
		if err := s.Ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	if !strings.EqualFold(r.Host, s.external.Host) {
		// DNS rebinding, or a name the service is not published under.
		http.Error(w, "the approval service answers at "+s.origin+" only", http.StatusMisdirectedRequest)
		return
	}
	switch {
	case r.URL.Path == pathScript && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.static.ServeHTTP(w, r)
	case strings.HasPrefix(r.URL.Path, console.StaticPath) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.core.Static().ServeHTTP(w, r)
	case r.URL.Path == pathRoot:
		s.page(w, r)
	case r.URL.Path == pathLogin:
		s.login(w, r)
	case r.URL.Path == pathCallback:
		s.callback(w, r)
	case r.URL.Path == pathResolve:
		s.post(w, r, s.resolve)
	case r.URL.Path == pathSignOut:
		s.post(w, r, s.signOut)
	default:
		http.NotFound(w, r)
	}
}

// session returns the request's live session, or nil.
func (s *Service) session(r *http.Request) *session {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	return s.sessions.get(c.Value, s.o.Now())
}

// door is the console Door of a session: its backend, its anti-CSRF token, and the step-up
// check before a resolution.
func (s *Service) door(sess *session) *console.Door {
	return &console.Door{
		Backend:   sess.backend,
		Principal: sess.username, Surface: s.o.Surface,
		CSRFToken: sess.csrf, CheckCSRF: sess.checkCSRF, SignOut: true,
		Footer: "actgate approval service · signed in with " + s.o.Issuer + " · every resolution is written with your own sign-in " +
			"and names the envelope digest shown (envelope-04 §7.3)",
		BeforeResolve: func(w http.ResponseWriter, r *http.Request, m console.Moment) bool { return s.fresh(w, r, sess, m) },
	}
}

// fresh is the step-up check: a moment of a step-up class (or of a class that cannot be read)
// is resolved only with an authentication no older than StepUpMaxAge; otherwise the person is
// sent to sign in again with max_age, coming back to the moment.
func (s *Service) fresh(w http.ResponseWriter, r *http.Request, sess *session, m console.Moment) bool {
	if !s.stepUp[m.Act.Class] && m.Act.Class != "" {
		return true
	}
	if !sess.authTime.IsZero() && s.o.Now().Sub(sess.authTime) <= s.o.StepUpMaxAge {
		return true
	}
	s.o.Log.Info("Step-up: a fresh sign-in is needed", "moment", m.ID, "class", m.Act.Class, "user", sess.username)
	q := url.Values{queryMoment: {m.ID}, queryStepUp: {"1"}}
	http.Redirect(w, r, pathLogin+"?"+q.Encode(), http.StatusSeeOther)
	return false
}

// page answers GET /: the moments of the signed-in person, or the landing page that sends the
// browser to sign in, keeping the deep link's moment.
func (s *Service) page(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if sess := s.session(r); sess != nil {
		s.core.Page(w, r, s.door(sess))
		return
	}
	s.notice(w, http.StatusOK, "landing", "Sign in to see the binding moments addressed to you.", "Sign in", pathLogin)
}

// post runs h for a POST of a signed-in person from the service's own page: Origin (and
// Sec-Fetch-Site when sent) must be the service's; h checks the anti-CSRF token.
func (s *Service) post(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request, *session)) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := s.sameOrigin(r); err != nil {
		http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
		return
	}
	sess := s.session(r)
	if sess == nil {
		s.notice(w, http.StatusUnauthorized, "signed-out", "You are not signed in (or your session ended): nothing was written.", "Sign in", pathLogin)
		return
	}
	h(w, r, sess)
}

// sameOrigin requires an Origin header naming the service's external URL; browsers send one
// on every POST.
func (s *Service) sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	switch {
	case origin == "":
		return errors.New("a POST without an Origin header")
	case origin != s.origin:
		return fmt.Errorf("a POST from another origin than %s", s.origin)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return errors.New("a POST from another site")
	}
	return nil
}

func (s *Service) resolve(w http.ResponseWriter, r *http.Request, sess *session) {
	s.core.Resolve(w, r, s.door(sess))
}

// signOut ends the session on the server: its cookie names nothing afterwards, even if it was
// copied.
func (s *Service) signOut(w http.ResponseWriter, r *http.Request, sess *session) {
	if !console.ReadForm(w, r) {
		return
	}
	if !sess.checkCSRF(r.PostForm.Get("token")) {
		http.Error(w, "refused: the form does not carry this page's token (reload the page)", http.StatusForbidden)
		return
	}
	s.sessions.remove(sess.id)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	s.o.Log.Info("Signed out", "user", sess.username)
	s.notice(w, http.StatusOK, "signed-out", "You are signed out of the approval service.", "Sign in again", pathLogin)
}

// login answers GET /login[?moment=NAMESPACE/NAME][&stepup=1]: it records a pending login
// (state, nonce, PKCE verifier, the moment to come back to) and sends the browser to the
// provider. A step-up asks for max_age.
func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	p := &pending{expires: s.o.Now().Add(s.o.LoginTimeout)}
	if m := q.Get(queryMoment); m != "" {
		if _, _, err := parseMomentRef(m); err != nil {
			http.Error(w, "refused: the link's moment is not NAMESPACE/NAME or NAME", http.StatusBadRequest)
			return
		}
		p.moment = m
	}
	if q.Get(queryStepUp) == "1" {
		p.maxAge = s.o.StepUpMaxAge
	}
	prov, err := s.oidcProvider(r.Context())
	if err != nil {
		s.o.Log.Error(err, "OpenID provider unavailable")
		s.notice(w, http.StatusServiceUnavailable, "error", "The sign-in provider cannot be reached; try again shortly.", "", "")
		return
	}
	if err := s.logins.add(p, s.o.Now()); err != nil {
		s.notice(w, http.StatusServiceUnavailable, "error", err.Error(), "", "")
		return
	}
	opts := []oauth2.AuthCodeOption{oidc.Nonce(p.nonce), oauth2.S256ChallengeOption(p.verifier)}
	if p.maxAge > 0 {
		opts = append(opts, oauth2.SetAuthURLParam("max_age", strconv.Itoa(int(p.maxAge/time.Second))))
	}
	http.SetCookie(w, &http.Cookie{Name: LoginCookie, Value: p.state, Path: "/", MaxAge: int(s.o.LoginTimeout / time.Second),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, s.oauth2Config(prov).AuthCodeURL(p.state, opts...), http.StatusSeeOther)
}

// idClaims are the ID token's claims the service reads besides iss, sub, aud, exp and nonce.
type idClaims struct {
	Email    string       `json:"email"`
	AuthTime *json.Number `json:"auth_time"`
}

// callback answers the provider's redirect: the state must be a pending login's and the
// login cookie's, the code is exchanged with the PKCE verifier, the ID token verified
// (signature, issuer, audience, expiry, nonce, and auth_time against a step-up's max_age),
// and the API server asked who the token's bearer is. A session is then made and the old one,
// if any, ended.
func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	c, err := r.Cookie(LoginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		s.notice(w, http.StatusBadRequest, "error", "This sign-in was not started in this browser (or it took too long): start again.", "Sign in", pathLogin)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: LoginCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	p := s.logins.take(state, s.o.Now())
	if p == nil {
		s.notice(w, http.StatusBadRequest, "error", "This sign-in is unknown or expired: start again.", "Sign in", pathLogin)
		return
	}
	if e := q.Get("error"); e != "" {
		s.notice(w, http.StatusUnauthorized, "error", "The sign-in provider refused the sign-in.", "Sign in", pathLogin)
		return
	}
	sess, err := s.exchange(r.Context(), p, q.Get("code"))
	if err != nil {
		s.o.Log.Info("Sign-in refused", "reason", err.Error())
		s.notice(w, http.StatusUnauthorized, "error", "The sign-in could not be completed: "+err.Error(), "Sign in", pathLogin)
		return
	}
	if err := s.sessions.add(sess, s.o.Now()); err != nil {
		s.notice(w, http.StatusServiceUnavailable, "error", err.Error(), "", "")
		return
	}
	if old := s.session(r); old != nil {
		s.sessions.remove(old.id)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sess.id, Path: "/", MaxAge: int(sess.expires.Sub(s.o.Now()) / time.Second),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	s.o.Log.Info("Signed in", "user", sess.username, "issuer", sess.issuer, "stepUp", p.maxAge > 0)
	// A page, not a redirect: the session cookie is SameSite=Strict, and a browser does not
	// send it on a redirect chain that began at the provider's site. The page's own navigation
	// (meta refresh) is same-site.
	s.notice(w, http.StatusOK, "signed-in", "Signed in as "+sess.username+".", "Continue", "/"+momentFragment(p.moment))
}

// exchange redeems code and builds the session of the ID token it yields.
func (s *Service) exchange(ctx context.Context, p *pending, code string) (*session, error) {
	if code == "" || len(code) > 4096 {
		return nil, errors.New("no authorization code")
	}
	prov, err := s.oidcProvider(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.o.IssuerClient), s.o.Timeout)
	defer cancel()
	tok, err := s.oauth2Config(prov).Exchange(ctx, code, oauth2.VerifierOption(p.verifier))
	if err != nil {
		return nil, errors.New("the provider did not redeem the code")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the provider returned no ID token")
	}
	idt, err := prov.Verifier(&oidc.Config{ClientID: s.o.ClientID}).Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("the ID token does not verify: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.nonce)) != 1 {
		return nil, errors.New("the ID token's nonce is not this sign-in's")
	}
	var cl idClaims
	var all map[string]any
	if err := idt.Claims(&cl); err != nil {
		return nil, fmt.Errorf("the ID token's claims: %w", err)
	}
	if err := idt.Claims(&all); err != nil {
		return nil, fmt.Errorf("the ID token's claims: %w", err)
	}
	authTime, err := authTimeOf(cl.AuthTime)
	if err != nil {
		return nil, err
	}
	now := s.o.Now()
	if p.maxAge > 0 && (authTime.IsZero() || now.Sub(authTime) > p.maxAge) {
		return nil, errors.New("the provider did not authenticate you afresh (auth_time is missing or older than max_age)")
	}
	user, b, err := s.o.Backends.For(ctx, SignIn{IDToken: raw, Issuer: idt.Issuer, Subject: idt.Subject, AuthTime: authTime, Claims: all})
	if err != nil {
		return nil, err
	}
	expires := now.Add(s.o.SessionLifetime)
	if idt.Expiry.Before(expires) {
		expires = idt.Expiry
	}
	if !now.Before(expires) {
		return nil, errors.New("the ID token has already expired")
	}
	return &session{idToken: raw, username: user, issuer: idt.Issuer, subject: idt.Subject, authTime: authTime, expires: expires, backend: b}, nil
}

// authTimeOf reads auth_time (seconds since the epoch; absent: zero).
func authTimeOf(n *json.Number) (time.Time, error) {
	if n == nil {
		return time.Time{}, nil
	}
	f, err := n.Float64()
	if err != nil || !(f > 0 && f <= 1e11) { // NaN fails both comparisons
		return time.Time{}, errors.New("the ID token's auth_time is not a time")
	}
	return time.Unix(int64(f), 0), nil
}
