package sidecar

import (
	"fmt"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/journal"
)

// TestRetriesWindowAndSession: a settled dispatch answers a retry only in its own session and
// only while its authority is unexpired; unsettled states are never recorded; the sweep drops
// expired entries and keeps live ones.
func TestRetriesWindowAndSession(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := newRetries()
	k := actionKey{"sha256:a", "https://pay.example/mcp"}
	mine := func(id string) bool { return id == "act-1" }
	r.add(k, settledDispatch{actID: "act-1", state: journal.StateExecuted, expires: t0.Add(time.Minute)}, t0)
	r.add(k, settledDispatch{actID: "act-2", state: journal.StateIndeterminate, expires: t0.Add(time.Minute)}, t0)
	r.add(k, settledDispatch{actID: "act-1", state: journal.StateFailed, expires: t0}, t0) // already expired
	if d, ok := r.lookup(k, t0.Add(30*time.Second), mine); !ok || d.actID != "act-1" || d.state != journal.StateExecuted {
		t.Fatalf("lookup in the window: %+v %v", d, ok)
	}
	if _, ok := r.lookup(k, t0.Add(30*time.Second), func(id string) bool { return id == "act-2" }); ok {
		t.Fatal("an INDETERMINATE dispatch was recorded as settled")
	}
	if _, ok := r.lookup(k, t0.Add(30*time.Second), func(string) bool { return false }); ok {
		t.Fatal("another session's dispatch answered the retry")
	}
	if _, ok := r.lookup(k, t0.Add(time.Minute), mine); ok {
		t.Fatal("answered after the authority expired")
	}
	if _, ok := r.lookup(actionKey{"sha256:b", k.destination}, t0, mine); ok {
		t.Fatal("answered for another action")
	}
	// Sweep: past minRetrySweep keys, expired entries go and live ones stay.
	for i := range minRetrySweep {
		r.add(actionKey{fmt.Sprintf("sha256:%d", i), k.destination}, settledDispatch{actID: "x", state: journal.StateExecuted, expires: t0.Add(time.Second)}, t0)
	}
	r.sweepAt = len(r.m) // the next add sweeps
	r.add(actionKey{"sha256:late", k.destination}, settledDispatch{actID: "act-1", state: journal.StateExecuted, expires: t0.Add(time.Hour)}, t0.Add(2*time.Second))
	if n := len(r.m); n > 2 {
		t.Fatalf("%d keys after the sweep, want the 2 live ones", n)
	}
	if _, ok := r.lookup(actionKey{"sha256:late", k.destination}, t0.Add(time.Minute), mine); !ok {
		t.Fatal("live entry lost")
	}
}
