// Package tokenreview caches the API server's TokenReview answers for the authority service
// (internal/review/service): by the SHA-256 of the token, never the token, bounded in total,
// with concurrent reviews of one token sharing one TokenReview.
package tokenreview

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Bounds of the TokenReview cache.
const (
	// DefaultTTL is how long an authenticated TokenReview is reused: kube-apiserver's
	// own cache of token authentications holds a success for 10 s.
	DefaultTTL = 10 * time.Second
	// negativeTokenReviewTTL is how long a token the API server did not authenticate is
	// answered from the cache: short, so a token that becomes valid (a clock skew at issue) is
	// soon accepted, long enough that a flood of one bad token costs one TokenReview a second.
	negativeTokenReviewTTL = time.Second
	// maxCachedTokens bounds the cache. Past it, expired entries are dropped, then arbitrary
	// ones: a flood of distinct tokens costs TokenReviews, never memory.
	maxCachedTokens = 4096
)

// Cache holds TokenReview results by the SHA-256 of the token, never the token itself.
// Only answers of the API server are cached; a failed TokenReview (an error, a timeout) is not.
// Concurrent reviews of one token wait for the first one's TokenReview instead of sending their
// own.
type Cache struct {
	ttl time.Duration // <= 0: the cache is off
	now func() time.Time

	mu       sync.Mutex
	entries  map[[sha256.Size]byte]tokenEntry
	inflight map[[sha256.Size]byte]*tokenFlight
}

type tokenEntry struct {
	status  authenticationv1.TokenReviewStatus
	expires time.Time
}

type tokenFlight struct {
	done   chan struct{}
	status authenticationv1.TokenReviewStatus
	err    error
}

// New returns a Cache that reuses an authenticated answer for ttl (<= 0: no caching), aged by
// now.
func New(ttl time.Duration, now func() time.Time) *Cache {
	return &Cache{ttl: ttl, now: now, entries: map[[sha256.Size]byte]tokenEntry{}, inflight: map[[sha256.Size]byte]*tokenFlight{}}
}

// Review returns the TokenReview status of token, from the cache or by calling create once
// for all concurrent callers. cached reports whether no TokenReview was sent for this call.
func (tc *Cache) Review(ctx context.Context, token string,
	create func(context.Context) (authenticationv1.TokenReviewStatus, error),
) (st authenticationv1.TokenReviewStatus, cached bool, err error) {
	if tc.ttl <= 0 {
		st, err = create(ctx)
		return st, false, err
	}
	key := sha256.Sum256([]byte(token))
	var f *tokenFlight
	for f == nil {
		now := tc.now()
		tc.mu.Lock()
		if e, ok := tc.entries[key]; ok {
			if now.Before(e.expires) {
				tc.mu.Unlock()
				return e.status, true, nil
			}
			delete(tc.entries, key)
		}
		other, ok := tc.inflight[key]
		if !ok {
			f = &tokenFlight{done: make(chan struct{})}
			tc.inflight[key] = f
			tc.mu.Unlock()
			break
		}
		tc.mu.Unlock()
		select {
		case <-other.done:
		case <-ctx.Done():
			return st, true, ctx.Err()
		}
		if other.err == nil {
			return other.status, true, nil
		}
		// The other caller's TokenReview failed, perhaps on its own deadline: this caller asks
		// the API server itself, within its own deadline.
	}

	now := tc.now()
	f.status, f.err = create(ctx)
	tc.mu.Lock()
	delete(tc.inflight, key)
	if f.err == nil {
		ttl := tc.ttl
		if !f.status.Authenticated {
			ttl = min(ttl, negativeTokenReviewTTL)
		}
		expires := now.Add(ttl)
		// A token is never answered from the cache past its own expiry.
		if exp, ok := jwtExpiry(token); ok && exp.Before(expires) {
			expires = exp
		}
		tc.putLocked(key, tokenEntry{status: f.status, expires: expires}, now)
	}
	tc.mu.Unlock()
	close(f.done)
	return f.status, false, f.err
}

func (tc *Cache) putLocked(key [sha256.Size]byte, e tokenEntry, now time.Time) {
	if !now.Before(e.expires) {
		return
	}
	if len(tc.entries) >= maxCachedTokens {
		for k, old := range tc.entries {
			if !now.Before(old.expires) {
				delete(tc.entries, k)
			}
		}
		for k := range tc.entries {
			if len(tc.entries) < maxCachedTokens {
				break
			}
			delete(tc.entries, k)
		}
	}
	tc.entries[key] = e
}

// jwtExpiry reads the exp claim of a JWT without verifying it: it only shortens how long an
// answer of the API server (which did verify the token) is reused.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 16<<10 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Int64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(secs, 0), true
}
