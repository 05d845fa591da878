package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Bounds on what a client of the fixture can grow: pending authorization requests, issued
// access tokens and provider sessions. At a bound the provider answers with an error.
const (
	maxAuthRequests = 1000
	maxAccessTokens = 10000
	maxSessions     = 1000

	authRequestLifetime = 10 * time.Minute
	accessTokenLifetime = 5 * time.Minute
	idTokenLifetime     = 10 * time.Minute
	sessionLifetime     = time.Hour
)

var errNotFound = errors.New("idp: not found")

// authRequest is one authorization request from its /authorize call to its code exchange.
type authRequest struct {
	id            string
	clientID      string
	redirectURI   string
	state         string
	nonce         string
	scopes        []string
	responseType  oidc.ResponseType
	responseMode  oidc.ResponseMode
	codeChallenge *oidc.CodeChallenge
	maxAge        *uint
	prompt        []string
	created       time.Time

	// Set by the login page once the person authenticated.
	subject  string
	authTime time.Time
	done     bool
	code     string
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.codeChallenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// client is a registered relying party: a confidential web client when it has a secret, a
// public one (PKCE only) otherwise.
type client struct{ c Client }

func (c *client) GetID() string                       { return c.c.ID }
func (c *client) RedirectURIs() []string              { return slices.Clone(c.c.RedirectURIs) }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod {
	if c.c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	if len(c.c.Audience) > 0 {
		g := []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeClientCredentials}
		if c.c.TokenExchange {
			g = append(g, oidc.GrantTypeTokenExchange)
		}
		return g
	}
	return []oidc.GrantType{oidc.GrantTypeCode}
}
func (c *client) LoginURL(string) string { return "" } // replaced by Provider's login URL
func (c *client) AccessTokenType() op.AccessTokenType {
	if len(c.c.Audience) > 0 && !c.c.OpaqueAccessTokens {
		return op.AccessTokenTypeJWT // machine clients: JWT access tokens for their resource
	}
	return op.AccessTokenTypeBearer
}
func (c *client) IDTokenLifetime() time.Duration { return idTokenLifetime }

// DevMode lets a registered http:// redirect URI (a test's loopback relying party) through; the
// redirect URI is still matched exactly against the registered ones.
func (c *client) DevMode() bool { return true }

//nolint:revive // the name is zitadel op.Client's
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool { return scope == "groups" }

// IDTokenUserinfoClaimsAssertion puts email, name and groups into the ID token even when an
// access token is issued alongside (the kube-apiserver maps them from the ID token).
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }

// loginClient wraps client so that LoginURL points at the provider's login page.
type loginClient struct {
	*client
	loginURL func(id string) string
}

func (c *loginClient) LoginURL(id string) string { return c.loginURL(id) }

type accessToken struct {
	subject, clientID string
	expires, issued   time.Time
	audience, scopes  []string
}

type session struct {
	login    string
	authTime time.Time
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

// storage is the provider's in-memory op.Storage: users and clients from Options, pending
// authorization requests, access tokens and login sessions.
type storage struct {
	mu       sync.Mutex
	issuer   string          // the provider's issuer URL, for introspection answers
	users    map[string]User // by login
	clients  map[string]Client
	requests map[string]*authRequest
	codes    map[string]string // code → request id
	tokens   map[string]accessToken
	sessions map[string]session
	key      *signingKey
	prev     *signingKey // the previous key, still published during a rotation
	loginURL func(id string) string
	now      func() time.Time

	subjectIssuers []SubjectIssuer
	jtis           map[string]time.Time // private_key_jwt assertion ids seen, until their exp
}

func newStorage(o Options) (*storage, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	s := &storage{
		users: map[string]User{}, clients: map[string]Client{}, requests: map[string]*authRequest{},
		codes: map[string]string{}, tokens: map[string]accessToken{}, sessions: map[string]session{},
		key: &signingKey{id: randomID(), key: k}, now: time.Now,
		subjectIssuers: slices.Clone(o.SubjectIssuers), jtis: map[string]time.Time{},
	}
	for _, u := range o.Users {
		if u.Login == "" {
			return nil, errors.New("idp: a user needs a login")
		}
		s.users[u.Login] = u
	}
	for _, c := range o.Clients {
		if c.ID == "" {
			return nil, errors.New("idp: a client needs an id")
		}
		s.clients[c.ID] = c
	}
	return s, nil
}

// subjectOf is the stable subject (sub) of a user: not the login, so that tests can tell them
// apart.
func subjectOf(login string) string { return "sub-" + login }

func (s *storage) userBySubject(sub string) (User, bool) {
	for _, u := range s.users {
		if subjectOf(u.Login) == sub {
			return u, true
		}
	}
	return User{}, false
}

func randomID() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// expire drops what has outlived its lifetime; the caller holds s.mu.
func (s *storage) expire() {
	now := s.now()
	for id, r := range s.requests {
		if now.Sub(r.created) > authRequestLifetime {
			delete(s.requests, id)
			if r.code != "" {
				delete(s.codes, r.code)
			}
		}
	}
	for id, t := range s.tokens {
		if now.After(t.expires) {
			delete(s.tokens, id)
		}
	}
	for id, ss := range s.sessions {
		if now.Sub(ss.authTime) > sessionLifetime {
			delete(s.sessions, id)
		}
	}
}

// CreateAuthRequest stores a validated authorization request. It is an OpenID provider only
// (the openid scope is required), and PKCE with S256 is required of every client
// (confidential ones too).
func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if !slices.Contains(r.Scopes, oidc.ScopeOpenID) {
		return nil, oidc.ErrInvalidScope().WithDescription("the openid scope is required")
	}
	if r.CodeChallenge == "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE is required: code_challenge is missing")
	}
	if r.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE is required with code_challenge_method S256")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if len(s.requests) >= maxAuthRequests {
		return nil, oidc.ErrServerError().WithDescription("too many pending authorization requests")
	}
	a := &authRequest{
		id: randomID(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State, nonce: r.Nonce,
		scopes: slices.Clone(r.Scopes), responseType: r.ResponseType, responseMode: r.ResponseMode,
		codeChallenge: &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod},
		prompt:        slices.Clone(r.Prompt), created: s.now(),
	}
	if r.MaxAge != nil {
		m := *r.MaxAge
		a.maxAge = &m
	}
	s.requests[a.id] = a
	c := *a
	return &c, nil
}

// AuthRequestByID returns a copy of the request (the caller must not see later changes).
func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return nil, errNotFound
	}
	c := *r
	return &c, nil
}

// AuthRequestByCode looks the code up once: a code is spent by its first exchange, right or
// wrong.
func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.codes[code]
	if !ok {
		return nil, errNotFound
	}
	delete(s.codes, code)
	r, ok := s.requests[id]
	if !ok || !r.done {
		return nil, errNotFound
	}
	c := *r
	return &c, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return errNotFound
	}
	if r.code != "" {
		delete(s.codes, r.code)
	}
	r.code = code
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok && r.code != "" {
		delete(s.codes, r.code)
	}
	delete(s.requests, id)
	return nil
}

// complete marks request id as authenticated by login at authTime.
func (s *storage) complete(id, login string, authTime time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return errNotFound
	}
	r.subject, r.authTime, r.done = subjectOf(login), authTime, true
	return nil
}

func (s *storage) request(id string) (authRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return authRequest{}, false
	}
	return *r, true
}

// checkPassword reports whether login and password name a user (constant-time on the password).
func (s *storage) checkPassword(login, password string) bool {
	s.mu.Lock()
	u, ok := s.users[login]
	s.mu.Unlock()
	return ok && subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) == 1
}

func (s *storage) newSession(login string, authTime time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if len(s.sessions) >= maxSessions {
		return "", errors.New("too many sign-in sessions at the provider")
	}
	id := randomID()
	s.sessions[id] = session{login: login, authTime: authTime}
	return id, nil
}

func (s *storage) session(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if ok && s.now().Sub(ss.authTime) > sessionLifetime {
		return session{}, false
	}
	return ss, ok
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if len(s.tokens) >= maxAccessTokens {
		return "", time.Time{}, errors.New("too many access tokens")
	}
	var clientID string
	lifetime := accessTokenLifetime
	switch a := r.(type) {
	case op.AuthRequest:
		clientID = a.GetClientID()
	case *ccRequest:
		clientID, lifetime = a.clientID, a.lifetimeOr()
	case op.TokenExchangeRequest:
		clientID = a.GetClientID()
		if c, ok := s.clients[clientID]; ok && c.AccessTokenLifetime > 0 {
			lifetime = c.AccessTokenLifetime
		}
	}
	id, exp := randomID(), s.now().Add(lifetime)
	s.tokens[id] = accessToken{subject: r.GetSubject(), clientID: clientID, expires: exp, issued: s.now(),
		audience: slices.Clone(r.GetAudience()), scopes: slices.Clone(r.GetScopes())}
	return id, exp, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("refresh tokens are not issued")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

// TerminateSession ends every provider session of the user.
func (s *storage) TerminateSession(_ context.Context, userID, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ss := range s.sessions {
		if subjectOf(ss.login) == userID {
			delete(s.sessions, id)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenOrID, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tokenOrID)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return s.signingKey(), nil }

func (s *storage) signingKey() *signingKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// rotate makes a new key current, keeping the old one published when keepOld.
func (s *storage) rotate(keepOld bool) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prev = nil
	if keepOld {
		s.prev = s.key
	}
	s.key = &signingKey{id: randomID(), key: k}
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := []op.Key{publicKey{s.key}}
	if s.prev != nil {
		keys = append(keys, publicKey{s.prev})
	}
	return keys, nil
}

// ccRequest is a client credentials token request: the client is its own subject.
type ccRequest struct {
	clientID string
	audience []string
	scopes   []string
	lifetime time.Duration
}

func (r *ccRequest) GetSubject() string    { return r.clientID }
func (r *ccRequest) GetAudience() []string { return r.audience }
func (r *ccRequest) GetScopes() []string   { return r.scopes }
func (r *ccRequest) GetClientID() string   { return r.clientID }
func (r *ccRequest) lifetimeOr() time.Duration {
	if r.lifetime > 0 {
		return r.lifetime
	}
	return accessTokenLifetime
}

// ClientCredentials authorizes a machine client (one with an Audience) by its secret.
func (s *storage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c := s.clients[id]
	s.mu.Unlock()
	if len(c.Audience) == 0 {
		return nil, errors.New("idp: the client is not a machine client")
	}
	return &client{c: c}, nil
}

// ClientCredentialsTokenRequest grants the requested scopes the client may have.
func (s *storage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	s.mu.Lock()
	c, ok := s.clients[id]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	for _, sc := range scopes {
		if !slices.Contains(c.Scopes, sc) {
			return nil, oidc.ErrInvalidScope().WithDescription("the client may not ask for scope %s", sc)
		}
	}
	return &ccRequest{clientID: id, audience: slices.Clone(c.Audience), scopes: slices.Clone(scopes), lifetime: c.AccessTokenLifetime}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	c, ok := s.clients[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("idp: unknown client %q", id)
	}
	return &loginClient{client: &client{c: c}, loginURL: s.loginURL}, nil
}

func (s *storage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	s.mu.Lock()
	c, ok := s.clients[id]
	s.mu.Unlock()
	if asserted, _ := ctx.Value(assertedClient{}).(string); ok && asserted != "" && secret == "" {
		if asserted != id {
			return errors.New("idp: the client assertion names another client")
		}
		return nil // authenticated by its private_key_jwt assertion (exchange.go)
	}
	if !ok || c.Secret == "" || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1 {
		return errors.New("idp: wrong client id or secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest puts the user's email, name and groups into the ID token.
func (s *storage) SetUserinfoFromRequest(_ context.Context, ui *oidc.UserInfo, r op.IDTokenRequest, _ []string) error {
	return s.fillUserinfo(ui, r.GetSubject())
}

func (s *storage) SetUserinfoFromToken(_ context.Context, ui *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || t.subject != subject || s.now().After(t.expires) {
		return errors.New("idp: access token unknown or expired")
	}
	return s.fillUserinfo(ui, subject)
}

func (s *storage) fillUserinfo(ui *oidc.UserInfo, subject string) error {
	s.mu.Lock()
	u, ok := s.userBySubject(subject)
	s.mu.Unlock()
	if !ok {
		return errNotFound
	}
	ui.Subject = subject
	ui.Email = u.Email
	ui.EmailVerified = oidc.Bool(true)
	ui.Name = u.Name
	ui.PreferredUsername = u.Login
	ui.AppendClaims("groups", slices.Clone(u.Groups))
	return nil
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, ir *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || t.subject != subject || s.now().After(t.expires) {
		return errors.New("idp: access token unknown or expired")
	}
	ir.Active, ir.Subject, ir.ClientID = true, subject, t.clientID
	ir.Audience = []string{t.clientID}
	if s.opaque(t.clientID) {
		// A machine client's opaque token (Client.OpaqueAccessTokens): what its JWT would say
		// (RFC 7662 §2.2).
		ir.Audience = slices.Clone(t.audience)
		ir.Expiration, ir.IssuedAt, ir.Issuer, ir.Scope = oidc.FromTime(t.expires), oidc.FromTime(t.issued), s.issuer, t.scopes
		ir.TokenType = "Bearer"
	}
	_ = clientID
	return nil
}

// GetPrivateClaimsFromScopes puts the granted scopes into a JWT access token (RFC 9068 §2.2.3).
func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	return map[string]any{"scope": strings.Join(scopes, " ")}, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("idp: JWT profile client keys are not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("idp: JWT profile grant is not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// opaque reports whether client id is a machine client with opaque access tokens.
func (s *storage) opaque(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	return ok && c.OpaqueAccessTokens && len(c.Audience) > 0
}
