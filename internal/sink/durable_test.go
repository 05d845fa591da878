package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/receipt"
)

// hookedReceipts is the fixture's receipt log with AppendDurable replaced by durable, which
// may delay, fail, or delegate to the real log.
type hookedReceipts struct {
	ReceiptLog
	durable func(ctx context.Context, r receipt.Receipt) (receipt.Receipt, error)
}

func (h *hookedReceipts) AppendDurable(ctx context.Context, r receipt.Receipt) (receipt.Receipt, error) {
	return h.durable(ctx, r)
}

// failingTransitions is the embedded store as the gate's journal, with Transition failing
// while fail is set.
type failingTransitions struct {
	*boltstore.Store
	fail *atomic.Bool
}

func (j failingTransitions) Transition(ctx context.Context, op string, to journal.State, o journal.Outcome) (journal.DispatchRecord, error) {
	if j.fail.Load() {
		return journal.DispatchRecord{}, fmt.Errorf("%w: injected failure", journal.ErrUnavailable)
	}
	return j.Store.Transition(ctx, op, to, o)
}

var errDiskFull = errors.New("receipt log: no space left on device")

// TestPermitInvokesOnlyWhenAllIsDurable: the upstream is called only after the authority is
// consumed, the DISPATCH_PENDING record is in the store and the dispatch receipt's
// AppendDurable has returned — even when the receipt's fsync is slower than the store's commit
// (they run concurrently; the gate waits for both).
func TestPermitInvokesOnlyWhenAllIsDurable(t *testing.T) {
	var receiptDone atomic.Bool
	f := newFixture(t, func(o *Options) {
		inner := o.Receipts
		o.Receipts = &hookedReceipts{ReceiptLog: inner, durable: func(ctx context.Context, r receipt.Receipt) (receipt.Receipt, error) {
			time.Sleep(50 * time.Millisecond) // a slow fsync
			out, err := inner.AppendDurable(ctx, r)
			receiptDone.Store(err == nil)
			return out, err
		}}
	})
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	var seen struct {
		receipt bool
		rec     journal.DispatchRecord
		recErr  error
		auth    authority.Record
		authErr error
	}
	inv := func(ctx context.Context, op string) (InvokeResult, error) {
		seen.receipt = receiptDone.Load()
		seen.rec, seen.recErr = f.store.Record(ctx, op)
		if seen.recErr == nil {
			seen.auth, seen.authErr = f.store.Get(ctx, "", seen.rec.AuthorityID)
		}
		return InvokeResult{Result: []byte(`{"content":[]}`), Outcome: OutcomeExecuted}, nil
	}
	res, err := f.gate.Handle(context.Background(), c, inv)
	if err != nil || !res.Invoked {
		t.Fatalf("%+v %v", res, err)
	}
	if !seen.receipt {
		t.Fatal("invoked before the dispatch receipt was durable")
	}
	if seen.recErr != nil || seen.rec.State != journal.StateDispatchPending {
		t.Fatalf("at invoke the record was %+v (%v), want DISPATCH_PENDING", seen.rec, seen.recErr)
	}
	if seen.authErr != nil || seen.auth.State != authority.StateConsumed || seen.auth.ConsumedBy != res.OperationID {
		t.Fatalf("at invoke the authority was %+v (%v), want consumed by %s", seen.auth, seen.authErr, res.OperationID)
	}
}

// TestPermitReceiptFailureNeverInvokes: the durable receipt fails while the store's commit
// succeeds — whether the receipt fails before the commit ends or after. The upstream is not
// called, the call is refused with EF_STORE_UNAVAILABLE, the authority stays spent, and the
// journal does not claim a dispatch: the record is FAILED (not_dispatched), nothing is
// DISPATCH_PENDING, and a restart finds nothing to make INDETERMINATE.
func TestPermitReceiptFailureNeverInvokes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"fails at once", 0}, {"fails after the commit", 50 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			var fail atomic.Bool
			fail.Store(true)
			f := newFixture(t, func(o *Options) {
				inner := o.Receipts
				o.Receipts = &hookedReceipts{ReceiptLog: inner, durable: func(ctx context.Context, r receipt.Receipt) (receipt.Receipt, error) {
					if !fail.Load() {
						return inner.AppendDurable(ctx, r)
					}
					time.Sleep(tc.delay)
					return receipt.Receipt{}, errDiskFull
				}}
			})
			c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
			res := f.handle(c)
			wantDeny(t, res, ef.EFStoreUnavailable)
			if f.up.total() != 0 {
				t.Fatal("invoked without a durable receipt")
			}
			if n := len(f.records(journal.StateDispatchPending)); n != 0 {
				t.Fatalf("%d DISPATCH_PENDING records left", n)
			}
			failed := f.records(journal.StateFailed)
			if len(failed) != 1 || failed[0].Reason != ReasonNotDispatched || failed[0].ActID != res.ActID {
				t.Fatalf("FAILED records = %+v", failed)
			}
			a, err := f.store.Get(context.Background(), "", failed[0].AuthorityID)
			if err != nil || a.State != authority.StateConsumed || a.ConsumedBy != failed[0].OperationID {
				t.Fatalf("authority %+v, %v: want spent by the settled operation", a, err)
			}
			// The log names the operation as refused.
			rs := f.receipts()
			if len(rs) != 1 || rs[0].Decision != receipt.DecisionDeny || rs[0].OperationID != failed[0].OperationID ||
				rs[0].Code != string(ef.EFStoreUnavailable) {
				t.Fatalf("receipts = %+v", rs)
			}

			// Once the log works again the same call is a new act and runs once; after a
			// restart nothing is INDETERMINATE.
			fail.Store(false)
			if r := f.handle(c); !r.Invoked || r.ActID == res.ActID {
				t.Fatalf("retry after the failure: %+v", r)
			}
			f.restart()
			if n := len(f.records(journal.StateIndeterminate)); n != 0 {
				t.Fatalf("%d INDETERMINATE records after restart", n)
			}
			if f.up.total() != 1 {
				t.Fatalf("upstream count %d, want 1", f.up.total())
			}
		})
	}
}

// TestPermitReceiptAndSettleFailure: the durable receipt fails and so does the write that
// would settle the record as never dispatched. The upstream is not called; the record stays
// DISPATCH_PENDING, which recovery makes INDETERMINATE at the next start (fail closed), and the
// action is then refused, never replayed blindly.
func TestPermitReceiptAndSettleFailure(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	f := newFixture(t, func(o *Options) {
		inner := o.Receipts
		o.Receipts = &hookedReceipts{ReceiptLog: inner, durable: func(ctx context.Context, r receipt.Receipt) (receipt.Receipt, error) {
			if broken.Load() {
				return receipt.Receipt{}, errDiskFull
			}
			return inner.AppendDurable(ctx, r)
		}}
		o.Journal = failingTransitions{Store: o.Store.(*boltstore.Store), fail: &broken}
	})
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	wantDeny(t, f.handle(c), ef.EFStoreUnavailable)
	if f.up.total() != 0 {
		t.Fatal("invoked without a durable receipt")
	}
	if n := len(f.records(journal.StateDispatchPending)); n != 1 {
		t.Fatalf("%d DISPATCH_PENDING records, want the unsettled one", n)
	}
	broken.Store(false)
	f.restart()
	ind := f.records(journal.StateIndeterminate)
	if len(ind) != 1 || ind[0].Reason != journal.ReasonRecoveredOnStart {
		t.Fatalf("INDETERMINATE records after restart = %+v", ind)
	}
	wantDeny(t, f.handle(c), ef.EFIndeterminate)
	if f.up.total() != 0 {
		t.Fatal("invoked after the restart")
	}
}

// TestPermitStoreFailureWithDurableReceipt: the store cannot commit while the receipt log can.
// Nothing is invoked, and the receipt log — which may hold the dispatch receipt written
// concurrently with the failed commit — follows it with a deny naming the same operation.
func TestPermitStoreFailureWithDurableReceipt(t *testing.T) {
	f := newFixture(t)
	f.store.Close()
	res := f.handle(call("s1", "tools", "ticket_create", `{"title":"x"}`))
	wantDeny(t, res, ef.EFStoreUnavailable)
	if f.up.total() != 0 {
		t.Fatal("invoked with the store closed")
	}
	rs := f.receipts()
	if len(rs) != 2 {
		t.Fatalf("receipts = %+v", rs)
	}
	intent, deny := rs[0], rs[1]
	if intent.Decision != receipt.DecisionAllow || intent.Code != ReceiptCodeDispatch || intent.OperationID == "" {
		t.Fatalf("first receipt %+v, want the dispatch receipt", intent)
	}
	if deny.Decision != receipt.DecisionDeny || deny.Code != string(ef.EFStoreUnavailable) ||
		deny.OperationID != intent.OperationID || deny.AuthorityID != intent.AuthorityID || deny.ActID != res.ActID {
		t.Fatalf("second receipt %+v does not refuse operation %s", deny, intent.OperationID)
	}
}

// storeOnly exposes only authority.Store of the embedded store, as a Lease store would: no
// consume-and-pend, no issue-consume-and-pend.
type storeOnly struct{ s *boltstore.Store }

func (w storeOnly) Issue(ctx context.Context, a authority.Authority) (authority.Record, error) {
	return w.s.Issue(ctx, a)
}

func (w storeOnly) Get(ctx context.Context, ns, id string) (authority.Record, error) {
	return w.s.Get(ctx, ns, id)
}

func (w storeOnly) Consume(ctx context.Context, id string, b authority.Binding, c authority.Consumption) (authority.Record, error) {
	return w.s.Consume(ctx, id, b, c)
}

// storeAndPender adds ConsumeAndPend.
type storeAndPender struct{ storeOnly }

func (w storeAndPender) ConsumeAndPend(ctx context.Context, id string, b authority.Binding, rec journal.DispatchRecord, r []byte) (authority.Record, journal.DispatchRecord, error) {
	return w.s.ConsumeAndPend(ctx, id, b, rec, r)
}

// countingStore is the embedded store counting separate Issue calls.
type countingStore struct {
	*boltstore.Store
	issues *atomic.Int64
}

func (c countingStore) Issue(ctx context.Context, a authority.Authority) (authority.Record, error) {
	c.issues.Add(1)
	return c.Store.Issue(ctx, a)
}

// TestPermitStoreCapabilities: a Permit dispatches once and journals the same way whatever the
// store can do in one commit — issue, consume and pend (the embedded store: no separate Issue
// at all), consume and pend after Issue, or Issue, Consume and journal.Begin (a Lease store).
func TestPermitStoreCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wrap       func(*boltstore.Store, *atomic.Int64) authority.Store
		wantIssues int64
	}{
		{"issue-consume-and-pend", func(s *boltstore.Store, n *atomic.Int64) authority.Store { return countingStore{s, n} }, 0},
		{"consume-and-pend", func(s *boltstore.Store, _ *atomic.Int64) authority.Store { return storeAndPender{storeOnly{s}} }, -1},
		{"store only", func(s *boltstore.Store, _ *atomic.Int64) authority.Store { return storeOnly{s} }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var issues atomic.Int64
			f := newFixture(t, func(o *Options) { o.Store = tc.wrap(o.Store.(*boltstore.Store), &issues) })
			res := f.handle(call("s1", "tools", "ticket_create", `{"title":"x"}`))
			if !res.Invoked || res.State != journal.StateExecuted || f.up.count("ticket_create") != 1 {
				t.Fatalf("%+v, upstream %d", res, f.up.count("ticket_create"))
			}
			rec, err := f.store.Record(context.Background(), res.OperationID)
			if err != nil || rec.State != journal.StateExecuted || len(rec.Receipts) != 1 || len(rec.History) != 2 {
				t.Fatalf("record %+v, %v", rec, err)
			}
			a, err := f.store.Get(context.Background(), "", rec.AuthorityID)
			if err != nil || a.State != authority.StateConsumed || a.ConsumedBy != rec.OperationID {
				t.Fatalf("authority %+v, %v", a, err)
			}
			if byAuth, err := f.store.ByAuthority(context.Background(), rec.AuthorityID); err != nil || byAuth.OperationID != rec.OperationID {
				t.Fatalf("ByAuthority: %+v, %v", byAuth, err)
			}
			if tc.wantIssues >= 0 && issues.Load() != tc.wantIssues {
				t.Fatalf("%d separate Issue calls, want %d", issues.Load(), tc.wantIssues)
			}
			rs := f.receipts()
			if len(rs) != 2 || rs[0].Code != ReceiptCodeDispatch || rs[0].OperationID != rec.OperationID || rs[1].State != string(journal.StateExecuted) {
				t.Fatalf("receipts = %+v", rs)
			}
		})
	}
}

// TestPermitRaceIssueConsumeAndPend: 64 goroutines Handle distinct Permit calls on the
// embedded store (every authority created consumed in a shared group commit): every call is
// invoked exactly once, every authority is consumed by exactly its own record, and the receipt
// log holds one dispatch receipt per operation, before that operation's outcome.
func TestPermitRaceIssueConsumeAndPend(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	ops := make([]string, 64)
	for i := range 64 {
		wg.Go(func() {
			c := call(fmt.Sprintf("s%d", i%8), "tools", "ticket_create", fmt.Sprintf(`{"title":"t%d"}`, i))
			res, err := f.gate.Handle(context.Background(), c, f.up.invoker(c.Tool))
			if err != nil || !res.Invoked {
				t.Errorf("call %d: %+v %v", i, res, err)
			}
			ops[i] = res.OperationID
		})
	}
	wg.Wait()
	if f.up.count("ticket_create") != 64 {
		t.Fatalf("upstream count %d, want 64", f.up.count("ticket_create"))
	}
	recs := f.records(journal.StateExecuted)
	if len(recs) != 64 {
		t.Fatalf("%d EXECUTED records", len(recs))
	}
	for _, r := range recs {
		a, err := f.store.Get(context.Background(), "", r.AuthorityID)
		if err != nil || a.State != authority.StateConsumed || a.ConsumedBy != r.OperationID {
			t.Fatalf("authority %+v, %v", a, err)
		}
	}
	pos := map[string][2]int{} // operation → index of its dispatch receipt, of its outcome
	for i, r := range f.receipts() {
		p := pos[r.OperationID]
		switch r.Decision {
		case receipt.DecisionAllow:
			p[0] = i + 1
		case receipt.DecisionOutcome:
			p[1] = i + 1
		}
		pos[r.OperationID] = p
	}
	for _, op := range ops {
		if p := pos[op]; p[0] == 0 || p[1] == 0 || p[0] > p[1] {
			t.Fatalf("operation %s: dispatch receipt at %d, outcome at %d", op, p[0]-1, p[1]-1)
		}
	}
}
