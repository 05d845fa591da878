package envelope

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is an injected clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 10, 13, 9, 0, 0, 0, time.UTC)} }

func exampleEnvelope(t testing.TB) *Envelope {
	t.Helper()
	env, err := Parse(exampleRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestRegistryResolvesOnceAndRecordsPrincipal(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	reg := NewMemoryRegistry(clock.now)
	env := exampleEnvelope(t)
	rec, err := reg.Emit(ctx, env, EmitOptions{Principal: "alice", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Resolved() || !rec.EmittedAt.Equal(clock.now()) || !rec.ExpiresAt.Equal(clock.now().Add(time.Hour)) {
		t.Fatalf("emitted record %+v", rec)
	}
	clock.advance(time.Minute)
	res := &Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption, OptionIdx: 0}
	rec, err = reg.Resolve(ctx, res, "alice")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if !rec.Resolved() || rec.ResolvedBy != "alice" || !rec.ResolvedAt.Equal(clock.now()) || *rec.Resolution != *res {
		t.Fatalf("resolved record %+v", rec)
	}
	// A replay of the same resolution, or a different one, is refused (§12.5) and the
	// recorded resolution stays what it was.
	for _, again := range []*Resolution{res, {EnvelopeDigest: env.Digest(), Kind: KindOption, OptionIdx: 1}, {EnvelopeDigest: env.Digest(), Kind: KindDeclined}} {
		if _, err := reg.Resolve(ctx, again, "alice"); !HasCode(err, CodeResAlreadyResolved) {
			t.Errorf("replay %v: err %v", again, err)
		}
	}
	got, err := reg.Get(ctx, env.Digest())
	if err != nil || got.Resolution.OptionIdx != 0 || got.Resolution.Kind != KindOption || got.ResolvedBy != "alice" {
		t.Fatalf("Get after replay: %+v %v", got, err)
	}
	// Records handed out are copies.
	got.Resolution.OptionIdx = 1
	if again, _ := reg.Get(ctx, env.Digest()); again.Resolution.OptionIdx != 0 {
		t.Error("a returned record aliases the registry's state")
	}
}

func TestRegistryRefusals(t *testing.T) {
	ctx := context.Background()
	env := exampleEnvelope(t)
	other, err := Parse(mutate(t, func(m map[string]any) { m["synopsis"] = "Share only the travel dates." }))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opts      EmitOptions
		advance   time.Duration
		res       Resolution
		principal string
		code      Code
	}{
		{"unknown envelope", EmitOptions{}, 0, Resolution{EnvelopeDigest: other.Digest(), Kind: KindDeclined}, "alice", CodeResUnknownEnvelope},
		{"no principal", EmitOptions{}, 0, Resolution{EnvelopeDigest: env.Digest(), Kind: KindDeclined}, "", CodeResNoPrincipal},
		{"wrong principal", EmitOptions{Principal: "alice"}, 0, Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption}, "agent-sa", CodeResWrongPrincipal},
		{"expired", EmitOptions{TTL: time.Minute}, time.Minute, Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption}, "alice", CodeResExpired},
		{"option out of range", EmitOptions{}, 0, Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption, OptionIdx: 3}, "alice", CodeResOptionIdx},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			reg := NewMemoryRegistry(clock.now)
			if _, err := reg.Emit(ctx, env, tt.opts); err != nil {
				t.Fatal(err)
			}
			clock.advance(tt.advance)
			if _, err := reg.Resolve(ctx, &tt.res, tt.principal); !HasCode(err, tt.code) {
				t.Fatalf("Resolve err = %v, want %s", err, tt.code)
			}
			// A refused resolution consumes nothing.
			rec, err := reg.Get(ctx, env.Digest())
			if err != nil || rec.Resolved() {
				t.Fatalf("after refusal: %+v %v", rec, err)
			}
		})
	}
	t.Run("just before expiry", func(t *testing.T) {
		clock := newClock()
		reg := NewMemoryRegistry(clock.now)
		if _, err := reg.Emit(ctx, env, EmitOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Minute - time.Nanosecond)
		if _, err := reg.Resolve(ctx, &Resolution{EnvelopeDigest: env.Digest(), Kind: KindQuestion}, "bob"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRegistryRefusesReEmission(t *testing.T) {
	// Two byte-identical envelopes share a digest (§12.5): a second emission would let the
	// first one's resolution resolve it, so it is refused, resolved or not.
	ctx := context.Background()
	reg := NewMemoryRegistry(newClock().now)
	env := exampleEnvelope(t)
	if _, err := reg.Emit(ctx, env, EmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Emit(ctx, exampleEnvelope(t), EmitOptions{}); !errors.Is(err, ErrAlreadyEmitted) {
		t.Fatalf("second emit: %v", err)
	}
	if _, err := reg.Resolve(ctx, &Resolution{EnvelopeDigest: env.Digest(), Kind: KindDeclined}, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Emit(ctx, env, EmitOptions{}); !errors.Is(err, ErrAlreadyEmitted) {
		t.Fatalf("emit after resolution: %v", err)
	}
	if _, err := reg.Get(ctx, exampleActionA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	if _, err := reg.Emit(ctx, nil, EmitOptions{}); err == nil {
		t.Fatal("nil envelope emitted")
	}
}

func TestRegistryFailsClosedOnCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	reg := NewMemoryRegistry(newClock().now)
	env := exampleEnvelope(t)
	if _, err := reg.Emit(ctx, env, EmitOptions{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := reg.Resolve(ctx, &Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption}, "alice"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve with cancelled context: %v", err)
	}
	rec, _ := reg.Get(context.Background(), env.Digest())
	if rec.Resolved() {
		t.Fatal("resolved under a cancelled context")
	}
}

func TestRegistryConcurrentResolutionsOneWins(t *testing.T) {
	ctx := context.Background()
	reg := NewMemoryRegistry(newClock().now)
	env := exampleEnvelope(t)
	if _, err := reg.Emit(ctx, env, EmitOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 32
	var wins, replays atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			who := fmt.Sprintf("principal-%d", i)
			_, err := reg.Resolve(ctx, &Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption, OptionIdx: i % 2}, who)
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(who)
			case HasCode(err, CodeResAlreadyResolved):
				replays.Add(1)
			default:
				t.Errorf("unexpected %v", err)
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 || replays.Load() != n-1 {
		t.Fatalf("wins %d replays %d", wins.Load(), replays.Load())
	}
	rec, _ := reg.Get(ctx, env.Digest())
	if rec.ResolvedBy != winner.Load().(string) {
		t.Fatalf("recorded %q, winner %q", rec.ResolvedBy, winner.Load())
	}
}
