package agentoauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/ef"
)

// Bounds of token introspection (RFC 7662).
const (
	// DefaultIntrospectionCache is the most introspected tokens remembered at once.
	DefaultIntrospectionCache = 4096
	// DefaultIntrospectionTTL is the longest an introspection answer is used: a token the
	// provider revoked stops working within it. Never past the token's exp.
	DefaultIntrospectionTTL = 2 * time.Minute
	// maxIntrospectionBytes bounds the provider's answer.
	maxIntrospectionBytes = 64 << 10
)

// Introspection configures RFC 7662 token introspection for opaque access tokens (tokens that
// are not a compact JWS): the gate asks the provider whether the token is active and what it
// names, authenticated as a client of the provider (client_secret_basic).
type Introspection struct {
	// URL is the provider's introspection endpoint (https).
	URL string
	// ClientID and ClientSecret authenticate the gate to the endpoint; ClientSecret is read
	// for every request, so a rotated secret file needs no restart.
	ClientID     string
	ClientSecret func() (string, error)
	// MaxCached bounds the remembered answers (default DefaultIntrospectionCache); TTL is the
	// longest one is used (default DefaultIntrospectionTTL).
	MaxCached int
	TTL       time.Duration
}

// introspector asks the provider and remembers active answers, keyed by the token's SHA-256
// (the token itself is not kept), until the earlier of exp and TTL.
type introspector struct {
	cfg    Introspection
	client *http.Client

	mu    sync.Mutex
	cache map[[32]byte]introspected
}

type introspected struct {
	agent string
	until time.Time
}

// IntrospectionAnswer is the part of an RFC 7662 §2.2 answer the gate uses, as parsed by
// ParseIntrospection.
type IntrospectionAnswer struct {
	Active bool
	Issuer string
	// Audience is aud: a string or a list of strings.
	Audience []string
	Expiry   time.Time
	// NotBefore and IssuedAt are zero when absent.
	NotBefore, IssuedAt time.Time
	// Claims are every member, for the agent claim and the scopes.
	Claims map[string]json.RawMessage
}

// ParseIntrospection reads an introspection answer strictly: one JSON object whose active is
// a boolean; for an active token, exp is required (a number of seconds), iss (when present) a
// string, aud a string or a list of strings, nbf and iat numbers. Anything else is an error:
// an answer the gate cannot read admits nobody.
func ParseIntrospection(body []byte) (*IntrospectionAnswer, error) {
	if len(body) > maxIntrospectionBytes {
		return nil, fmt.Errorf("the answer is longer than %d bytes", maxIntrospectionBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("the answer is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the answer has more than one JSON value")
	}
	a := &IntrospectionAnswer{Claims: m}
	if err := json.Unmarshal(m["active"], &a.Active); err != nil {
		return nil, errors.New("active is not a boolean")
	}
	if !a.Active {
		return a, nil
	}
	if raw, ok := m["iss"]; ok && json.Unmarshal(raw, &a.Issuer) != nil {
		return nil, errors.New("iss is not a string")
	}
	if raw, ok := m["aud"]; ok {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			a.Audience = []string{one}
		} else if json.Unmarshal(raw, &a.Audience) != nil {
			return nil, errors.New("aud is not a string or a list of strings")
		}
	}
	var err error
	if a.Expiry, err = numericDate(m, "exp", true); err != nil {
		return nil, err
	}
	if a.NotBefore, err = numericDate(m, "nbf", false); err != nil {
		return nil, err
	}
	if a.IssuedAt, err = numericDate(m, "iat", false); err != nil {
		return nil, err
	}
	return a, nil
}

// numericDate reads a NumericDate member (seconds since the epoch, RFC 7519 §2).
func numericDate(m map[string]json.RawMessage, name string, required bool) (time.Time, error) {
	raw, ok := m[name]
	if !ok {
		if required {
			return time.Time{}, fmt.Errorf("an active token's answer has no %s", name)
		}
		return time.Time{}, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f < 0 || f > 1e11 {
		return time.Time{}, fmt.Errorf("%s is not a date in seconds", name)
	}
	return time.Unix(int64(f), 0), nil
}

func newIntrospector(cfg Introspection, client *http.Client) (*introspector, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("agentoauth: the introspection endpoint must be an https URL")
	}
	if cfg.ClientID == "" || cfg.ClientSecret == nil {
		return nil, errors.New("agentoauth: introspection needs a client id and secret")
	}
	if cfg.MaxCached <= 0 {
		cfg.MaxCached = DefaultIntrospectionCache
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultIntrospectionTTL
	}
	return &introspector{cfg: cfg, client: client, cache: map[[32]byte]introspected{}}, nil
}

// introspect is Verify for an opaque token: the cached answer, or the provider's.
func (v *Verifier) introspect(ctx context.Context, token, server string) (string, *Refusal) {
	in := v.intro
	key := sha256.Sum256([]byte(token))
	now := v.now()
	in.mu.Lock()
	e, ok := in.cache[key]
	in.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.agent, nil
	}
	a, err := in.ask(ctx, token)
	if err != nil {
		return "", &Refusal{Status: http.StatusServiceUnavailable, Code: ef.EFAgentIDPUnavailable,
			Description: "the identity provider's introspection endpoint did not answer usably; try again later"}
	}
	if !a.Active {
		return "", invalid("the token is not active")
	}
	if a.Issuer != "" && a.Issuer != v.o.Issuer {
		return "", invalid("the token's issuer is not %s", v.o.Issuer)
	}
	if !intersects(a.Audience, v.Audiences(server)) {
		return "", invalid("the token's audience is not %s", v.Audiences(server)[0])
	}
	skew := v.o.ClockSkew
	switch {
	case !now.Before(a.Expiry.Add(skew)):
		return "", invalid("the token expired")
	case !a.NotBefore.IsZero() && now.Add(skew).Before(a.NotBefore):
		return "", invalid("the token is not valid yet (nbf)")
	case !a.IssuedAt.IsZero() && now.Add(skew).Before(a.IssuedAt):
		return "", invalid("the token was issued in the future (iat)")
	}
	agent, rf := v.agent(a.Claims)
	if rf != nil {
		return "", rf
	}
	if missing := v.missingScope(a.Claims); missing != "" {
		return "", &Refusal{Status: http.StatusForbidden, Code: ef.EFAgentUnauthenticated, OAuthError: "insufficient_scope",
			Description: "the token lacks scope " + missing, Scope: strings.Join(v.o.Scopes, " ")}
	}
	until := now.Add(in.cfg.TTL)
	if a.Expiry.Before(until) {
		until = a.Expiry
	}
	in.remember(key, agent, until, now)
	return agent, nil
}

func intersects(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}

// remember keeps an active answer until until. At the bound, expired entries go first, then
// any one: the bound costs a new introspection, never an admission.
func (in *introspector) remember(key [32]byte, agent string, until, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.cache[key]; !ok && len(in.cache) >= in.cfg.MaxCached {
		for k, e := range in.cache {
			if !now.Before(e.until) {
				delete(in.cache, k)
			}
		}
		for k := range in.cache {
			if len(in.cache) < in.cfg.MaxCached {
				break
			}
			delete(in.cache, k)
		}
	}
	in.cache[key] = introspected{agent: agent, until: until}
}

// ask POSTs the token to the introspection endpoint (RFC 7662 §2.1).
func (in *introspector) ask(ctx context.Context, token string) (*IntrospectionAnswer, error) {
	secret, err := in.cfg.ClientSecret()
	if err != nil {
		return nil, fmt.Errorf("introspection client secret: %w", err)
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.cfg.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(in.cfg.ClientID), url.QueryEscape(secret)) // RFC 6749 §2.3.1
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIntrospectionBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("introspection: HTTP %d", resp.StatusCode)
	}
	return ParseIntrospection(body)
}
