package ratelimit

import (
	"strings"
	"testing"
	"time"
)

// TestDecide: the refusal a rule's limit gives, in words and wait. A call within the limit is
// let through (nil); over it, the wait is rounded up to whole seconds and capped at the period,
// and the message names the rule and whose calls are limited; a bucket beyond the Set's bound
// and a limit that cannot be enforced are refused with no wait, never let through.
func TestDecide(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s := New(Options{Now: c.now, MaxBuckets: 2, MaxBucketsPerAgent: 2})
	k := Key{Policy: "p", Rule: "r", Server: "srv", Tool: "search", Agent: "a"}

	three := Limit{Calls: 3, Period: 10 * time.Second, Burst: 1} // one call per 3.33s
	if r := s.Decide(k, three, "r", false); r != nil {
		t.Fatalf("first call refused: %+v", r)
	}
	r := s.Decide(k, three, "r", false)
	if r == nil || r.Wait != 4*time.Second {
		t.Fatalf("over the limit: %+v, want a wait of 4s (3.33s rounded up)", r)
	}
	if !strings.Contains(r.Message, "Rule r allows this agent's calls of the tool at most 3 per 10s (bursts of 1)") ||
		!strings.Contains(r.Message, "Retry after 4s") {
		t.Fatalf("message = %q", r.Message)
	}

	// A wait longer than the period (a burst of one per hour, period a minute) is capped.
	shared := Key{Policy: "p", Rule: "r", Server: "srv", Tool: "pay"}
	odd := Limit{Calls: 1, Period: time.Minute, Burst: 1}
	if r := s.Decide(shared, odd, "r", true); r != nil {
		t.Fatalf("first shared call refused: %+v", r)
	}
	r = s.Decide(shared, odd, "r", true)
	if r == nil || r.Wait != time.Minute || !strings.Contains(r.Message, "allows the tool's calls at most 1 per 1m0s") {
		t.Fatalf("shared bucket over the limit: %+v", r)
	}

	// The Set holds two buckets, neither full again: a third key is refused, with no wait.
	r = s.Decide(Key{Policy: "p", Rule: "r", Server: "srv", Tool: "third", Agent: "b"}, three, "r", false)
	if r == nil || r.Wait != 0 || !strings.Contains(r.Message, "as many rate-limit buckets as it allows") {
		t.Fatalf("beyond the bound: %+v", r)
	}

	// A limit that cannot be enforced refuses.
	r = s.Decide(k, Limit{}, "r", false)
	if r == nil || r.Wait != 0 || !strings.Contains(r.Message, "cannot be enforced") {
		t.Fatalf("invalid limit: %+v", r)
	}
}
