package idp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// SubjectIssuer is an issuer whose JWTs the provider accepts as token exchange subject tokens
// (RFC 8693 §2.1): a Kubernetes API server's service-account issuer, for instance. A subject
// token must be signed by one of Keys, name Issuer as iss and Audience among its aud, and be
// unexpired.
type SubjectIssuer struct {
	Issuer   string
	Audience string
	Keys     jose.JSONWebKeySet
}

// Bounds of the token endpoint: the request body, the assertion ids remembered for replay
// detection, and how far in the future an assertion may expire.
const (
	maxTokenRequest      = 64 << 10
	maxAssertionIDs      = 10000
	maxAssertionLifetime = 10 * time.Minute
)

// assertedClient is the context key of the client a private_key_jwt assertion authenticated.
type assertedClient struct{}

// TokenRequests is how many requests reached the token endpoint.
func (p *Provider) TokenRequests() int { return int(p.tokenRequests.Load()) }

// TokenURL is the token endpoint.
func (p *Provider) TokenURL() string { return p.issuer + "/oauth/token" }

// tokenEndpoint counts token requests and authenticates private_key_jwt clients (RFC 7523 §2.2,
// §3) before the OP sees the request, which it then sees as the client's own request with the
// client authenticated (storage.AuthorizeClientIDSecret). The OP's client credentials and token
// exchange grants know client secrets only.
func (p *Provider) tokenEndpoint(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.tokenRequests.Add(1)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenRequest))
		if err != nil {
			tokenError(w, http.StatusBadRequest, "invalid_request", "the request body is unreadable or too large")
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			tokenError(w, http.StatusBadRequest, "invalid_request", "the request body is not a form")
			return
		}
		if !form.Has("client_assertion") && !form.Has("client_assertion_type") {
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			next.ServeHTTP(w, r)
			return
		}
		if _, _, ok := r.BasicAuth(); ok || form.Has("client_secret") {
			tokenError(w, http.StatusBadRequest, "invalid_request", "a client authenticates by one method only")
			return
		}
		id, err := p.storage.verifyAssertion(form, []string{p.TokenURL(), p.issuer})
		if err != nil {
			tokenError(w, http.StatusUnauthorized, "invalid_client", err.Error())
			return
		}
		form.Del("client_assertion")
		form.Del("client_assertion_type")
		form.Set("client_id", id)
		enc := form.Encode()
		r = r.Clone(context.WithValue(r.Context(), assertedClient{}, id))
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(enc)), int64(len(enc))
		r.Header.Set("Content-Length", strconv.Itoa(len(enc)))
		// The OP's token exchange reads the client id from Basic authentication only; the
		// empty secret is accepted for the asserted client alone (AuthorizeClientIDSecret).
		r.SetBasicAuth(url.QueryEscape(id), "")
		next.ServeHTTP(w, r)
	})
}

func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

var assertionAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.EdDSA}

// verifyAssertion checks a private_key_jwt client assertion and returns the client it
// authenticates: signed by the client's registered key, iss = sub = the client id (and
// client_id, when sent), aud naming the token endpoint or the issuer, exp set and not more
// than maxAssertionLifetime ahead, not before nbf, and a jti not seen before.
func (s *storage) verifyAssertion(form url.Values, audiences []string) (string, error) {
	if form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return "", errors.New("client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
	}
	tok, err := jwt.ParseSigned(form.Get("client_assertion"), assertionAlgs)
	if err != nil {
		return "", fmt.Errorf("the client assertion is not a signed JWT: %w", err)
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return "", errors.New("the client assertion's claims are unreadable")
	}
	s.mu.Lock()
	c, ok := s.clients[unverified.Issuer]
	s.mu.Unlock()
	if !ok || c.PublicKey == nil {
		return "", errors.New("no client with a registered key is the assertion's issuer")
	}
	var cl jwt.Claims
	if err := tok.Claims(c.PublicKey, &cl); err != nil {
		return "", errors.New("the client assertion's signature does not verify with the client's key")
	}
	now := s.now()
	if err := cl.ValidateWithLeeway(jwt.Expected{Issuer: c.ID, Subject: c.ID, AnyAudience: audiences, Time: now}, 0); err != nil {
		return "", fmt.Errorf("the client assertion is not valid: %w", err)
	}
	if id := form.Get("client_id"); id != "" && id != c.ID {
		return "", errors.New("client_id is not the assertion's issuer")
	}
	if cl.Expiry == nil || cl.Expiry.Time().After(now.Add(maxAssertionLifetime)) {
		return "", errors.New("the client assertion must expire within ten minutes")
	}
	if cl.ID == "" {
		return "", errors.New("the client assertion has no jti")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, exp := range s.jtis {
		if now.After(exp) {
			delete(s.jtis, j)
		}
	}
	key := c.ID + "\x00" + cl.ID
	if _, seen := s.jtis[key]; seen {
		return "", errors.New("the client assertion was used before (jti replayed)")
	}
	if len(s.jtis) >= maxAssertionIDs {
		return "", errors.New("too many client assertions in flight")
	}
	s.jtis[key] = cl.Expiry.Time()
	return c.ID, nil
}

// ValidateTokenExchangeRequest admits a token exchange (RFC 8693 §2.1) of a client allowed
// to exchange: an access token is the only token issued, every audience and resource must be
// among the client's Audience (at least one audience named), and every scope among its Scopes.
func (s *storage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	s.mu.Lock()
	c, ok := s.clients[r.GetClientID()]
	s.mu.Unlock()
	if !ok || !c.TokenExchange {
		return oidc.ErrUnauthorizedClient().WithDescription("the client may not exchange tokens")
	}
	switch r.GetRequestedTokenType() {
	case "":
		r.SetRequestedTokenType(oidc.AccessTokenType)
	case oidc.AccessTokenType:
	default:
		return oidc.ErrInvalidRequest().WithDescription("only access tokens are issued")
	}
	if len(r.GetAudience()) == 0 {
		return oidc.ErrInvalidTarget().WithDescription("name the audience")
	}
	for _, a := range slices.Concat(r.GetAudience(), r.GetResourses()) {
		if !slices.Contains(c.Audience, a) {
			return oidc.ErrInvalidTarget().WithDescription("the client may not get tokens for %s", a)
		}
	}
	for _, sc := range r.GetScopes() {
		if !slices.Contains(c.Scopes, sc) {
			return oidc.ErrInvalidScope().WithDescription("the client may not ask for scope %s", sc)
		}
	}
	return nil
}

func (s *storage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest puts the granted scopes into the access token and,
// for a delegation (an actor token, RFC 8693 §1.1), the actor's subject as act.sub (§4.1).
func (s *storage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) (map[string]any, error) {
	claims := map[string]any{}
	if len(r.GetScopes()) > 0 {
		claims["scope"] = strings.Join(r.GetScopes(), " ")
	}
	if a := r.GetExchangeActor(); a != "" {
		claims["act"] = map[string]any{"sub": a}
	}
	if len(claims) == 0 {
		return nil, nil
	}
	return claims, nil
}

func (s *storage) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return errors.New("idp: ID tokens are not issued by token exchange")
}

// VerifyExchangeSubjectToken verifies a subject token of one of the SubjectIssuers.
func (s *storage) VerifyExchangeSubjectToken(_ context.Context, token string, _ oidc.TokenType) (string, string, map[string]any, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return "", "", nil, err
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return "", "", nil, err
	}
	for _, si := range s.subjectIssuers {
		if subtle.ConstantTimeCompare([]byte(si.Issuer), []byte(unverified.Issuer)) != 1 {
			continue
		}
		var cl jwt.Claims
		claims := map[string]any{}
		if err := tok.Claims(&si.Keys, &cl, &claims); err != nil {
			return "", "", nil, err
		}
		if err := cl.ValidateWithLeeway(jwt.Expected{Issuer: si.Issuer, AnyAudience: []string{si.Audience}, Time: s.now()}, 0); err != nil {
			return "", "", nil, err
		}
		if cl.Expiry == nil || cl.Subject == "" {
			return "", "", nil, errors.New("idp: the subject token needs exp and sub")
		}
		return token, cl.Subject, claims, nil
	}
	return "", "", nil, errors.New("idp: the subject token's issuer is not trusted")
}

func (s *storage) VerifyExchangeActorToken(context.Context, string, oidc.TokenType) (string, string, map[string]any, error) {
	return "", "", nil, errors.New("idp: actor tokens are not accepted")
}

// IntrospectionURL is the provider's token introspection endpoint (RFC 7662).
func (p *Provider) IntrospectionURL() string { return p.issuer + "/oauth/introspect" }
