package boltstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/journal"
)

var allStates = []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateInvoked,
	journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate}

// TestInFlightStatesMatchJournal: RecoverOnStart reads only inFlightStates through the index, so
// they must be exactly the states journal.Recover changes.
func TestInFlightStatesMatchJournal(t *testing.T) {
	for _, st := range allStates {
		if st.InFlight() != slices.Contains(inFlightStates, st) {
			t.Errorf("%s: journal InFlight=%v, inFlightStates says %v", st, st.InFlight(), !st.InFlight())
		}
	}
}

// checkInState compares InState for every state with want (operation → state), including the
// order (oldest CreatedAt first).
func checkInState(t *testing.T, s *Store, want map[string]journal.State, created map[string]time.Time) {
	t.Helper()
	for _, st := range allStates {
		recs, err := s.InState(ctx, st)
		if err != nil {
			t.Fatalf("InState(%s): %v", st, err)
		}
		var got, exp []string
		for _, r := range recs {
			if r.State != st {
				t.Fatalf("InState(%s) returned %s in state %s", st, r.OperationID, r.State)
			}
			got = append(got, r.OperationID)
		}
		for op, s := range want {
			if s == st {
				exp = append(exp, op)
			}
		}
		slices.SortFunc(exp, func(a, b string) int { return created[a].Compare(created[b]) })
		if !slices.Equal(got, exp) {
			t.Fatalf("InState(%s) = %v, want %v", st, got, exp)
		}
	}
}

// TestStateIndexFollowsTransitions: records begun in CONSUMED or DISPATCH_PENDING are moved
// through random valid paths; after every step InState of every state lists exactly the records
// in it, oldest first, and so it does after a reopen and after RecoverOnStart.
func TestStateIndexFollowsTransitions(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	rng := rand.New(rand.NewPCG(7, 7))
	want := map[string]journal.State{}
	created := map[string]time.Time{}
	evidence := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("resp")}
	var ops []string
	for i := range 24 {
		f.clock.Advance(time.Millisecond) // distinct CreatedAt, in begin order
		rec := pendingFor(f.sign(t, i), fmt.Sprintf("op-%02d", i))
		rec.State = []journal.State{journal.StateConsumed, journal.StateDispatchPending}[i%2]
		r, err := s.Begin(ctx, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[rec.OperationID], created[rec.OperationID] = r.State, r.CreatedAt
		ops = append(ops, rec.OperationID)
	}
	checkInState(t, s, want, created)
	next := map[journal.State][]journal.State{
		journal.StateConsumed:        {journal.StateDispatchPending},
		journal.StateDispatchPending: {journal.StateInvoked, journal.StateIndeterminate, journal.StateFailed},
		journal.StateInvoked:         {journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate},
	}
	for range 60 {
		op := ops[rng.IntN(len(ops))]
		choices := next[want[op]]
		if len(choices) == 0 {
			continue // terminal or INDETERMINATE
		}
		to := choices[rng.IntN(len(choices))]
		o := journal.Outcome{}
		switch {
		case to.Terminal():
			o = evidence
		case to == journal.StateIndeterminate:
			o = journal.Outcome{Reason: "timeout_after_dispatch"}
		}
		f.clock.Advance(time.Millisecond)
		if _, err := s.Transition(ctx, op, to, o); err != nil {
			t.Fatalf("%s %s → %s: %v", op, want[op], to, err)
		}
		want[op] = to
		checkInState(t, s, want, created)
	}
	// An idempotent repeat of the last step of a terminal record leaves the index as it was.
	for _, op := range ops {
		if want[op] == journal.StateExecuted {
			if _, err := s.Transition(ctx, op, journal.StateExecuted, evidence); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	checkInState(t, s, want, created)
	s.Close()

	s2 := f.open(t)
	checkInState(t, s2, want, created)
	n, err := s2.RecoverOnStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recovered := 0
	for op, st := range want {
		if st.InFlight() {
			want[op] = journal.StateIndeterminate
			recovered++
		}
	}
	if n != recovered {
		t.Fatalf("RecoverOnStart promoted %d, want %d", n, recovered)
	}
	checkInState(t, s2, want, created)
}

// TestMigrateSchema1: a file written before the state index (schema 1: no dispatch_by_state) is
// indexed when opened, and reads as before; the file then records schema 2.
func TestMigrateSchema1(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	want := map[string]journal.State{}
	created := map[string]time.Time{}
	evidence := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("resp")}
	for i, path := range [][]journal.State{
		nil,
		{journal.StateInvoked},
		{journal.StateInvoked, journal.StateExecuted},
		{journal.StateFailed},
		{journal.StateIndeterminate},
		{journal.StateInvoked, journal.StateIndeterminate},
	} {
		f.clock.Advance(time.Millisecond)
		rec := pendingFor(f.sign(t, i), fmt.Sprintf("op-%d", i))
		rec.State = journal.StateDispatchPending
		r, err := s.Begin(ctx, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		created[rec.OperationID] = r.CreatedAt
		for _, st := range path {
			o := journal.Outcome{Reason: "timeout_after_dispatch"}
			if st.Terminal() {
				o = evidence
			}
			if _, err := s.Transition(ctx, rec.OperationID, st, o); err != nil {
				t.Fatal(err)
			}
		}
		want[rec.OperationID] = journal.StateDispatchPending
		if len(path) > 0 {
			want[rec.OperationID] = path[len(path)-1]
		}
	}
	s.Close()
	editFile(t, f.path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketByState); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(schemaVersion1))
	})
	if _, err := ReadSnapshot(f.path, time.Second); err != nil {
		t.Fatalf("a schema 1 file is no longer readable as a backup: %v", err)
	}

	s2 := f.open(t)
	checkInState(t, s2, want, created)
	if n, err := s2.RecoverOnStart(ctx); err != nil || n != 2 {
		t.Fatalf("RecoverOnStart after migration: %d, %v (want 2: op-0 and op-1 in flight)", n, err)
	}
	want["op-0"], want["op-1"] = journal.StateIndeterminate, journal.StateIndeterminate
	checkInState(t, s2, want, created)
	s2.Close()
	editFile(t, f.path, func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != schemaVersion {
			return fmt.Errorf("schema after migration %q, want %q", v, schemaVersion)
		}
		return nil
	})
}

// TestStateIndexCorruption: an index that disagrees with the records is reported (the store is
// unavailable: the caller fails closed), never read past.
func TestStateIndexCorruption(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(tx *bolt.Tx) error
	}{
		{"key without a record", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketByState).Put(stateKey(journal.StateIndeterminate, t0, "op-ghost"), []byte{})
		}},
		{"key in the wrong state", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketByState).Put(stateKey(journal.StateIndeterminate, t0, "op-1"), []byte{})
		}},
		{"short key", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketByState).Put(append(statePrefix(journal.StateIndeterminate), 1, 2), []byte{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t)
			rec := pendingFor(f.sign(t, 1), "op-1")
			rec.State = journal.StateDispatchPending
			if _, err := s.Begin(ctx, rec, nil); err != nil {
				t.Fatal(err)
			}
			s.Close()
			editFile(t, f.path, c.edit)
			s2 := f.open(t)
			if recs, err := s2.InState(ctx, journal.StateIndeterminate); err == nil {
				t.Fatalf("InState over a corrupt index: %v, no error", recs)
			}
		})
	}
}

// editFile changes a closed store file with bbolt directly.
func editFile(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkInState lists the INDETERMINATE records (what the reconciliation settler does every
// interval) of a journal holding n settled records and 10 INDETERMINATE ones.
func BenchmarkInState(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("settled=%d", n), func(b *testing.B) {
			f := newFixture(b)
			s := f.open(b)
			evidence := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("resp")}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for w := range 64 {
				wg.Go(func() {
					for i := w; i < n+10; i += 64 {
						rec := pendingFor(f.sign(b, i), fmt.Sprintf("op-%06d", i))
						rec.State = journal.StateDispatchPending
						if _, err := s.Begin(context.Background(), rec, nil); err != nil {
							errs <- err
							return
						}
						to, o := journal.StateExecuted, evidence
						if i >= n {
							to, o = journal.StateIndeterminate, journal.Outcome{Reason: "timeout_after_dispatch"}
						}
						if _, err := s.Transition(context.Background(), rec.OperationID, to, o); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			for b.Loop() {
				recs, err := s.InState(ctx, journal.StateIndeterminate)
				if err != nil || len(recs) != 10 {
					b.Fatalf("%d records, %v", len(recs), err)
				}
			}
		})
	}
}

// TestInStateSince: only the records created at or after since, oldest first; a zero since is
// InState.
func TestInStateSince(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	var created []time.Time
	for i := range 10 {
		f.clock.Advance(time.Second)
		rec := pendingFor(f.sign(t, i), fmt.Sprintf("op-%d", i))
		rec.State = journal.StateDispatchPending
		r, err := s.Begin(ctx, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, r.CreatedAt)
	}
	for _, c := range []struct {
		since time.Time
		want  int // the first operation listed
	}{
		{time.Time{}, 0},
		{created[0].Add(-time.Hour), 0},
		{created[4], 4},
		{created[4].Add(time.Nanosecond), 5},
		{created[9].Add(time.Nanosecond), 10},
	} {
		recs, err := s.InStateSince(ctx, journal.StateDispatchPending, c.since)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.OperationID)
		}
		var want []string
		for i := c.want; i < 10; i++ {
			want = append(want, fmt.Sprintf("op-%d", i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("since %v: %v, want %v", c.since, got, want)
		}
	}
	if recs, err := s.InStateSince(ctx, journal.StateExecuted, time.Time{}); err != nil || len(recs) != 0 {
		t.Fatalf("another state: %v, %v", recs, err)
	}
}

// errRollback ends a fuzz iteration's transaction without committing it.
var errRollback = errors.New("rollback")

// FuzzStateIndex: whatever key the state index holds (the file is read back as untrusted bytes,
// as in FuzzStoredRecords), reading a state through it returns an error or only records that
// are in that state, from since on; never a panic.
func FuzzStateIndex(f *testing.F) {
	fx := newFixture(f)
	s, err := Open(fx.path, fx.options())
	if err != nil {
		f.Fatal(err)
	}
	for i, st := range []journal.State{journal.StateDispatchPending, journal.StateDispatchPending} {
		fx.clock.Advance(time.Second)
		rec := pendingFor(fx.sign(f, i), fmt.Sprintf("op-%d", i))
		rec.State = st
		if _, err := s.Begin(ctx, rec, nil); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := s.Transition(ctx, "op-1", journal.StateIndeterminate, journal.Outcome{Reason: "timeout_after_dispatch"}); err != nil {
		f.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(fx.path, 0o600, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	f.Add(stateKey(journal.StateIndeterminate, t0, "op-0"), int64(0))
	f.Add(stateKey(journal.StateDispatchPending, t0, "op-ghost"), t0.UnixNano())
	f.Add(append(statePrefix(journal.StateExecuted), 1), int64(-1))
	f.Add([]byte{0}, int64(1))
	f.Fuzz(func(t *testing.T, key []byte, sinceNS int64) {
		if len(key) == 0 || len(key) > bolt.MaxKeySize {
			return
		}
		since := time.Unix(0, sinceNS)
		err := db.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketByState).Put(key, []byte{}); err != nil {
				return err
			}
			for _, st := range allStates {
				recs, err := recordsInState(tx, st, since)
				if err != nil {
					if !errors.Is(err, journal.ErrUnavailable) {
						t.Fatalf("%s: error %v is not unavailable", st, err)
					}
					continue
				}
				for _, r := range recs {
					if r.State != st {
						t.Fatalf("%s: returned %s in state %s", st, r.OperationID, r.State)
					}
				}
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
	})
}
