package boltstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// TestConsumeRace: plain Consume (no dispatch record, so nothing but the authority's own state
// can refuse the loser) raced by 32 goroutines per authority, released together. Exactly one
// consume per authority succeeds, every other is ErrConsumed, and the stored authority names
// the winner. Goroutines whose read before the write transaction saw the authority unconsumed
// are stopped only by the compare-and-swap re-check inside that transaction.
func TestConsumeRace(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	const n, workers = 40, 32
	auths := f.issueN(t, s, n)
	for _, a := range auths {
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			mu    sync.Mutex
			won   []string
			lost  int
			other []error
		)
		for range workers {
			wg.Go(func() {
				op := journal.NewOperationID()
				<-start
				rec, err := s.Consume(context.Background(), a.ID, a.Binding, authority.Consumption{OperationID: op})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && rec.State == authority.StateConsumed && rec.ConsumedBy == op:
					won = append(won, op)
				case errors.Is(err, authority.ErrConsumed):
					lost++
				default:
					other = append(other, fmt.Errorf("%+v, %w", rec, err))
				}
			})
		}
		close(start)
		wg.Wait()
		if len(other) > 0 {
			t.Fatalf("%s: %d unexpected results, first: %v", a.ID, len(other), other[0])
		}
		if len(won) != 1 || lost != workers-1 {
			t.Fatalf("%s: %d consumes succeeded and %d were refused as consumed; want 1 and %d", a.ID, len(won), lost, workers-1)
		}
		got, err := s.Get(context.Background(), a.Binding.Namespace, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != authority.StateConsumed || got.ConsumedBy != won[0] {
			t.Fatalf("%s stored as %s by %q, want consumed by the winner %q", a.ID, got.State, got.ConsumedBy, won[0])
		}
	}
}

// TestOpensWithFsync: every commit is fsync'ed (package documentation): the bbolt handle of an
// exclusive and of a shared owner opens with NoSync and NoGrowSync off, and not read-only, so
// a commit returns only after fdatasync. (What the OS loses in a power cut cannot be staged in
// a test; TestCrashAfterConsumeBeforeInvoke covers a process killed after a commit returned.)
func TestOpensWithFsync(t *testing.T) {
	if o := boltOptions(DefaultOpenTimeout); o.NoSync || o.NoGrowSync || o.ReadOnly {
		t.Fatalf("boltOptions: NoSync %v, NoGrowSync %v, ReadOnly %v; want all false", o.NoSync, o.NoGrowSync, o.ReadOnly)
	}
	for _, tc := range []struct {
		name string
		mod  []func(*Options)
	}{{"exclusive", nil}, {"shared owner", []func(*Options){shared}}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t, tc.mod...)
			if s.own == nil {
				t.Fatal("the first opener does not own the file")
			}
			db := s.own.db
			if db.NoSync || db.NoGrowSync || db.IsReadOnly() {
				t.Fatalf("bbolt handle: NoSync %v, NoGrowSync %v, read-only %v; want all false", db.NoSync, db.NoGrowSync, db.IsReadOnly())
			}
		})
	}
}
