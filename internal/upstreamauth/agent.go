package upstreamauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// AgentToken is the access token an agent signed in to the gate with, as the gate verified it
// for one request (internal/agentoauth), and its expiry.
type AgentToken struct {
	Token  string
	Expiry time.Time
}

type agentTokenKey struct{}

// WithAgentToken returns ctx carrying the agent's verified token of the request. Only the gate's
// admission of a request whose token it verified sets it; the token is the subject of an
// on-behalf-of exchange (Config.SubjectAgent) and is never presented to an upstream itself
// (MCP authorization, "Token Passthrough").
func WithAgentToken(ctx context.Context, t AgentToken) context.Context {
	return context.WithValue(ctx, agentTokenKey{}, t)
}

// AgentTokenOf returns the agent's verified token carried by ctx, if any.
func AgentTokenOf(ctx context.Context) (AgentToken, bool) {
	t, ok := ctx.Value(agentTokenKey{}).(AgentToken)
	return t, ok && t.Token != ""
}

// ErrNoAgentToken: the request carries no agent token verified by the gate (a static loopback
// agent token, or none), so there is nothing to exchange; the request is not sent with some
// other identity.
var ErrNoAgentToken = errors.New("the request carries no agent OAuth token to exchange; the upstream takes only tokens on behalf of an agent signed in with the identity provider")

// ErrAgentTokenExpired: the agent's token of the call expired before its dispatch (a call that
// waited on a binding moment, for instance); it is not exchanged.
var ErrAgentTokenExpired = errors.New("the agent's token of the call has expired; it is not exchanged")

// sweepEvery: every sweepEvery new entries, the expired ones are removed even below the bound,
// so that an upstream token is not kept long after it lapsed.
const sweepEvery = 128

// DefaultMaxAgentTokens bounds an AgentSource's cache when Config.MaxAgentTokens is 0.
const DefaultMaxAgentTokens = 10000

// ErrAgentTokensFull: every cached entry is in use by a request to the provider, at the bound.
var ErrAgentTokensFull = errors.New("too many agent tokens are being exchanged at once")

// AgentSource exchanges the agent's token of each call for a token of one upstream (RFC 8693,
// RFC 8707 resource = the upstream) and caches the upstream token per agent token: the key is
// the SHA-256 digest of the agent's token (the token itself is not kept as a key and never
// logged), an entry is presented only while both tokens remain valid, and the cache holds at
// most max entries (expired ones go first, then the one expiring soonest).
type AgentSource struct {
	cfg Config
	now func() time.Time
	max int

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*agentEntry
	fetches int
	inserts int
}

type agentEntry struct {
	tok      string
	useUntil time.Time
	inflight *fetch
	failed   time.Time
	failErr  error
}

// NewAgentSource checks cfg (a token exchange with SubjectAgent) and reads its files once. max
// bounds the cached agent tokens; 0 means DefaultMaxAgentTokens.
func NewAgentSource(cfg Config, max int) (*AgentSource, error) {
	if !cfg.SubjectAgent || cfg.Grant != GrantTokenExchange {
		return nil, errors.New("upstreamauth: an AgentSource is for token exchange of the agent's token")
	}
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
	if _, err := cfg.params(now(), ""); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = DefaultMaxAgentTokens
	}
	return &AgentSource{cfg: cfg, now: now, max: max, entries: map[[sha256.Size]byte]*agentEntry{}}, nil
}

// Fetches is how many requests the AgentSource made to the provider.
func (s *AgentSource) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// Len is the number of cached agent tokens.
func (s *AgentSource) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Token returns the upstream token for the agent token in ctx (WithAgentToken): the cached one
// while both it and the agent's token are valid, a new exchange otherwise (one request shared by
// the callers of the same agent token). The error is an *Error: no agent token, an expired one,
// the provider down or refusing.
func (s *AgentSource) Token(ctx context.Context) (string, error) {
	at, ok := AgentTokenOf(ctx)
	if !ok {
		return "", &Error{Err: ErrNoAgentToken}
	}
	now := s.now()
	if !now.Before(at.Expiry) {
		return "", &Error{Err: ErrAgentTokenExpired}
	}
	key := sha256.Sum256([]byte(at.Token))
	s.mu.Lock()
	e := s.entries[key]
	if e != nil && e.tok != "" && now.Before(e.useUntil) {
		tok := e.tok
		s.mu.Unlock()
		return tok, nil
	}
	if e == nil || e.inflight == nil {
		if e != nil && e.failErr != nil && now.Sub(e.failed) < RetryAfter {
			err := e.failErr
			s.mu.Unlock()
			return "", err
		}
		if e == nil {
			if !s.makeRoom(now) {
				s.mu.Unlock()
				return "", &Error{Err: fmt.Errorf("%w (%d, the gate's bound)", ErrAgentTokensFull, s.max)}
			}
			e = &agentEntry{}
			s.entries[key] = e
		}
		s.start(e, at)
	}
	f := e.inflight
	s.mu.Unlock()
	return f.wait(ctx)
}

// Invalidate drops tok wherever it is cached: the upstream refused it (HTTP 401).
func (s *AgentSource) Invalidate(tok string) {
	if tok == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.tok == tok {
			e.tok, e.useUntil = "", time.Time{}
		}
	}
}

// makeRoom removes expired entries and, at the bound, the idle entry presented for the shortest
// time still; false when every entry waits on the provider. The caller holds s.mu.
func (s *AgentSource) makeRoom(now time.Time) bool {
	if s.inserts++; len(s.entries) < s.max && s.inserts%sweepEvery != 0 {
		return true
	}
	var victim [sha256.Size]byte
	found := false
	var soonest time.Time
	for k, e := range s.entries {
		if e.inflight != nil {
			continue
		}
		if !now.Before(e.useUntil) && now.Sub(e.failed) >= RetryAfter {
			delete(s.entries, k)
			continue
		}
		if !found || e.useUntil.Before(soonest) {
			victim, soonest, found = k, e.useUntil, true
		}
	}
	if len(s.entries) < s.max {
		return true
	}
	if !found {
		return false
	}
	delete(s.entries, victim)
	return true
}

// start begins the exchange of at for e; the caller holds s.mu and e.inflight is nil. The
// request runs on its own deadline, not a caller's.
func (s *AgentSource) start(e *agentEntry, at AgentToken) {
	f := &fetch{done: make(chan struct{})}
	e.inflight = f
	s.fetches++
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
		defer cancel()
		tok, exp, err := s.cfg.request(ctx, s.now(), at.Token)
		s.mu.Lock()
		now := s.now()
		e.inflight = nil
		if err == nil {
			lifetime := noExpiryLifetime
			if !exp.IsZero() {
				lifetime = exp.Sub(now)
			}
			if lifetime <= 0 {
				err = errors.New("the provider issued a token that has already expired")
			} else {
				f.tok = tok
				e.tok, e.failErr = tok, nil
				// Never presented past either token's expiry.
				e.useUntil = now.Add(lifetime - min(lifetime/10, maxMinValidity))
				if at.Expiry.Before(e.useUntil) {
					e.useUntil = at.Expiry
				}
			}
		}
		if err != nil {
			f.err = &Error{Err: err}
			e.failed, e.failErr = now, f.err
			e.useUntil = now.Add(RetryAfter) // removable once the retry pause has passed
			e.tok = ""
		}
		s.mu.Unlock()
		close(f.done)
	}()
}

// agentTokenAlgs are the algorithms ParseAgentToken reads (internal/agentoauth admits only
// asymmetric ones).
var agentTokenAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// ParseAgentToken reads the expiry of an agent's JWT access token that the gate has already
// verified (signature, issuer, audience, expiry: internal/agentoauth). It does not verify
// anything itself; a token without exp is refused.
func ParseAgentToken(tok string) (AgentToken, error) {
	jws, err := jwt.ParseSigned(tok, agentTokenAlgs)
	if err != nil {
		return AgentToken{}, fmt.Errorf("upstreamauth: agent token: %w", err)
	}
	var cl jwt.Claims
	if err := jws.UnsafeClaimsWithoutVerification(&cl); err != nil {
		return AgentToken{}, fmt.Errorf("upstreamauth: agent token: %w", err)
	}
	if cl.Expiry == nil {
		return AgentToken{}, errors.New("upstreamauth: agent token: no exp")
	}
	return AgentToken{Token: tok, Expiry: cl.Expiry.Time()}, nil
}
