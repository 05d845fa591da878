// Package agentoauth makes the standalone gate an OAuth 2.1 protected resource for agents
// (MCP authorization, 2025-11-25 and 2026-07-28; docs/security.md "Agents behind the
// organisation's IdP"): it validates the JWT access tokens of the organisation's identity
// provider (issuer, audience = the gate's resource per RFC 8707, expiry, not-before, signature
// against the provider's JWKS with an allow-list of asymmetric algorithms, required scopes),
// names the agent by a configured claim, publishes RFC 9728 protected resource metadata, and
// answers a missing or bad token with the WWW-Authenticate challenge the MCP authorization
// specification requires. The agent's token is never passed on: the proxy presents its own
// upstream credential (internal/mcpproxy/upstream).
package agentoauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/actgate/actgate/internal/ef"
)

// MaxTokenBytes bounds an access token; a longer one is refused before it is parsed.
const MaxTokenBytes = 16 << 10

// maxAgentBytes bounds the agent identity a claim names.
const maxAgentBytes = 256

// Options configure New.
type Options struct {
	// Issuer is the provider's issuer URL; tokens carry it as iss exactly.
	Issuer string
	// ExternalURL is the gate's URL as agents reach it (no trailing slash).
	ExternalURL string
	// Audience is the aud every server accepts (default ExternalURL); a server also accepts
	// its own resource, ExternalURL + its path.
	Audience string
	// JWKSURL is the key set's URL; empty: discovered from the issuer's metadata.
	JWKSURL string
	// Algorithms are the accepted JWS algorithms (asymmetric only).
	Algorithms []string
	// AgentClaim names the agent (a string claim); AgentPrefix is put before its value.
	AgentClaim, AgentPrefix string
	// Scopes a token must all carry.
	Scopes []string
	// AudienceOnly accepts Audience alone, not the servers' own resources: a sidecar's
	// loopback URL is the same in every pod, so it names no resource of its own, and the
	// authority service, which verifies the same tokens, knows only the policy's audience.
	AudienceOnly bool
	// Reserved are identities no agent may take (the principals, the sink): an agent named
	// as a principal would resolve its own escalations.
	Reserved []string
	// ClockSkew is tolerated on exp, nbf and iat.
	ClockSkew time.Duration
	// JWKSRefresh is the least time between two fetches of the key set; JWKSMaxAge is how
	// long a fetched set is used before it is fetched again.
	JWKSRefresh, JWKSMaxAge time.Duration
	// Introspection, when set, verifies opaque access tokens (not a compact JWS) by RFC 7662
	// introspection at the provider; JWTs are verified as above either way.
	Introspection *Introspection
	// CAPEM, when set, is the only CA trusted for the provider's TLS.
	CAPEM []byte
	// Transport is the base transport to the provider (tests); nil: a default one.
	Transport http.RoundTripper
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Verifier validates agents' access tokens. It is safe for concurrent use.
type Verifier struct {
	o     Options
	algs  []jose.SignatureAlgorithm
	keys  *keySet
	intro *introspector // nil: opaque tokens are refused
	now   func() time.Time
}

// New returns a Verifier; it contacts the provider only when the first token arrives, so the
// gate starts while the provider is down (agents are refused until it answers).
func New(o Options) (*Verifier, error) {
	if o.Issuer == "" || o.ExternalURL == "" || o.AgentClaim == "" {
		return nil, errors.New("agentoauth: issuer, external URL and agent claim are required")
	}
	if o.Audience == "" {
		o.Audience = o.ExternalURL
	}
	v := &Verifier{o: o, now: o.Now}
	if v.now == nil {
		v.now = time.Now
	}
	for _, a := range o.Algorithms {
		alg := jose.SignatureAlgorithm(a)
		if a == "none" || strings.HasPrefix(a, "HS") || alg == "" {
			return nil, fmt.Errorf("agentoauth: algorithm %q is not accepted (asymmetric algorithms only)", a)
		}
		v.algs = append(v.algs, alg)
	}
	if len(v.algs) == 0 {
		return nil, errors.New("agentoauth: no algorithm accepted")
	}
	base := o.Transport
	if base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if len(o.CAPEM) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(o.CAPEM) {
				return nil, errors.New("agentoauth: the CA file holds no PEM certificate")
			}
			tr.TLSClientConfig.RootCAs = pool
		}
		base = tr
	}
	client := &http.Client{Transport: base, Timeout: fetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if o.Introspection != nil {
		var err error
		if v.intro, err = newIntrospector(*o.Introspection, client); err != nil {
			return nil, err
		}
	}
	v.keys = &keySet{issuer: o.Issuer, client: client, jwksURL: o.JWKSURL, now: v.now,
		minRefresh: max(o.JWKSRefresh, time.Second), maxAge: max(o.JWKSMaxAge, time.Second)}
	return v, nil
}

// Refusal is why a request was refused: its HTTP status (401 without or with a bad token, 403
// for a missing scope, 503 when the provider's keys are unavailable), its EF code, the OAuth
// error of the challenge (RFC 6750 §3.1: "" without a token, invalid_token,
// insufficient_scope) and a description that never repeats the token.
type Refusal struct {
	Status      int
	Code        ef.EFCode
	OAuthError  string
	Description string
	// Scope is the scope the challenge asks for (insufficient_scope).
	Scope string
}

func (r *Refusal) Error() string { return string(r.Code) + ": " + r.Description }

func invalid(format string, args ...any) *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Code: ef.EFAgentUnauthenticated, OAuthError: "invalid_token",
		Description: fmt.Sprintf(format, args...)}
}

// Verify validates token for the protected resource of server ("" for the gate as a whole)
// and returns the agent it names, or the Refusal.
func (v *Verifier) Verify(ctx context.Context, token, server string) (string, *Refusal) {
	if len(token) > MaxTokenBytes {
		return "", invalid("the token is longer than %d bytes", MaxTokenBytes)
	}
	if strings.Count(token, ".") != 2 {
		if v.intro != nil {
			return v.introspect(ctx, token, server)
		}
		return "", invalid("the token is not a signed JWT (compact JWS)")
	}
	tok, err := jwt.ParseSigned(token, v.algs)
	if err != nil {
		return "", invalid("the token is not a signed JWT with an accepted algorithm (%s)", strings.Join(v.o.Algorithms, ", "))
	}
	if len(tok.Headers) != 1 {
		return "", invalid("the token must carry one signature")
	}
	h := tok.Headers[0]
	key, err := v.keys.key(ctx, h.KeyID)
	switch {
	case errors.Is(err, ErrProviderUnavailable):
		return "", &Refusal{Status: http.StatusServiceUnavailable, Code: ef.EFAgentIDPUnavailable,
			Description: "the identity provider's keys cannot be fetched and none cached verifies this token; try again later"}
	case err != nil:
		return "", invalid("the token's key is not one of the issuer's current keys")
	}
	if key.Algorithm != "" && key.Algorithm != h.Algorithm {
		return "", invalid("the token's algorithm is not its key's")
	}
	var std jwt.Claims
	var claims map[string]json.RawMessage
	if err := tok.Claims(key.Key, &std, &claims); err != nil {
		return "", invalid("the token's signature does not verify")
	}
	if err := v.checkClaims(std, server); err != nil {
		return "", err
	}
	agent, rf := v.agent(claims)
	if rf != nil {
		return "", rf
	}
	if missing := v.missingScope(claims); missing != "" {
		return "", &Refusal{Status: http.StatusForbidden, Code: ef.EFAgentUnauthenticated, OAuthError: "insufficient_scope",
			Description: "the token lacks scope " + missing, Scope: strings.Join(v.o.Scopes, " ")}
	}
	return agent, nil
}

// checkClaims checks iss, aud, exp (required), nbf and iat.
func (v *Verifier) checkClaims(std jwt.Claims, server string) *Refusal {
	if std.Expiry == nil {
		return invalid("the token has no expiry (exp)")
	}
	if std.Issuer != v.o.Issuer {
		return invalid("the token's issuer is not %s", v.o.Issuer)
	}
	if !slices.ContainsFunc(v.Audiences(server), std.Audience.Contains) {
		if v.o.AudienceOnly {
			return invalid("the token's audience is not %s", v.o.Audience)
		}
		return invalid("the token's audience is not this gate (%s)", v.Resource(server))
	}
	err := std.ValidateWithLeeway(jwt.Expected{Time: v.now()}, v.o.ClockSkew)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return invalid("the token expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return invalid("the token is not valid yet (nbf)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return invalid("the token was issued in the future (iat)")
	case err != nil:
		return invalid("the token's claims are not valid")
	}
	return nil
}

// agent is the configured claim's value with the prefix: a non-empty string of printable
// characters, at most maxAgentBytes, and not a reserved identity.
func (v *Verifier) agent(claims map[string]json.RawMessage) (string, *Refusal) {
	raw, ok := claims[v.o.AgentClaim]
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil || s == "" {
		return "", invalid("the token has no string claim %s naming the agent", v.o.AgentClaim)
	}
	agent := v.o.AgentPrefix + s
	if len(agent) > maxAgentBytes || strings.ContainsFunc(agent, func(r rune) bool { return !unicode.IsPrint(r) || r == unicode.ReplacementChar }) {
		return "", invalid("the token's %s claim is not a usable agent name (printable, at most %d bytes)", v.o.AgentClaim, maxAgentBytes)
	}
	if slices.Contains(v.o.Reserved, agent) {
		return "", invalid("the token's %s claim names a principal or the sink, which cannot be an agent", v.o.AgentClaim)
	}
	return agent, nil
}

// missingScope is the first configured scope the token lacks (scope: space-separated, RFC
// 9068 §2.2.3; scp: a string or a list, as Entra ID and Okta issue), or "".
func (v *Verifier) missingScope(claims map[string]json.RawMessage) string {
	if len(v.o.Scopes) == 0 {
		return ""
	}
	var have []string
	for _, name := range []string{"scope", "scp"} {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		var s string
		var list []string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			have = append(have, strings.Fields(s)...)
		case json.Unmarshal(raw, &list) == nil:
			have = append(have, list...)
		}
	}
	for _, s := range v.o.Scopes {
		if !slices.Contains(have, s) {
			return s
		}
	}
	return ""
}

// Audiences are the aud values a token for server may carry: the configured audience, and
// the server's own resources (both of its paths).
func (v *Verifier) Audiences(server string) []string {
	if server == "" || v.o.AudienceOnly {
		return []string{v.o.Audience}
	}
	return []string{v.o.Audience, v.o.ExternalURL + "/mcp/" + server, v.o.ExternalURL + "/" + server + "/mcp"}
}

// Resource is the protected resource of server (RFC 9728 §2 resource): ExternalURL/mcp/SERVER,
// or the configured audience for the gate as a whole.
func (v *Verifier) Resource(server string) string {
	if server == "" {
		return v.o.Audience
	}
	return v.o.ExternalURL + "/mcp/" + server
}
