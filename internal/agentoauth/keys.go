package agentoauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Bounds on what the provider's documents can make the gate hold.
const (
	// MaxKeys is the most keys a key set may hold; a larger set is refused (the provider is
	// treated as unavailable), so an attacker who controls the set's size cannot grow the gate.
	MaxKeys = 64
	// maxDocumentBytes bounds the discovery document and the key set.
	maxDocumentBytes = 1 << 20
	// fetchTimeout bounds one fetch of the discovery document or the key set.
	fetchTimeout = 10 * time.Second
)

// Errors of the key set.
var (
	// ErrProviderUnavailable: the provider's discovery document or key set could not be
	// fetched or is unusable, and no cached key can verify the token.
	ErrProviderUnavailable = errors.New("the identity provider's keys are unavailable")
	// ErrUnknownKey: the provider's current key set holds no key for the token's key id.
	ErrUnknownKey = errors.New("the token's key is not in the identity provider's key set")
)

// keySet is the provider's JWKS: discovered (jwks_uri of the issuer's metadata) or
// configured, cached for maxAge, fetched again at most once per minRefresh when a token names
// a key id the cached set does not hold, and never larger than MaxKeys. A set that could not
// be refreshed stays usable for another maxAge after it went stale, then the provider counts
// as unavailable: agents are refused, never admitted without a verified signature.
type keySet struct {
	issuer     string
	client     *http.Client
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	mu       sync.Mutex
	jwksURL  string // configured or discovered
	keys     map[string]jose.JSONWebKey
	fetched  time.Time     // last successful fetch
	lastTry  time.Time     // last fetch attempt
	fetching chan struct{} // closed when the fetch under way ends
	lastErr  error
}

// key returns the key the token's kid names (kid may be empty only when the set holds one key).
func (s *keySet) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	for {
		s.mu.Lock()
		now := s.now()
		fresh := !s.fetched.IsZero() && now.Sub(s.fetched) < s.maxAge
		usable := !s.fetched.IsZero() && now.Sub(s.fetched) < 2*s.maxAge
		k, found := s.lookup(kid)
		switch {
		case found && fresh:
			s.mu.Unlock()
			return k, nil
		case s.fetching != nil:
			wait := s.fetching
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return jose.JSONWebKey{}, fmt.Errorf("%w: %v", ErrProviderUnavailable, ctx.Err())
			}
		case !s.lastTry.IsZero() && now.Sub(s.lastTry) < s.minRefresh:
			// Fetched (or tried) moments ago: no new fetch for this token.
			s.mu.Unlock()
			switch {
			case found && usable:
				return k, nil
			case s.lastErr != nil && !found:
				return jose.JSONWebKey{}, fmt.Errorf("%w: %v", ErrProviderUnavailable, s.lastErr)
			default:
				return jose.JSONWebKey{}, ErrUnknownKey
			}
		}
		done := make(chan struct{})
		s.fetching, s.lastTry = done, now
		s.mu.Unlock()

		// The fetch serves every request waiting for it: it is not cut short when the request
		// that started it goes away (a client that disconnects at once must not make the
		// fetch fail for everyone until the next jwksRefresh); fetchTimeout bounds it.
		keys, jwksURL, err := s.fetch(context.WithoutCancel(ctx))

		s.mu.Lock()
		s.lastErr = err
		if err == nil {
			s.keys, s.jwksURL, s.fetched = keys, jwksURL, s.now()
		}
		s.fetching = nil
		close(done)
		s.mu.Unlock()
		if err != nil {
			if found && usable {
				return k, nil // the provider is unreachable; the set fetched before still holds
			}
			return jose.JSONWebKey{}, fmt.Errorf("%w: %v", ErrProviderUnavailable, err)
		}
		s.mu.Lock()
		k, found = s.lookup(kid)
		s.mu.Unlock()
		if !found {
			return jose.JSONWebKey{}, ErrUnknownKey
		}
		return k, nil
	}
}

// lookup finds kid in the cached set; the caller holds s.mu.
func (s *keySet) lookup(kid string) (jose.JSONWebKey, bool) {
	if kid == "" {
		if len(s.keys) != 1 {
			return jose.JSONWebKey{}, false
		}
		for _, k := range s.keys {
			return k, true
		}
	}
	k, ok := s.keys[kid]
	return k, ok
}

// fetch discovers the key set's URL when it is not known yet, and fetches the set.
func (s *keySet) fetch(ctx context.Context) (map[string]jose.JSONWebKey, string, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	s.mu.Lock()
	jwksURL := s.jwksURL
	s.mu.Unlock()
	if jwksURL == "" {
		var err error
		if jwksURL, err = s.discover(ctx); err != nil {
			return nil, "", err
		}
	}
	body, err := s.get(ctx, jwksURL)
	if err != nil {
		return nil, "", err
	}
	keys, err := ParseKeySet(body)
	if err != nil {
		return nil, "", err
	}
	return keys, jwksURL, nil
}

// discover reads jwks_uri from the issuer's OpenID configuration, or its RFC 8414 metadata
// when there is none; the document must name the configured issuer exactly.
func (s *keySet) discover(ctx context.Context) (string, error) {
	var lastErr error
	for _, wk := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		body, err := s.get(ctx, strings.TrimSuffix(s.issuer, "/")+wk)
		if err != nil {
			lastErr = err
			continue
		}
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return "", fmt.Errorf("the provider's metadata %s: %w", wk, err)
		}
		if doc.Issuer != s.issuer {
			return "", fmt.Errorf("the provider's metadata names issuer %q, not %q", doc.Issuer, s.issuer)
		}
		if u, err := url.Parse(doc.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
			return "", errors.New("the provider's metadata has no https jwks_uri")
		}
		return doc.JWKSURI, nil
	}
	return "", lastErr
}

// get fetches u (no redirects), at most maxDocumentBytes.
func (s *keySet) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxDocumentBytes {
		return nil, fmt.Errorf("GET %s: the document is larger than %d bytes", u, maxDocumentBytes)
	}
	return body, nil
}

// ParseKeySet parses a JWKS (RFC 7517 §5) into its signing keys by key id. It keeps the public
// keys whose use is "sig" or absent, refuses a set with a symmetric or private key (a
// provider's published set holds neither), a key without a key id beside others, two keys of
// one id, and a set of more than MaxKeys keys.
func ParseKeySet(b []byte) (map[string]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("the key set is not JSON: %w", err)
	}
	if len(raw.Keys) > MaxKeys {
		return nil, fmt.Errorf("the key set holds %d keys, more than %d", len(raw.Keys), MaxKeys)
	}
	out := map[string]jose.JSONWebKey{}
	for i, r := range raw.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			var probe struct {
				Kty string `json:"kty"`
			}
			if json.Unmarshal(r, &probe) == nil && probe.Kty != "" && probe.Kty != "RSA" && probe.Kty != "EC" && probe.Kty != "OKP" && probe.Kty != "oct" {
				continue // a key type this gate does not use (RFC 7517 §5: ignore it)
			}
			return nil, fmt.Errorf("the key set's key %d: %w", i, err)
		}
		if !k.Valid() || !k.IsPublic() {
			return nil, fmt.Errorf("the key set's key %d is not a public key", i)
		}
		if _, sym := k.Key.([]byte); sym {
			return nil, fmt.Errorf("the key set's key %d is symmetric", i)
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if _, dup := out[k.KeyID]; dup {
			return nil, fmt.Errorf("the key set holds key id %q twice", k.KeyID)
		}
		out[k.KeyID] = k
	}
	if _, ok := out[""]; ok && len(out) > 1 {
		return nil, errors.New("the key set holds a key without a key id beside others")
	}
	return out, nil
}

// Check fetches the provider's metadata and key set now, as a token with an unknown key would,
// and returns the number of signing keys it publishes (`actgate doctor`). A successful fetch
// is kept as the verifier's key set.
func (v *Verifier) Check(ctx context.Context) (int, error) {
	s := v.keys
	keys, jwksURL, err := s.fetch(ctx)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys, s.jwksURL, s.fetched, s.lastTry, s.lastErr = keys, jwksURL, s.now(), s.now(), nil
	return len(keys), nil
}
