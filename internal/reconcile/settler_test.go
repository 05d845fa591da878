package reconcile

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/test/testutil"
)

// indeterminate writes a record of operation op to upstream and leaves it INDETERMINATE, as a
// dispatch whose answer was lost does.
func indeterminate(t *testing.T, j journal.Journal, op, upstream string) {
	t.Helper()
	ctx := context.Background()
	rec := journal.DispatchRecord{OperationID: op, ActID: "act-" + op, AuthorityID: "auth-" + op, ActionDigest: digestA,
		ArgumentsDigest: digestB, Upstream: upstream, Tool: "send_payment", State: journal.StateDispatchPending}
	if _, err := j.Begin(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Transition(ctx, op, journal.StateIndeterminate, journal.Outcome{}); err != nil {
		t.Fatal(err)
	}
}

func states(t *testing.T, j journal.Journal, ops ...string) map[string]journal.State {
	t.Helper()
	out := map[string]journal.State{}
	for _, op := range ops {
		rec, err := j.Record(context.Background(), op)
		if err != nil {
			t.Fatal(err)
		}
		out[op] = rec.State
	}
	return out
}

// TestSettler: a Settler over a real bbolt journal and a real TLS endpoint settles exactly the
// records whose answer is authenticated, matching, fresh and terminal (EXECUTED, FAILED), with
// the answer's evidence digest; every other finding (UNKNOWN, a wrong MAC, another action, an
// observation older than the act, no endpoint) leaves the record INDETERMINATE and is asked
// again only after its backoff (action-evidence-boundary, "Perform Authenticated
// Reconciliation").
func TestSettler(t *testing.T) {
	const withEndpoint, without = "https://payments.example/mcp", "https://other.example/mcp"
	j, _ := testutil.SeededStore(t, "settler tests")
	ops := []string{"op-exec", "op-fail", "op-unknown", "op-badmac", "op-mismatch", "op-stale", "op-none"}
	for _, op := range ops {
		up := withEndpoint
		if op == "op-none" {
			up = without
		}
		indeterminate(t, j, op, up)
	}
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	asked := map[string]int{}
	e := newEndpoint(t, func(w http.ResponseWriter, q Query) {
		mu.Lock()
		asked[q.OperationID]++
		at := clock
		mu.Unlock()
		a := answerFor(q, OutcomeExecuted, at)
		key := testKey
		switch q.OperationID {
		case "op-fail":
			a.Outcome = OutcomeFailed
		case "op-unknown":
			a.Outcome = OutcomeUnknown
		case "op-badmac":
			key = otherKey
		case "op-mismatch":
			a.ActionDigest = digestB
		case "op-stale":
			a.ObservedAt = at.Add(-time.Hour) // before the act existed
		}
		signed(t, w, key, a)
	})
	var results []string
	var settled []string
	s := &Settler{
		Journal: j, Agent: "agent-1", SinkID: "actgate-local", Now: now,
		Endpoint: func(upstream string) (string, Endpoint, bool) {
			if upstream != withEndpoint {
				return "", Endpoint{}, false
			}
			return "payments", e.ep(testKey), true
		},
		Observe: func(r string) { results = append(results, r) },
		Settled: func(rec journal.DispatchRecord, v Verdict) {
			settled = append(settled, rec.OperationID)
			if rec.EvidenceDigest != string(v.EvidenceDigest) || rec.Reason != journal.ReasonAuthenticatedReconciliation {
				t.Errorf("%s settled with evidence %q reason %q, verdict %+v", rec.OperationID, rec.EvidenceDigest, rec.Reason, v)
			}
		},
	}
	n, err := s.RunOnce(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("RunOnce settled %d, err %v; want 2", n, err)
	}
	want := map[string]journal.State{
		"op-exec": journal.StateExecuted, "op-fail": journal.StateFailed, "op-unknown": journal.StateIndeterminate,
		"op-badmac": journal.StateIndeterminate, "op-mismatch": journal.StateIndeterminate,
		"op-stale": journal.StateIndeterminate, "op-none": journal.StateIndeterminate,
	}
	if got := states(t, j, ops...); !maps.Equal(got, want) {
		t.Fatalf("journal states %v, want %v", got, want)
	}
	sort.Strings(results)
	if got, w := results, []string{"Executed", "Failed", "Mismatch", ResultNotConfigured, "Stale", "Unauthenticated", "Unknown"}; !slices.Equal(got, w) {
		t.Fatalf("observed %v, want %v", got, w)
	}
	sort.Strings(settled)
	if !slices.Equal(settled, []string{"op-exec", "op-fail"}) {
		t.Fatalf("settled %v", settled)
	}
	if asked["op-none"] != 0 || len(asked) != 6 {
		t.Fatalf("endpoint asked %v", asked)
	}

	// Nothing is due again before its backoff; after it, only the unsettled ones are asked.
	if n, _ := s.RunOnce(context.Background()); n != 0 || asked["op-unknown"] != 1 {
		t.Fatalf("second pass at once: settled %d, asked %v", n, asked)
	}
	advance(DefaultSettleBackoff + time.Second)
	if n, _ := s.RunOnce(context.Background()); n != 0 {
		t.Fatalf("third pass settled %d", n)
	}
	if asked["op-unknown"] != 2 || asked["op-exec"] != 1 || asked["op-none"] != 0 {
		t.Fatalf("after the backoff the endpoint was asked %v", asked)
	}
	// A settled record is never reconciled again.
	if _, err := j.Reconcile(context.Background(), "op-exec", journal.Reconciliation{Authenticated: true, OperationID: "op-exec",
		ActionDigest: digestA, Upstream: withEndpoint, Outcome: journal.StateFailed, EvidenceDigest: digestB}); err == nil {
		t.Fatal("the journal let an EXECUTED record be reconciled to FAILED")
	}
}

// TestBackoffAfter: attempts are spaced base·2^(n-1), capped.
func TestBackoffAfter(t *testing.T) {
	for _, tc := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{0, time.Hour, 1, DefaultSettleBackoff},
		{time.Second, time.Hour, 1, time.Second},
		{time.Second, time.Hour, 4, 8 * time.Second},
		{time.Second, 5 * time.Second, 10, 5 * time.Second},
	} {
		if got := BackoffAfter(tc.base, tc.limit, tc.n); got != tc.want {
			t.Errorf("BackoffAfter(%v, %v, %d) = %v, want %v", tc.base, tc.limit, tc.n, got, tc.want)
		}
	}
}
