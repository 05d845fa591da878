package tokenreview

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// reviewer counts the TokenReviews the cache sends.
type reviewer struct {
	calls  atomic.Int32
	status authenticationv1.TokenReviewStatus
	err    error
	delay  time.Duration
}

func (r *reviewer) create(context.Context) (authenticationv1.TokenReviewStatus, error) {
	r.calls.Add(1)
	time.Sleep(r.delay)
	return r.status, r.err
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func jwtWithExp(exp time.Time) string {
	payload := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"exp":%d,"sub":"system:serviceaccount:a:b"}`, exp.Unix()))
	return "eyJhbGciOiJSUzI1NiJ9." + payload + ".c2ln"
}

func TestTokenCache(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	ok := authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:a:b"}}

	t.Run("an answer is reused for the TTL", func(t *testing.T) {
		tc := New(10*time.Second, clock.Now)
		r := &reviewer{status: ok}
		for range 5 {
			st, _, err := tc.Review(ctx, "tok-a", r.create)
			if err != nil || !st.Authenticated {
				t.Fatal(st, err)
			}
		}
		if r.calls.Load() != 1 {
			t.Fatalf("%d TokenReviews", r.calls.Load())
		}
		clock.Advance(10 * time.Second)
		if _, cached, _ := tc.Review(ctx, "tok-a", r.create); cached || r.calls.Load() != 2 {
			t.Fatalf("after the TTL: cached %v, %d TokenReviews", cached, r.calls.Load())
		}
		if _, _, _ = tc.Review(ctx, "tok-b", r.create); r.calls.Load() != 3 {
			t.Fatalf("another token: %d TokenReviews", r.calls.Load())
		}
	})
	t.Run("a refusal is reused for a second only", func(t *testing.T) {
		tc := New(10*time.Second, clock.Now)
		r := &reviewer{status: authenticationv1.TokenReviewStatus{Authenticated: false, Error: "invalid"}}
		_, _, _ = tc.Review(ctx, "bad", r.create)
		_, _, _ = tc.Review(ctx, "bad", r.create)
		clock.Advance(time.Second)
		_, _, _ = tc.Review(ctx, "bad", r.create)
		if r.calls.Load() != 2 {
			t.Fatalf("%d TokenReviews, want 2", r.calls.Load())
		}
	})
	t.Run("an error is not cached", func(t *testing.T) {
		tc := New(10*time.Second, clock.Now)
		r := &reviewer{err: errors.New("api server down")}
		for range 3 {
			if _, _, err := tc.Review(ctx, "tok", r.create); err == nil {
				t.Fatal("no error")
			}
		}
		if r.calls.Load() != 3 {
			t.Fatalf("%d TokenReviews, want 3", r.calls.Load())
		}
	})
	t.Run("never past the token's exp", func(t *testing.T) {
		tc := New(10*time.Second, clock.Now)
		r := &reviewer{status: ok}
		tok := jwtWithExp(clock.Now().Add(3 * time.Second))
		_, _, _ = tc.Review(ctx, tok, r.create)
		clock.Advance(3 * time.Second)
		_, _, _ = tc.Review(ctx, tok, r.create)
		if r.calls.Load() != 2 {
			t.Fatalf("%d TokenReviews, want 2 (the first answer expires with the token)", r.calls.Load())
		}
	})
	t.Run("concurrent reviews of one token send one TokenReview", func(t *testing.T) {
		tc := New(10*time.Second, clock.Now)
		r := &reviewer{status: ok, delay: 50 * time.Millisecond}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if st, _, err := tc.Review(ctx, "tok-c", r.create); err != nil || !st.Authenticated {
					t.Error(st, err)
				}
			})
		}
		wg.Wait()
		if r.calls.Load() != 1 {
			t.Fatalf("%d TokenReviews", r.calls.Load())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		tc := New(10*time.Second, clock.Now)
		r := &reviewer{status: ok}
		for i := range maxCachedTokens + 100 {
			_, _, _ = tc.Review(ctx, fmt.Sprint("tok-", i), r.create)
		}
		if n := len(tc.entries); n > maxCachedTokens {
			t.Fatalf("%d entries, bound %d", n, maxCachedTokens)
		}
	})
	t.Run("off", func(t *testing.T) {
		tc := New(-1, clock.Now)
		r := &reviewer{status: ok}
		_, _, _ = tc.Review(ctx, "tok", r.create)
		_, _, _ = tc.Review(ctx, "tok", r.create)
		if r.calls.Load() != 2 || len(tc.entries) != 0 {
			t.Fatalf("%d TokenReviews, %d entries", r.calls.Load(), len(tc.entries))
		}
	})
}

func TestJWTExpiry(t *testing.T) {
	exp := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{jwtWithExp(exp), true},
		{"not-a-jwt", false},
		{"a.b", false},
		{"a.!!!.c", false},
		{"a." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":"soon"}`)) + ".c", false},
		{"a." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + ".c", false},
		{"a." + base64.RawURLEncoding.EncodeToString([]byte(`[1]`)) + ".c", false},
	} {
		got, ok := jwtExpiry(tc.token)
		if ok != tc.ok || (ok && !got.Equal(exp)) {
			t.Errorf("%q: %v %v", tc.token, got, ok)
		}
	}
}

// TestTokenCacheWaiterOutlivesAFailedFlight: a caller that waited on another's TokenReview
// does not inherit that one's failure (its deadline, an outage since over): it asks itself.
func TestTokenCacheWaiterOutlivesAFailedFlight(t *testing.T) {
	tc := New(10*time.Second, time.Now)
	release := make(chan struct{})
	first := func(context.Context) (authenticationv1.TokenReviewStatus, error) {
		<-release
		return authenticationv1.TokenReviewStatus{}, context.DeadlineExceeded
	}
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := tc.Review(context.Background(), "tok", first)
		firstDone <- err
	}()
	for {
		tc.mu.Lock()
		n := len(tc.inflight)
		tc.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r := &reviewer{status: authenticationv1.TokenReviewStatus{Authenticated: true}}
	second := make(chan error, 1)
	go func() {
		st, _, err := tc.Review(context.Background(), "tok", r.create)
		if err == nil && !st.Authenticated {
			err = errors.New("not authenticated")
		}
		second <- err
	}()
	time.Sleep(20 * time.Millisecond) // the second caller waits on the first's flight
	close(release)
	if err := <-firstDone; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first: %v", err)
	}
	if err := <-second; err != nil || r.calls.Load() != 1 {
		t.Fatalf("second: %v after %d TokenReviews of its own", err, r.calls.Load())
	}
}
