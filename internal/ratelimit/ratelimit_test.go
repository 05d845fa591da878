package ratelimit

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestTakeBucket: a bucket lets burst calls through at once, then refuses with the time until
// the next call, refilled at calls per period; agents and tools have buckets of their own.
func TestTakeBucket(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := New(Options{Now: c.now})
	l := Limit{Calls: 2, Period: time.Minute, Burst: 3}
	k := Key{Policy: "billing/payments", Rule: "money", Server: "payments", Tool: "send_payment", Agent: "a"}
	for i := range 3 {
		if d, err := s.Take(k, l); d != 0 || err != nil {
			t.Fatalf("call %d of the burst: wait %s, %v", i+1, d, err)
		}
	}
	d, err := s.Take(k, l)
	if err != nil || d != 30*time.Second {
		t.Fatalf("over the burst: wait %s, %v; want 30s (2 calls per minute)", d, err)
	}
	// Another agent, and another tool, have full buckets.
	if d, _ := s.Take(Key{Policy: k.Policy, Rule: k.Rule, Server: k.Server, Tool: k.Tool, Agent: "b"}, l); d != 0 {
		t.Fatalf("another agent waits %s", d)
	}
	if d, _ := s.Take(Key{Policy: k.Policy, Rule: k.Rule, Server: k.Server, Tool: "refund", Agent: "a"}, l); d != 0 {
		t.Fatalf("another tool waits %s", d)
	}
	// A refused call takes nothing: after 30s exactly one call runs.
	c.add(30 * time.Second)
	if d, _ := s.Take(k, l); d != 0 {
		t.Fatalf("after the refill: wait %s", d)
	}
	if d, _ := s.Take(k, l); d != 30*time.Second {
		t.Fatalf("right after: wait %s, want 30s", d)
	}
	// A policy that lowers the limit applies to the existing bucket.
	c.add(time.Hour)
	low := Limit{Calls: 1, Period: time.Hour, Burst: 1}
	if d, _ := s.Take(k, low); d != 0 {
		t.Fatalf("first call under the new limit: wait %s", d)
	}
	if d, _ := s.Take(k, low); d != time.Hour {
		t.Fatalf("second call under the new limit: wait %s, want 1h", d)
	}
}

// TestTakeBounds: the buckets an agent can make by naming tools are bounded per agent and in
// all; full buckets are dropped to make room (nothing is lost: a full bucket is a new one),
// and when none can be dropped the call is refused with ErrBound, never let through.
func TestTakeBounds(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := New(Options{Now: c.now, MaxBuckets: 6, MaxBucketsPerAgent: 3})
	l := Limit{Calls: 1, Period: time.Minute, Burst: 1}
	key := func(agent string, i int) Key {
		return Key{Policy: "p", Rule: "r", Server: "s", Tool: fmt.Sprint("t", i), Agent: agent}
	}
	for i := range 3 {
		if d, err := s.Take(key("a", i), l); d != 0 || err != nil {
			t.Fatalf("tool %d: %s %v", i, d, err)
		}
	}
	if _, err := s.Take(key("a", 3), l); !errors.Is(err, ErrBound) {
		t.Fatalf("a fourth bucket for agent a: %v, want ErrBound", err)
	}
	// Other agents still get theirs, up to the total.
	for i := range 3 {
		if d, err := s.Take(key("b", i), l); d != 0 || err != nil {
			t.Fatalf("agent b tool %d: %s %v", i, d, err)
		}
	}
	if _, err := s.Take(key("c", 0), l); !errors.Is(err, ErrBound) {
		t.Fatalf("a seventh bucket: %v, want ErrBound", err)
	}
	if s.Len() != 6 {
		t.Fatalf("%d buckets, want 6", s.Len())
	}
	// Once the buckets are full again they make room.
	c.add(time.Minute)
	if d, err := s.Take(key("c", 0), l); d != 0 || err != nil {
		t.Fatalf("after the refill: %s %v", d, err)
	}
	if s.Len() != 1 {
		t.Fatalf("%d buckets after dropping the full ones, want 1", s.Len())
	}
	// An invalid limit never lets a call through.
	if _, err := s.Take(key("a", 0), Limit{}); err == nil {
		t.Fatalf("an invalid limit: no error")
	}
}

// TestTakeConcurrent: many callers on one bucket get exactly its burst through.
func TestTakeConcurrent(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := New(Options{Now: c.now})
	l := Limit{Calls: 1, Period: time.Hour, Burst: 20}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for range 64 {
		wg.Go(func() {
			if d, err := s.Take(Key{Tool: "x", Agent: "a"}, l); d == 0 && err == nil {
				mu.Lock()
				ran++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ran != 20 {
		t.Fatalf("%d of 64 concurrent calls ran, want the burst of 20", ran)
	}
}
