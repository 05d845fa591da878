package boltstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/journal"
)

// budgetCharge is the charge of one call to a 5-call, 1000 EUR daily budget.
func budgetCharge(t testing.TB, now time.Time, amount string) budget.Charge {
	t.Helper()
	w, err := budget.NewWindow(0, budget.CalendarDay, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	max := budget.MustDecimal("1000")
	s := budget.Spec{Name: "daily", Window: w, MaxCalls: 5, MaxSum: &max, Pointer: "/amount", Unit: "EUR"}
	c, err := s.Charge(budget.Ref{Namespace: "default", Policy: "pay", Rule: "payments"}, "agent-a", []byte(`{"amount":"`+amount+`"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func spent(t testing.TB, s *Store, c budget.Charge, now time.Time) (int64, string) {
	t.Helper()
	u, err := s.Usage(context.Background(), c.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	n, sum := u.Spent(now)
	return n, sum.String()
}

// TestConsumeChargesBudgets: a dispatch's charges commit with the consume; a charge that no
// longer fits refuses the consume and writes nothing (no authority, no record); FAILED gives the
// share back, EXECUTED keeps it, INDETERMINATE keeps it until reconciled FAILED gives it back.
// Both through the owner and through a client of a shared file.
func TestConsumeChargesBudgets(t *testing.T) {
	for _, mode := range []string{"owner", "shared client"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t)
			if mode != "owner" {
				s.Close()
				_ = f.open(t, shared)
				s = f.open(t, shared)
			}
			ctx := context.Background()
			now := f.clock.Now()
			dispatch := func(i int, amount string) (journal.DispatchRecord, error) {
				a := f.sign(t, i)
				rec := pendingFor(a, journal.NewOperationID())
				rec.Charges = []budget.Charge{budgetCharge(t, now, amount)}
				_, pend, err := s.IssueConsumeAndPend(ctx, a, a.Binding, rec, nil)
				return pend, err
			}
			c := budgetCharge(t, now, "0")
			r1, err := dispatch(1, "600")
			if err != nil {
				t.Fatal(err)
			}
			// 600 + 500 > 1000: refused, and nothing of the call exists.
			a2 := f.sign(t, 2)
			rec2 := pendingFor(a2, journal.NewOperationID())
			rec2.Charges = []budget.Charge{budgetCharge(t, now, "500")}
			_, _, err = s.IssueConsumeAndPend(ctx, a2, a2.Binding, rec2, nil)
			var ex *budget.ExceededError
			if !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("over the sum: %v", err)
			}
			if mode == "owner" && (!errors.As(err, &ex) || ex.Spent.String() != "600") {
				t.Fatalf("the refusal does not carry the numbers: %v", err)
			}
			if _, err := s.Get(ctx, "", a2.ID); !errors.Is(err, authority.ErrNotFound) {
				t.Fatalf("the refused call's authority exists: %v", err)
			}
			if _, err := s.Record(ctx, rec2.OperationID); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("the refused call's record exists: %v", err)
			}
			if n, sum := spent(t, s, c, now); n != 1 || sum != "600" {
				t.Fatalf("after a refusal: %d calls, %s", n, sum)
			}
			// FAILED gives 600 back.
			ev := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("failed")}
			if _, err := s.Transition(ctx, r1.OperationID, journal.StateFailed, ev); err != nil {
				t.Fatal(err)
			}
			if n, sum := spent(t, s, c, now); n != 0 || sum != "0" {
				t.Fatalf("after FAILED: %d calls, %s", n, sum)
			}
			// EXECUTED keeps it.
			r3, err := dispatch(3, "400")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Transition(ctx, r3.OperationID, journal.StateExecuted, journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("ok")}); err != nil {
				t.Fatal(err)
			}
			// INDETERMINATE keeps it; reconciled FAILED gives it back.
			r4, err := dispatch(4, "600")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Transition(ctx, r4.OperationID, journal.StateIndeterminate, journal.Outcome{Reason: "timeout"}); err != nil {
				t.Fatal(err)
			}
			if n, sum := spent(t, s, c, now); n != 2 || sum != "1000" {
				t.Fatalf("EXECUTED 400 and INDETERMINATE 600: %d calls, %s", n, sum)
			}
			if _, err := dispatch(5, "0.01"); !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("at the limit: %v", err)
			}
			if _, err := s.Reconcile(ctx, r4.OperationID, journal.Reconciliation{Authenticated: true, OperationID: r4.OperationID,
				ActionDigest: r4.ActionDigest, Upstream: r4.Upstream, Outcome: journal.StateFailed, EvidenceDigest: digestOf("rec")}); err != nil {
				t.Fatal(err)
			}
			if n, sum := spent(t, s, c, now); n != 1 || sum != "400" {
				t.Fatalf("after reconciled FAILED: %d calls, %s", n, sum)
			}
			// A refund of an EXECUTED operation gives nothing back.
			if err := s.Refund(ctx, r3.OperationID); err != nil {
				t.Fatal(err)
			}
			if n, _ := spent(t, s, c, now); n != 1 {
				t.Fatalf("an EXECUTED charge was given back")
			}
			list, err := s.Budgets(ctx)
			if err != nil || len(list) != 1 || list[0].Budget != "daily" || list[0].Key != "agent-a" {
				t.Fatalf("Budgets: %+v, %v", list, err)
			}
		})
	}
}

// TestConsumeBudgetRace: 64 concurrent dispatches against a 5-call budget through the group
// commit — exactly 5 commit, every other is refused ErrExceeded and leaves no authority or record.
func TestConsumeBudgetRace(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	ctx := context.Background()
	now := f.clock.Now()
	auths := make([]authority.Authority, 64)
	for i := range auths {
		auths[i] = f.sign(t, i)
	}
	var ok, exceeded atomic.Int64
	var wg sync.WaitGroup
	for i := range auths {
		wg.Go(func() {
			a := auths[i]
			rec := pendingFor(a, journal.NewOperationID())
			rec.Charges = []budget.Charge{budgetCharge(t, now, "1")}
			switch _, _, err := s.IssueConsumeAndPend(ctx, a, a.Binding, rec, nil); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, budget.ErrExceeded):
				exceeded.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || exceeded.Load() != 59 {
		t.Fatalf("%d committed, %d exceeded; want 5, 59", ok.Load(), exceeded.Load())
	}
	pending, err := s.InState(ctx, journal.StateDispatchPending)
	if err != nil || len(pending) != 5 {
		t.Fatalf("%d DISPATCH_PENDING records, %v; want 5", len(pending), err)
	}
	if n, sum := spent(t, s, budgetCharge(t, now, "0"), now); n != 5 || sum != "5" {
		t.Fatalf("%d calls, %s spent", n, sum)
	}
}

// TestBudgetLedgerBounds: the key bound refuses a new key with ErrLimit through the store, and
// a record with more charges than an operation may make is refused.
func TestBudgetLedgerBounds(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	ctx := context.Background()
	now := f.clock.Now()
	w, _ := budget.NewWindow(time.Hour, "", "")
	spec := budget.Spec{Name: "per-payee", Window: w, MaxCalls: 1}
	ref := budget.Ref{Namespace: "default", Policy: "pay", Rule: "payments"}
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < budget.MaxKeysPerBudget; i += 64 {
				c, _ := spec.Charge(ref, fmt.Sprint("payee-", i), nil, now)
				if err := s.Charge(ctx, fmt.Sprint("op-", i), []budget.Charge{c}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	c, _ := spec.Charge(ref, "payee-new", nil, now)
	if err := s.Charge(ctx, "op-new", []budget.Charge{c}); !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("past the key bound: %v", err)
	}
	// A rolling hour later every key has aged out and the bound frees.
	f.clock.Advance(time.Hour + 2*time.Minute)
	c, _ = spec.Charge(ref, "payee-new", nil, f.clock.Now())
	if err := s.Charge(ctx, "op-new", []budget.Charge{c}); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	a := f.sign(t, 1)
	rec := pendingFor(a, journal.NewOperationID())
	for range budget.MaxChargesPerOp + 1 {
		rec.Charges = append(rec.Charges, c)
	}
	if _, _, err := s.IssueConsumeAndPend(ctx, a, a.Binding, rec, nil); !errors.Is(err, journal.ErrInvalidRecord) {
		t.Fatalf("too many charges: %v", err)
	}
}

// TestMigrateSchema3: a file of schema 3 (no budget buckets) opens, gains them, and charges.
func TestMigrateSchema3(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	s.Close()
	editFile(t, f.path, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketBudgets, bucketBudgetScopes, bucketBudgetOps} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(schemaVersion3))
	})
	if _, err := ReadSnapshot(f.path, time.Second); err != nil {
		t.Fatalf("a schema 3 file is no longer readable as a backup: %v", err)
	}
	s = f.open(t)
	now := f.clock.Now()
	if err := s.Charge(context.Background(), "op-1", []budget.Charge{budgetCharge(t, now, "5")}); err != nil {
		t.Fatalf("charge after migration: %v", err)
	}
	if n, sum := spent(t, s, budgetCharge(t, now, "0"), now); n != 1 || sum != "5" {
		t.Fatalf("%d calls, %s", n, sum)
	}
}
