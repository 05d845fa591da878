package boltstore

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// TestIssueConsumeAndPend: a freshly signed authority is stored already CONSUMED by the record's
// operation, with the DISPATCH_PENDING record and its receipt, in one call; afterwards every
// way of spending it again is refused (tool-use-binding §22 T-C).
func TestIssueConsumeAndPend(t *testing.T) {
	for _, mode := range []string{"owner", "shared client"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			var s *Store
			if mode == "owner" {
				s = f.open(t)
			} else {
				// A second handle of a shared file talks to the owner over its socket, exactly
				// as another process would.
				if owner := f.open(t, shared); !owner.Owner() {
					t.Fatal("first handle does not own the file")
				}
				if s = f.open(t, shared); s.Owner() {
					t.Fatal("second handle owns the file")
				}
			}
			f.clock.Advance(1234567 * time.Nanosecond) // times below the signed millisecond
			now := f.clock.Now()
			a := f.sign(t, 1)
			rec := pendingFor(a, journal.NewOperationID())
			got, pend, err := s.IssueConsumeAndPend(ctx, a, a.Binding, rec, []byte("receipt-1"))
			if err != nil {
				t.Fatal(err)
			}
			if got.State != authority.StateConsumed || got.ConsumedBy != rec.OperationID || got.Authority.ID != a.ID || !got.ConsumedAt.Equal(now) {
				t.Fatalf("authority %+v", got)
			}
			if pend.State != journal.StateDispatchPending || pend.Instance != s.Instance() || len(pend.Receipts) != 1 ||
				string(pend.Receipts[0]) != "receipt-1" || pend.AuthorityID != a.ID || !pend.CreatedAt.Equal(now) {
				t.Fatalf("record %+v", pend)
			}
			// What the store holds, read back.
			stored, err := s.Get(ctx, "", a.ID)
			if err != nil || stored.State != authority.StateConsumed || stored.ConsumedBy != rec.OperationID {
				t.Fatalf("Get: %+v, %v", stored, err)
			}
			if !reflect.DeepEqual(got, stored) {
				t.Fatalf("IssueConsumeAndPend returned\n%+v\nGet reads back\n%+v", got, stored)
			}
			for name, read := range map[string]func() (journal.DispatchRecord, error){
				"Record":      func() (journal.DispatchRecord, error) { return s.Record(ctx, rec.OperationID) },
				"ByAuthority": func() (journal.DispatchRecord, error) { return s.ByAuthority(ctx, a.ID) },
				"ByAct": func() (journal.DispatchRecord, error) {
					rs, err := s.ByAct(ctx, a.Binding.ActID)
					if err != nil || len(rs) != 1 {
						return journal.DispatchRecord{}, fmt.Errorf("ByAct: %d records, %v", len(rs), err)
					}
					return rs[0], nil
				},
			} {
				r, err := read()
				if err != nil || r.OperationID != rec.OperationID || r.State != journal.StateDispatchPending {
					t.Fatalf("%s: %+v, %v", name, r, err)
				}
			}

			// Spent: no second dispatch by any route, and nothing more written.
			if _, _, err := s.IssueConsumeAndPend(ctx, a, a.Binding, pendingFor(a, journal.NewOperationID()), nil); !errors.Is(err, authority.ErrConsumed) {
				t.Fatalf("second IssueConsumeAndPend: %v, want ErrConsumed", err)
			}
			if _, _, err := s.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), nil); !errors.Is(err, authority.ErrConsumed) {
				t.Fatalf("ConsumeAndPend after IssueConsumeAndPend: %v, want ErrConsumed", err)
			}
			if _, err := s.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-again"}); !errors.Is(err, authority.ErrConsumed) {
				t.Fatalf("Consume after IssueConsumeAndPend: %v, want ErrConsumed", err)
			}
			if _, err := s.Issue(ctx, a); !errors.Is(err, authority.ErrAlreadyIssued) {
				t.Fatalf("Issue after IssueConsumeAndPend: %v, want ErrAlreadyIssued", err)
			}
			if rs, err := s.ByAct(ctx, a.Binding.ActID); err != nil || len(rs) != 1 {
				t.Fatalf("%d records for the act after the refusals (%v), want 1", len(rs), err)
			}
		})
	}
}

// TestIssueConsumeAndPendRefusals: every check of Issue and of Consume is made; a refusal
// writes nothing (no authority, no record), and an authority issued before is left ISSUED.
func TestIssueConsumeAndPendRefusals(t *testing.T) {
	seed := sha256.Sum256([]byte("a key the store does not trust"))
	stranger, err := authority.NewSigner(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// prep returns the authority, the expected binding, the record and the context.
		prep func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context)
		want error
	}{
		{"signature altered", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			a.Signature = append([]byte(nil), a.Signature...)
			a.Signature[0] ^= 1
			return a, a.Binding, pendingFor(a, "op-1"), ctx
		}, authority.ErrBadSignature},
		{"untrusted key", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a, err := stranger.Sign(bindingN(1), f.clock.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return a, a.Binding, pendingFor(a, "op-1"), ctx
		}, authority.ErrBadSignature},
		{"binding tampered after signing", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			a.Binding.Destination = "https://evil.example/mcp"
			a.ID, _ = authority.DeriveID(a.Binding)
			return a, a.Binding, pendingFor(a, "op-1"), ctx
		}, authority.ErrBadSignature},
		{"other destination expected", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			expect := a.Binding
			expect.Destination = "https://evil.example/mcp"
			rec := pendingFor(a, "op-1")
			rec.Upstream = expect.Destination
			return a, expect, rec, ctx
		}, authority.ErrDestinationMismatch},
		{"other arguments expected", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			expect := a.Binding
			expect.ArgumentsDigest = digestOf("other arguments")
			rec := pendingFor(a, "op-1")
			rec.ArgumentsDigest = expect.ArgumentsDigest
			return a, expect, rec, ctx
		}, authority.ErrArgumentsMismatch},
		{"other sink expected", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			expect := a.Binding
			expect.SinkID = "sink-b"
			return a, expect, pendingFor(a, "op-1"), ctx
		}, authority.ErrSinkMismatch},
		{"expired", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a, err := f.signer.Sign(bindingN(1), f.clock.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(time.Minute)
			return a, a.Binding, pendingFor(a, "op-1"), ctx
		}, authority.ErrExpired},
		{"record of another destination", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			rec := pendingFor(a, "op-1")
			rec.Upstream = "https://evil.example/mcp"
			return a, a.Binding, rec, ctx
		}, authority.ErrInvalid},
		{"record of another authority", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			rec := pendingFor(f.sign(t, 2), "op-1")
			return a, a.Binding, rec, ctx
		}, authority.ErrInvalid},
		{"record in INVOKED", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			rec := pendingFor(a, "op-1")
			rec.State = journal.StateInvoked
			return a, a.Binding, rec, ctx
		}, journal.ErrInvalidRecord},
		{"record without operation ID", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			return a, a.Binding, pendingFor(a, ""), ctx
		}, journal.ErrInvalidRecord},
		{"operation ID taken", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			other := f.sign(t, 2)
			if _, _, err := s.IssueConsumeAndPend(ctx, other, other.Binding, pendingFor(other, "op-1"), nil); err != nil {
				t.Fatal(err)
			}
			a := f.sign(t, 1)
			return a, a.Binding, pendingFor(a, "op-1"), ctx
		}, journal.ErrExists},
		{"context ended", func(t *testing.T, f *fixture, s *Store) (authority.Authority, authority.Binding, journal.DispatchRecord, context.Context) {
			a := f.sign(t, 1)
			c, cancel := context.WithCancel(ctx)
			cancel()
			return a, a.Binding, pendingFor(a, "op-1"), c
		}, authority.ErrStoreUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t)
			a, expect, rec, c := tc.prep(t, f, s)
			_, _, err := s.IssueConsumeAndPend(c, a, expect, rec, []byte("receipt"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("IssueConsumeAndPend: %v, want %v", err, tc.want)
			}
			if _, err := s.Get(ctx, a.Binding.Namespace, a.ID); !errors.Is(err, authority.ErrNotFound) {
				t.Fatalf("refused authority was stored: %v", err)
			}
			if _, err := s.ByAuthority(ctx, a.ID); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("refused authority has a dispatch record: %v", err)
			}
			if rs, err := s.ByAct(ctx, a.Binding.ActID); err != nil || len(rs) != 0 {
				t.Fatalf("%d records for the refused act (%v)", len(rs), err)
			}
		})
	}

	t.Run("already issued", func(t *testing.T) {
		f := newFixture(t)
		s := f.open(t)
		a := f.sign(t, 1)
		if _, err := s.Issue(ctx, a); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.IssueConsumeAndPend(ctx, a, a.Binding, pendingFor(a, "op-1"), nil); !errors.Is(err, authority.ErrAlreadyIssued) {
			t.Fatalf("IssueConsumeAndPend of an issued authority: %v, want ErrAlreadyIssued", err)
		}
		if got, err := s.Get(ctx, "", a.ID); err != nil || got.State != authority.StateIssued {
			t.Fatalf("issued authority after the refusal: %s, %v", got.State, err)
		}
		if _, err := s.Record(ctx, "op-1"); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("refused record was written: %v", err)
		}
	})
}

// TestIssueConsumeAndPendRace: 64 goroutines race for the same authorities, half of them with
// IssueConsumeAndPend and half with ConsumeAndPend (which can only find the authority after
// someone issued it, and then consumed). Exactly one call per authority succeeds, it is an
// IssueConsumeAndPend, and each authority has exactly one dispatch record, the winner's
// (tool-use-binding §22 T-C).
func TestIssueConsumeAndPendRace(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	n := 100
	if testing.Short() {
		n = 40
	}
	auths := make([]authority.Authority, n)
	for i := range auths {
		auths[i] = f.sign(t, i)
	}
	var (
		mu        sync.Mutex
		won       = map[string]string{} // authority → winning operation
		issueWins int
		errs      []string
		wg        sync.WaitGroup
	)
	for w := range 64 {
		wg.Go(func() {
			for _, i := range rand.Perm(len(auths)) {
				a := auths[i]
				op := journal.NewOperationID()
				var err error
				if w%2 == 0 {
					_, _, err = s.IssueConsumeAndPend(ctx, a, a.Binding, pendingFor(a, op), []byte("receipt"))
				} else {
					_, _, err = s.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, op), []byte("receipt"))
				}
				mu.Lock()
				switch {
				case err == nil:
					if prev, dup := won[a.ID]; dup {
						errs = append(errs, fmt.Sprintf("%s dispatched twice: %s and %s", a.ID, prev, op))
					}
					won[a.ID] = op
					if w%2 == 0 {
						issueWins++
					}
				case errors.Is(err, authority.ErrConsumed):
				case w%2 == 1 && errors.Is(err, authority.ErrNotFound):
				default:
					errs = append(errs, fmt.Sprintf("worker %d, %s: %v", w, a.ID, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d unexpected results, first: %s", len(errs), errs[0])
	}
	if len(won) != n || issueWins != n {
		t.Fatalf("%d authorities won (%d by IssueConsumeAndPend), want %d", len(won), issueWins, n)
	}
	for _, a := range auths {
		got, err := s.Get(ctx, "", a.ID)
		if err != nil || got.State != authority.StateConsumed || got.ConsumedBy != won[a.ID] {
			t.Fatalf("%s: %+v, %v; want consumed by %s", a.ID, got, err, won[a.ID])
		}
		recs, err := s.ByAct(ctx, a.Binding.ActID)
		if err != nil || len(recs) != 1 || recs[0].OperationID != won[a.ID] || recs[0].State != journal.StateDispatchPending {
			t.Fatalf("%s: records %+v, %v; want one, of %s", a.ID, recs, err, won[a.ID])
		}
	}
}

// TestIssueConsumeAndPendDurableAcrossReopen: after Close and a new Open, the authority is
// there, CONSUMED by the operation, with its signature intact, and the record is there with its
// receipt; recovery in the new process makes the stranded DISPATCH_PENDING INDETERMINATE and
// the authority stays spent (tool-use-binding §22 T-G).
func TestIssueConsumeAndPendDurableAcrossReopen(t *testing.T) {
	f := newFixture(t)
	s, err := Open(f.path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	a := f.sign(t, 1)
	op := journal.NewOperationID()
	if _, _, err := s.IssueConsumeAndPend(ctx, a, a.Binding, pendingFor(a, op), []byte("receipt")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := f.open(t)
	got, err := s2.Get(ctx, "", a.ID)
	if err != nil || got.State != authority.StateConsumed || got.ConsumedBy != op || !got.ConsumedAt.Equal(t0) {
		t.Fatalf("authority after reopen: %+v, %v", got, err)
	}
	if err := f.signer.Verifier().Verify(got.Authority, a.Binding, f.clock.Now()); err != nil {
		t.Fatalf("authority read back does not verify: %v", err)
	}
	rec, err := s2.Record(ctx, op)
	if err != nil || rec.State != journal.StateDispatchPending || len(rec.Receipts) != 1 || string(rec.Receipts[0]) != "receipt" || rec.AuthorityID != a.ID {
		t.Fatalf("record after reopen: %+v, %v", rec, err)
	}
	if n, err := s2.RecoverOnStart(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverOnStart = %d, %v; want 1", n, err)
	}
	if rec, err := s2.ByAuthority(ctx, a.ID); err != nil || rec.State != journal.StateIndeterminate {
		t.Fatalf("record after recovery: %+v, %v", rec, err)
	}
	if _, _, err := s2.IssueConsumeAndPend(ctx, a, a.Binding, pendingFor(a, journal.NewOperationID()), nil); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("IssueConsumeAndPend after restart: %v, want ErrConsumed", err)
	}
	if _, _, err := s2.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), nil); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("ConsumeAndPend after restart: %v, want ErrConsumed", err)
	}
}

// TestUpdateRecordChangedMeanwhile: a transition is decided on the record as read, outside the
// write lock; if the record changes before the commit (another writer got there first), the
// transition is decided again on what is stored then — never written over it.
func TestUpdateRecordChangedMeanwhile(t *testing.T) {
	executed := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("response"), Result: []byte("ok")}
	for _, tc := range []struct {
		name      string
		meanwhile journal.State // what another writer records between the read and the commit
		want      error
		history   []journal.State
	}{
		{"to INVOKED: EXECUTED follows it", journal.StateInvoked, nil,
			[]journal.State{journal.StateDispatchPending, journal.StateInvoked, journal.StateExecuted}},
		{"to INDETERMINATE: only reconciliation leaves it", journal.StateIndeterminate, journal.ErrInvalidTransition,
			[]journal.State{journal.StateDispatchPending, journal.StateIndeterminate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t)
			a := f.sign(t, 1)
			op := journal.NewOperationID()
			if _, _, err := s.IssueConsumeAndPend(ctx, a, a.Binding, pendingFor(a, op), nil); err != nil {
				t.Fatal(err)
			}
			first := true
			_, err := s.own.l.update(ctx, op, func(r journal.DispatchRecord, now time.Time) (journal.DispatchRecord, error) {
				if first {
					first = false
					if _, err := s.Transition(ctx, op, tc.meanwhile, journal.Outcome{}); err != nil {
						t.Fatal(err)
					}
				}
				return journal.Apply(r, journal.StateExecuted, executed, now)
			})
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("update: %v, want %v", err, tc.want)
			}
			rec, err := s.Record(ctx, op)
			if err != nil {
				t.Fatal(err)
			}
			var got []journal.State
			for _, st := range rec.History {
				got = append(got, st.To)
			}
			if !reflect.DeepEqual(got, tc.history) {
				t.Fatalf("history %v, want %v", got, tc.history)
			}
		})
	}
}
