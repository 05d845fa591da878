package upstreamauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/internal/fileutil"
)

// Grant is how a Source obtains a token.
type Grant string

// The grants.
const (
	// GrantClientCredentials is RFC 6749 §4.4: the gate's own client identity.
	GrantClientCredentials Grant = "client_credentials"
	// GrantTokenExchange is RFC 8693: the workload's identity token (SubjectTokenFile), or
	// the agent's validated token of the call (SubjectAgent), exchanged for an upstream token.
	GrantTokenExchange Grant = "token_exchange"
)

// RFC 8693 §3 token type identifiers, and the grant type (§2.1).
const (
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
	grantTypeExchange    = "urn:ietf:params:oauth:grant-type:token-exchange"
	assertionTypeJWT     = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" // RFC 7523 §2.2
)

// Timing of the cache and of requests to the provider.
const (
	// FetchTimeout bounds one request to the token endpoint.
	FetchTimeout = 15 * time.Second
	// RetryAfter is how long a failed request's error is answered to further calls before the
	// provider is asked again, so that calls arriving while it is down do not each open a
	// request.
	RetryAfter = time.Second
	// maxRefreshAhead caps how long before expiry the background refresh starts.
	maxRefreshAhead = 5 * time.Minute
	// maxMinValidity caps how long a token must still be valid to be presented: a token
	// closer to its expiry could lapse on the way to the upstream.
	maxMinValidity = 10 * time.Second
	// noExpiryLifetime is how long a token whose answer has no expires_in is kept.
	noExpiryLifetime = time.Minute
	// assertionLifetime is the validity of a private_key_jwt assertion (RFC 7523 §3: exp).
	assertionLifetime = time.Minute
)

// Config configures a Source.
type Config struct {
	Grant Grant
	// TokenURL is the provider's token endpoint, https.
	TokenURL string
	// ClientID is the gate's client at the provider. Required for client credentials; for
	// token exchange it may be empty when the provider does not authenticate the client (the
	// subject token is the credential).
	ClientID string
	// ClientSecretFile holds the client's secret (client_secret_basic). Read for every request
	// to the provider, so it can be rotated in place.
	ClientSecretFile string
	// PrivateKeyFile holds the client's private key, PEM (PKCS #8, PKCS #1 or SEC 1; RSA,
	// ECDSA P-256/P-384 or Ed25519), that signs a private_key_jwt assertion (RFC 7523 §2.2)
	// for every request. Read for every request.
	PrivateKeyFile string
	// KeyID is the assertion's kid; empty means the key's JWK thumbprint (RFC 7638).
	KeyID string
	// AssertionAudience is the assertion's aud; empty means TokenURL.
	AssertionAudience string
	// SubjectTokenFile holds the workload's identity token for token exchange (a projected
	// service-account token the kubelet rotates in place). Read for every request.
	SubjectTokenFile string
	// SubjectTokenType is its RFC 8693 type; empty means TokenTypeJWT, or TokenTypeAccessToken
	// for SubjectAgent.
	SubjectTokenType string
	// SubjectAgent makes the subject token the access token the agent signed in to the gate
	// with, as verified for the call (WithAgentToken): the upstream's token names the person or
	// agent the call is for ("on behalf of", RFC 8693 §1.1). Such a Config is served by an
	// AgentSource, not a Source.
	SubjectAgent bool
	// ActorTokenFile, if set, holds the gate's own identity token sent as actor_token (RFC 8693
	// §2.1, delegation §1.1: the issued token's act claim names the gate). Read for every
	// request.
	ActorTokenFile string
	// ActorTokenType is its RFC 8693 type; empty means TokenTypeJWT.
	ActorTokenType string
	// Resource is the upstream's URL, sent as resource (RFC 8707). Required.
	Resource string
	// Audience is the token exchange audience; empty means Resource.
	Audience string
	// Scopes are asked for, if any.
	Scopes []string
	// HTTPClient reaches the provider; nil means one with the system roots.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Error is the failure to obtain a token: the upstream request is not sent.
type Error struct{ Err error }

func (e *Error) Error() string {
	return "no token from the identity provider for the upstream: " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Source obtains, caches and refreshes the token of one upstream.
type Source struct {
	cfg Config
	now func() time.Time

	mu        sync.Mutex
	token     string
	useUntil  time.Time // presented until then
	refreshAt time.Time // from then, a call starts a background refresh
	inflight  *fetch
	failed    time.Time
	failErr   error
	fetches   int
}

type fetch struct {
	done chan struct{}
	tok  string
	err  error
}

// wait returns the fetch's token once it is done, or the context's error first.
func (f *fetch) wait(ctx context.Context) (string, error) {
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return "", &Error{Err: ctx.Err()}
	}
}

// New checks cfg and reads its files once, so that a gate does not start with a credential it
// cannot use. It does not contact the provider.
func New(cfg Config) (*Source, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: FetchTimeout}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.SubjectAgent {
		return nil, errors.New("upstreamauth: the agent's token as subject is served by an AgentSource")
	}
	if _, err := cfg.params(now(), ""); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, now: now}, nil
}

func (c *Config) check() error {
	switch c.Grant {
	case GrantClientCredentials:
		if c.ClientID == "" {
			return errors.New("upstreamauth: client credentials need a client id")
		}
		if (c.ClientSecretFile == "") == (c.PrivateKeyFile == "") {
			return errors.New("upstreamauth: client credentials need exactly one of a client secret file and a private key file")
		}
		if c.SubjectTokenFile != "" || c.SubjectAgent || c.ActorTokenFile != "" {
			return errors.New("upstreamauth: subject and actor tokens are for token exchange only")
		}
	case GrantTokenExchange:
		if (c.SubjectTokenFile == "") == !c.SubjectAgent {
			return errors.New("upstreamauth: token exchange needs exactly one subject: a subject token file or the agent's token")
		}
		if c.ClientSecretFile != "" && c.PrivateKeyFile != "" {
			return errors.New("upstreamauth: set at most one of a client secret file and a private key file")
		}
		if (c.ClientSecretFile != "" || c.PrivateKeyFile != "") && c.ClientID == "" {
			return errors.New("upstreamauth: client authentication needs a client id")
		}
		for _, tt := range []struct{ what, v string }{{"subject", c.SubjectTokenType}, {"actor", c.ActorTokenType}} {
			switch tt.v {
			case "", TokenTypeJWT, TokenTypeAccessToken, TokenTypeIDToken:
			default:
				return fmt.Errorf("upstreamauth: %s token type %q is not one of %s, %s, %s", tt.what, tt.v, TokenTypeJWT, TokenTypeAccessToken, TokenTypeIDToken)
			}
		}
		if c.ActorTokenType != "" && c.ActorTokenFile == "" {
			return errors.New("upstreamauth: an actor token type needs an actor token file")
		}
	default:
		return fmt.Errorf("upstreamauth: grant %q is not %s or %s", c.Grant, GrantClientCredentials, GrantTokenExchange)
	}
	if err := httpsURL("token URL", c.TokenURL); err != nil {
		return err
	}
	if c.Resource == "" {
		return errors.New("upstreamauth: the resource (the upstream's URL) is required")
	}
	if u, err := url.Parse(c.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
		return fmt.Errorf("upstreamauth: resource %q is not an absolute URL without a fragment (RFC 8707 §2)", c.Resource)
	}
	return nil
}

func httpsURL(what, s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("upstreamauth: %s %q must be an https URL without user info or fragment", what, s)
	}
	return nil
}

// Fetches is how many requests the Source made to the provider.
func (s *Source) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// Token returns a token for the upstream: the cached one while it is valid for long enough, a
// new one otherwise (one request to the provider shared by every caller waiting for it). Once
// the cached token nears its expiry, a call starts a refresh in the background and is answered
// with the cached token. The error is an *Error.
func (s *Source) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	now := s.now()
	if s.token != "" && now.Before(s.useUntil) {
		tok := s.token
		if !now.Before(s.refreshAt) && s.inflight == nil && now.Sub(s.failed) >= RetryAfter {
			s.start()
		}
		s.mu.Unlock()
		return tok, nil
	}
	if s.inflight == nil {
		if s.failErr != nil && now.Sub(s.failed) < RetryAfter {
			err := s.failErr
			s.mu.Unlock()
			return "", err
		}
		s.start()
	}
	f := s.inflight
	s.mu.Unlock()
	return f.wait(ctx)
}

// Invalidate drops tok if it is the cached token: the upstream refused it (HTTP 401), so the
// next call asks the provider for a new one rather than presenting it again.
func (s *Source) Invalidate(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok != "" && s.token == tok {
		s.token, s.useUntil, s.refreshAt = "", time.Time{}, time.Time{}
	}
}

// start begins a request to the provider; the caller holds s.mu and s.inflight is nil. The
// request runs on its own deadline, not a caller's, so that callers who give up do not fail
// the others.
func (s *Source) start() {
	f := &fetch{done: make(chan struct{})}
	s.inflight = f
	s.fetches++
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
		defer cancel()
		tok, exp, err := s.cfg.request(ctx, s.now(), "")
		s.mu.Lock()
		now := s.now()
		s.inflight = nil
		if err != nil {
			f.err = &Error{Err: err}
			s.failed, s.failErr = now, f.err
		} else {
			lifetime := noExpiryLifetime
			if !exp.IsZero() {
				lifetime = exp.Sub(now)
			}
			if lifetime <= 0 {
				f.err = &Error{Err: errors.New("the provider issued a token that has already expired")}
				s.failed, s.failErr = now, f.err
			} else {
				f.tok = tok
				s.token, s.failErr = tok, nil
				s.useUntil = now.Add(lifetime - min(lifetime/10, maxMinValidity))
				s.refreshAt = now.Add(lifetime - min(lifetime/4, maxRefreshAhead))
			}
		}
		s.mu.Unlock()
		close(f.done)
	}()
}

// request asks the provider once; subject is the agent's token for SubjectAgent.
func (c *Config) request(ctx context.Context, now time.Time, subject string) (string, time.Time, error) {
	params, err := c.params(now, subject)
	if err != nil {
		return "", time.Time{}, err
	}
	cc := &clientcredentials.Config{ClientID: c.ClientID, TokenURL: c.TokenURL, Scopes: c.Scopes, EndpointParams: params}
	if c.ClientSecretFile != "" {
		if cc.ClientSecret, err = fileutil.ReadToken(c.ClientSecretFile); err != nil {
			return "", time.Time{}, fmt.Errorf("client secret: %w", err)
		}
		cc.AuthStyle = oauth2.AuthStyleInHeader
	} else {
		cc.AuthStyle = oauth2.AuthStyleInParams
	}
	tok, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, c.HTTPClient))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			// The provider's answer is not kept whole: it may echo the request.
			return "", time.Time{}, fmt.Errorf("the token endpoint answered HTTP %d %s", re.Response.StatusCode, clip(re.ErrorCode, 64))
		}
		return "", time.Time{}, err
	}
	if t := strings.ToLower(tok.TokenType); t != "" && t != "bearer" {
		return "", time.Time{}, fmt.Errorf("the provider issued a %q token, not a bearer token", clip(tok.TokenType, 32))
	}
	return tok.AccessToken, tok.Expiry, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// params are the grant's request parameters beyond grant_type (client credentials) and scope:
// the resource, the client assertion, the subject and actor tokens. subject is the agent's
// token for SubjectAgent ("" when only checking the configuration).
func (c *Config) params(now time.Time, subject string) (url.Values, error) {
	v := url.Values{"resource": {c.Resource}}
	if c.PrivateKeyFile != "" {
		a, err := c.assertion(now)
		if err != nil {
			return nil, err
		}
		v.Set("client_assertion_type", assertionTypeJWT)
		v.Set("client_assertion", a)
	} else if c.ClientSecretFile != "" {
		if _, err := fileutil.ReadToken(c.ClientSecretFile); err != nil {
			return nil, fmt.Errorf("upstreamauth: client secret: %w", err)
		}
	}
	if c.Grant == GrantTokenExchange {
		st, tt := subject, c.SubjectTokenType
		if c.SubjectAgent {
			if tt == "" {
				tt = TokenTypeAccessToken
			}
		} else {
			var err error
			if st, err = fileutil.ReadToken(c.SubjectTokenFile); err != nil {
				return nil, fmt.Errorf("upstreamauth: subject token: %w", err)
			}
			if tt == "" {
				tt = TokenTypeJWT
			}
		}
		if c.ActorTokenFile != "" {
			at, err := fileutil.ReadToken(c.ActorTokenFile)
			if err != nil {
				return nil, fmt.Errorf("upstreamauth: actor token: %w", err)
			}
			att := c.ActorTokenType
			if att == "" {
				att = TokenTypeJWT
			}
			v.Set("actor_token", at)
			v.Set("actor_token_type", att)
		}
		aud := c.Audience
		if aud == "" {
			aud = c.Resource
		}
		v.Set("grant_type", grantTypeExchange)
		v.Set("subject_token", st)
		v.Set("subject_token_type", tt)
		v.Set("requested_token_type", TokenTypeAccessToken)
		v.Set("audience", aud)
	}
	return v, nil
}

// assertion is a private_key_jwt client assertion (RFC 7523 §2.2, §3): iss = sub = the client
// id, aud = the token endpoint (or AssertionAudience), a fresh jti, one minute of validity.
func (c *Config) assertion(now time.Time) (string, error) {
	b, err := os.ReadFile(c.PrivateKeyFile)
	if err != nil {
		return "", fmt.Errorf("upstreamauth: private key: %w", err)
	}
	key, alg, err := ParsePrivateKey(b)
	if err != nil {
		return "", err
	}
	kid := c.KeyID
	if kid == "" {
		jwk := jose.JSONWebKey{Key: key.Public()}
		tp, err := jwk.Thumbprint(crypto.SHA256)
		if err != nil {
			return "", fmt.Errorf("upstreamauth: private key: %w", err)
		}
		kid = base64.RawURLEncoding.EncodeToString(tp)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return "", fmt.Errorf("upstreamauth: private key: %w", err)
	}
	aud := c.AssertionAudience
	if aud == "" {
		aud = c.TokenURL
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: c.ClientID, Subject: c.ClientID, Audience: jwt.Audience{aud}, ID: base64.RawURLEncoding.EncodeToString(jti),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(assertionLifetime)),
	}).Serialize()
}

// maxKeyFile bounds the private key file read (a PEM key is a few kilobytes).
const maxKeyFile = 64 << 10

// ParsePrivateKey parses a PEM private key (PKCS #8, PKCS #1 RSA of at least 2048 bits, SEC 1
// ECDSA on P-256 or P-384, or Ed25519) and names the JWS algorithm it signs with.
func ParsePrivateKey(b []byte) (crypto.Signer, jose.SignatureAlgorithm, error) {
	if len(b) > maxKeyFile {
		return nil, "", errors.New("upstreamauth: private key: the file is larger than a PEM key")
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, "", errors.New("upstreamauth: private key: no PEM block")
	}
	var k any
	var err error
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, "", fmt.Errorf("upstreamauth: private key: PEM block %q is not a private key", clip(blk.Type, 40))
	}
	if err != nil {
		return nil, "", fmt.Errorf("upstreamauth: private key: %w", err)
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, "", fmt.Errorf("upstreamauth: private key: RSA key of %d bits, at least 2048 needed", k.N.BitLen())
		}
		return k, jose.RS256, nil
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jose.ES256, nil
		case elliptic.P384():
			return k, jose.ES384, nil
		}
		return nil, "", errors.New("upstreamauth: private key: ECDSA keys must be on P-256 or P-384")
	case ed25519.PrivateKey:
		return k, jose.EdDSA, nil
	}
	return nil, "", fmt.Errorf("upstreamauth: private key: %T is not supported", k)
}
