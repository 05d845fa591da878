package boltstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

var ctx = context.Background()

func TestIssueGetConsume(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	a := f.sign(t, 1)

	rec, err := s.Issue(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != authority.StateIssued || rec.Authority.ID != a.ID {
		t.Fatalf("Issue returned %+v", rec)
	}
	got, err := s.Get(ctx, "", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != authority.StateIssued || !bytes.Equal(got.Authority.Signature, a.Signature) || got.Authority.Binding != a.Binding {
		t.Fatalf("Get returned %+v", got)
	}
	if _, err := s.Issue(ctx, a); !errors.Is(err, authority.ErrAlreadyIssued) {
		t.Fatalf("second Issue: %v, want ErrAlreadyIssued", err)
	}
	// Re-signing the same act and binding later yields the same ID: still refused.
	f.clock.Advance(time.Second)
	if _, err := s.Issue(ctx, f.sign(t, 1)); !errors.Is(err, authority.ErrAlreadyIssued) {
		t.Fatalf("re-issue for the same act: %v, want ErrAlreadyIssued", err)
	}

	c, err := s.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.State != authority.StateConsumed || c.ConsumedBy != "op-1" || !c.ConsumedAt.Equal(f.clock.Now()) {
		t.Fatalf("Consume returned %+v", c)
	}
	// T-C: replaying the same authority is denied.
	if _, err := s.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-2"}); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("second Consume: %v, want ErrConsumed", err)
	}
	got, err = s.Get(ctx, "", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != authority.StateConsumed || got.ConsumedBy != "op-1" {
		t.Fatalf("after consume, Get returned %+v", got)
	}

	if _, err := s.Get(ctx, "", authority.IDPrefix+strings.Repeat("0", 64)); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("Get of unknown ID: %v", err)
	}
	if _, err := s.Get(ctx, "other-namespace", a.ID); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("Get in another namespace: %v", err)
	}
}

func TestIssueRefuses(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	other, err := authority.LoadOrCreateKey(filepath.Join(f.dir, "other.pem"))
	if err != nil {
		t.Fatal(err)
	}
	byOther, err := other.Sign(bindingN(1), t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tampered := f.sign(t, 2)
	tampered.Signature = bytes.Clone(tampered.Signature)
	tampered.Signature[0] ^= 1
	expired, err := f.signer.Sign(bindingN(3), t0.Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    authority.Authority
		want error
	}{
		{"untrusted key", byOther, authority.ErrBadSignature},
		{"tampered signature", tampered, authority.ErrBadSignature},
		{"already expired", expired, authority.ErrExpired},
		{"malformed", authority.Authority{ID: "x"}, authority.ErrBadSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Issue(ctx, tc.a); !errors.Is(err, tc.want) {
				t.Fatalf("Issue = %v, want %v", err, tc.want)
			}
			if tc.a.ID != "x" {
				if _, err := s.Get(ctx, "", tc.a.ID); !errors.Is(err, authority.ErrNotFound) {
					t.Fatalf("refused authority was stored: %v", err)
				}
			}
		})
	}
}

// TestConsumeRefusals: every refusal leaves the authority ISSUED and writes no dispatch record.
func TestConsumeRefusals(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	a := f.sign(t, 1)
	if _, err := s.Issue(ctx, a); err != nil {
		t.Fatal(err)
	}
	with := func(mod func(*authority.Binding)) authority.Binding { b := a.Binding; mod(&b); return b }
	cases := []struct {
		name   string
		id     string
		expect authority.Binding
		opID   string
		want   error
	}{
		{"other arguments", a.ID, with(func(b *authority.Binding) { b.ArgumentsDigest = digestOf("x") }), "op-1", authority.ErrArgumentsMismatch},
		{"other action", a.ID, with(func(b *authority.Binding) { b.ActionDigest = digestOf("x") }), "op-1", authority.ErrArgumentsMismatch},
		{"swapped server (T-D)", a.ID, with(func(b *authority.Binding) { b.Destination = "https://evil.example/mcp" }), "op-1", authority.ErrDestinationMismatch},
		{"other sink", a.ID, with(func(b *authority.Binding) { b.SinkID = "sink-b" }), "op-1", authority.ErrSinkMismatch},
		{"other epoch", a.ID, with(func(b *authority.Binding) { b.PolicyEpoch = "8" }), "op-1", authority.ErrEpochMismatch},
		{"other act", a.ID, with(func(b *authority.Binding) { b.ActID = "act-other" }), "op-1", authority.ErrScopeMismatch},
		{"other tool", a.ID, with(func(b *authority.Binding) { b.Tool = "refund" }), "op-1", authority.ErrScopeMismatch},
		{"other namespace", a.ID, with(func(b *authority.Binding) { b.Namespace = "team-b" }), "op-1", authority.ErrNotFound},
		{"sink expects nothing", a.ID, authority.Binding{}, "op-1", authority.ErrInvalid},
		{"unknown authority", authority.IDPrefix + strings.Repeat("0", 64), a.Binding, "op-1", authority.ErrNotFound},
		{"malformed ID", "../../etc", a.Binding, "op-1", authority.ErrInvalid},
		{"no operation ID", a.ID, a.Binding, "", authority.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Consume(ctx, tc.id, tc.expect, authority.Consumption{OperationID: tc.opID}); !errors.Is(err, tc.want) {
				t.Fatalf("Consume = %v, want %v", err, tc.want)
			}
			rec := pendingFor(a, "op-pend")
			rec.AuthorityID = tc.id
			rec.ActID, rec.ArgumentsDigest, rec.ActionDigest, rec.Tool, rec.Upstream = tc.expect.ActID, tc.expect.ArgumentsDigest, tc.expect.ActionDigest, tc.expect.Tool, tc.expect.Destination
			if tc.opID == "" {
				rec.OperationID = ""
			}
			_, _, err := s.ConsumeAndPend(ctx, tc.id, tc.expect, rec, []byte("receipt"))
			if err == nil {
				t.Fatal("ConsumeAndPend succeeded")
			}
			got, err := s.Get(ctx, "", a.ID)
			if err != nil || got.State != authority.StateIssued {
				t.Fatalf("after refusal the authority is %v (%v), want ISSUED", got.State, err)
			}
			if _, err := s.ByAuthority(ctx, a.ID); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("refusal wrote a dispatch record: %v", err)
			}
		})
	}
	// And after all of that the right sink can still consume it.
	if _, err := s.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-ok"}); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeExpiryInjectedClock(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	a := f.sign(t, 1) // valid 10 minutes from t0
	if _, err := s.Issue(ctx, a); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10*time.Minute - time.Millisecond)
	b := f.sign(t, 2) // issued now, so still valid after the next step
	if _, err := s.Issue(ctx, b); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Millisecond) // exactly at a's expiry
	if _, err := s.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-a"}); !errors.Is(err, authority.ErrExpired) {
		t.Fatalf("Consume at expiry: %v, want ErrExpired", err)
	}
	if got, _ := s.Get(ctx, "", a.ID); got.State != authority.StateIssued {
		t.Fatalf("expired authority state %s", got.State)
	}
	if _, _, err := s.ConsumeAndPend(ctx, b.ID, b.Binding, pendingFor(b, "op-b"), nil); err != nil {
		t.Fatalf("unexpired authority: %v", err)
	}
}

func TestConsumeAndPend(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	auths := f.issueN(t, s, 3)
	a := auths[0]

	rec := pendingFor(a, journal.NewOperationID())
	got, pend, err := s.ConsumeAndPend(ctx, a.ID, a.Binding, rec, []byte("receipt-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != authority.StateConsumed || got.ConsumedBy != rec.OperationID {
		t.Fatalf("authority %+v", got)
	}
	if pend.State != journal.StateDispatchPending || pend.Instance != s.Instance() || len(pend.Receipts) != 1 || string(pend.Receipts[0]) != "receipt-1" || !pend.CreatedAt.Equal(f.clock.Now()) {
		t.Fatalf("record %+v", pend)
	}
	for name, read := range map[string]func() (journal.DispatchRecord, error){
		"Record":      func() (journal.DispatchRecord, error) { return s.Record(ctx, rec.OperationID) },
		"ByAuthority": func() (journal.DispatchRecord, error) { return s.ByAuthority(ctx, a.ID) },
		"ByAct": func() (journal.DispatchRecord, error) {
			rs, err := s.ByAct(ctx, a.Binding.ActID)
			if err != nil || len(rs) != 1 {
				return journal.DispatchRecord{}, errors.New("ByAct did not return one record")
			}
			return rs[0], nil
		},
	} {
		r, err := read()
		if err != nil || r.OperationID != rec.OperationID || r.State != journal.StateDispatchPending {
			t.Fatalf("%s: %+v, %v", name, r, err)
		}
	}

	// A second dispatch of the same act: the authority is spent.
	if _, _, err := s.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), nil); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("second ConsumeAndPend: %v, want ErrConsumed", err)
	}

	// Atomicity: a record that cannot be written (operation ID taken) leaves the authority ISSUED.
	b := auths[1]
	if _, _, err := s.ConsumeAndPend(ctx, b.ID, b.Binding, pendingFor(b, rec.OperationID), nil); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("reused operation ID: %v, want journal.ErrExists", err)
	}
	if got, _ := s.Get(ctx, "", b.ID); got.State != authority.StateIssued {
		t.Fatalf("authority consumed although its record was refused: %s", got.State)
	}

	// A record describing another act than the authority is refused, nothing consumed.
	c := auths[2]
	wrong := pendingFor(c, journal.NewOperationID())
	wrong.Upstream = "https://evil.example/mcp"
	if _, _, err := s.ConsumeAndPend(ctx, c.ID, c.Binding, wrong, nil); !errors.Is(err, authority.ErrInvalid) {
		t.Fatalf("mismatched record: %v, want ErrInvalid", err)
	}
	wrong = pendingFor(c, journal.NewOperationID())
	wrong.State = journal.StateInvoked
	if _, _, err := s.ConsumeAndPend(ctx, c.ID, c.Binding, wrong, nil); !errors.Is(err, journal.ErrInvalidRecord) {
		t.Fatalf("record in INVOKED: %v, want ErrInvalidRecord", err)
	}
	if got, _ := s.Get(ctx, "", c.ID); got.State != authority.StateIssued {
		t.Fatalf("authority consumed by a refused ConsumeAndPend: %s", got.State)
	}
}

func TestJournalLifecycle(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	// The Lease path: the authority lives elsewhere; the journal starts at CONSUMED.
	a := f.sign(t, 1)
	rec := pendingFor(a, "op-1")
	rec.State = journal.StateConsumed
	r, err := s.Begin(ctx, rec, []byte("consumed-receipt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.State != journal.StateConsumed || r.Instance != s.Instance() {
		t.Fatalf("Begin: %+v", r)
	}
	if _, err := s.Begin(ctx, rec, nil); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("Begin twice: %v", err)
	}
	again := rec
	again.OperationID = "op-2"
	if _, err := s.Begin(ctx, again, nil); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("second record for one authority: %v", err)
	}
	evidence := digestOf("upstream response")
	steps := []struct {
		to   journal.State
		o    journal.Outcome
		want error
	}{
		{journal.StateInvoked, journal.Outcome{}, journal.ErrInvalidTransition}, // not from CONSUMED
		{journal.StateDispatchPending, journal.Outcome{}, nil},
		{journal.StateInvoked, journal.Outcome{Receipt: []byte("invoked-receipt")}, nil},
		{journal.StateFailed, journal.Outcome{EvidenceDigest: evidence}, journal.ErrEvidenceRequired}, // a timeout is not FAILED
		{journal.StateExecuted, journal.Outcome{Authoritative: true, EvidenceDigest: evidence, Result: []byte(`{"paid":true}`)}, nil},
		{journal.StateExecuted, journal.Outcome{Authoritative: true, EvidenceDigest: evidence}, nil}, // idempotent repeat
		{journal.StateFailed, journal.Outcome{Authoritative: true, EvidenceDigest: evidence}, journal.ErrInvalidTransition},
	}
	for _, st := range steps {
		if _, err := s.Transition(ctx, "op-1", st.to, st.o); !errors.Is(err, st.want) {
			t.Fatalf("Transition to %s: %v, want %v", st.to, err, st.want)
		}
	}
	r, err = s.Record(ctx, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != journal.StateExecuted || string(r.Result) != `{"paid":true}` || len(r.History) != 4 || len(r.Receipts) != 2 {
		t.Fatalf("final record: state %s result %q, %d steps, %d receipts", r.State, r.Result, len(r.History), len(r.Receipts))
	}
	if _, err := s.Transition(ctx, "op-missing", journal.StateInvoked, journal.Outcome{}); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("unknown operation: %v", err)
	}

	// The INDETERMINATE path and reconciliation.
	b := f.sign(t, 2)
	pend := pendingFor(b, "op-3")
	pend.State = journal.StateDispatchPending
	if _, err := s.Begin(ctx, pend, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, "op-3", journal.StateIndeterminate, journal.Outcome{Reason: "timeout_after_dispatch"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, "op-3", journal.StateExecuted, journal.Outcome{Authoritative: true, EvidenceDigest: evidence}); !errors.Is(err, journal.ErrInvalidTransition) {
		t.Fatalf("INDETERMINATE left without reconciliation: %v", err)
	}
	recon := journal.Reconciliation{OperationID: "op-3", ActionDigest: b.Binding.ActionDigest, Upstream: b.Binding.Destination, Outcome: journal.StateExecuted, EvidenceDigest: evidence}
	if _, err := s.Reconcile(ctx, "op-3", recon); !errors.Is(err, journal.ErrReconciliationRefused) {
		t.Fatalf("unauthenticated reconciliation: %v", err)
	}
	list, err := s.InState(ctx, journal.StateIndeterminate)
	if err != nil || len(list) != 1 || list[0].OperationID != "op-3" {
		t.Fatalf("InState(INDETERMINATE) = %v, %v", list, err)
	}
	recon.Authenticated = true
	r, err = s.Reconcile(ctx, "op-3", recon)
	if err != nil || r.State != journal.StateExecuted || r.Reason != journal.ReasonAuthenticatedReconciliation {
		t.Fatalf("authenticated reconciliation: %+v, %v", r, err)
	}
	if list, _ := s.InState(ctx, journal.StateIndeterminate); len(list) != 0 {
		t.Fatalf("still INDETERMINATE: %v", list)
	}
	if _, err := s.InState(ctx, "BOGUS"); !errors.Is(err, journal.ErrInvalidRecord) {
		t.Fatalf("InState of an unknown state: %v", err)
	}
	if _, err := s.Begin(ctx, journal.DispatchRecord{OperationID: "op-bad"}, nil); !errors.Is(err, journal.ErrInvalidRecord) {
		t.Fatalf("Begin of a malformed record: %v", err)
	}
}

func TestDurabilityAcrossReopen(t *testing.T) {
	f := newFixture(t)
	s, err := Open(f.path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	auths := f.issueN(t, s, 3)
	op := journal.NewOperationID()
	if _, _, err := s.ConsumeAndPend(ctx, auths[0].ID, auths[0].Binding, pendingFor(auths[0], op), []byte("receipt")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, op, journal.StateExecuted, journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("resp"), Result: []byte("result")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(ctx, auths[1].ID, auths[1].Binding, authority.Consumption{OperationID: "op-lease-style"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "", auths[0].ID); !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want unavailable", err)
	}

	s2 := f.open(t)
	for i, want := range []authority.State{authority.StateConsumed, authority.StateConsumed, authority.StateIssued} {
		got, err := s2.Get(ctx, "", auths[i].ID)
		if err != nil || got.State != want {
			t.Fatalf("authority %d after reopen: %s, %v; want %s", i, got.State, err, want)
		}
		if err := f.signer.Verifier().VerifySignature(got.Authority); err != nil {
			t.Fatalf("authority %d read back does not verify: %v", i, err)
		}
	}
	r, err := s2.Record(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != journal.StateExecuted || string(r.Result) != "result" || string(r.Receipts[0]) != "receipt" || len(r.History) != 2 || !r.CreatedAt.Equal(t0) {
		t.Fatalf("record after reopen: %+v", r)
	}
	if _, err := s2.Consume(ctx, auths[0].ID, auths[0].Binding, authority.Consumption{OperationID: "op-x"}); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("consumed authority usable after reopen: %v", err)
	}
	if _, err := s2.Consume(ctx, auths[2].ID, auths[2].Binding, authority.Consumption{OperationID: "op-y"}); err != nil {
		t.Fatalf("issued authority not consumable after reopen: %v", err)
	}
}

func TestRecoverOnStart(t *testing.T) {
	f := newFixture(t)
	s, err := Open(f.path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	auths := f.issueN(t, s, 6)
	evidence := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("resp")}
	// One record per state: how far each dispatch got before the "crash".
	plan := []struct {
		steps []journal.State
		after journal.State
	}{
		{nil, journal.StateIndeterminate},                                   // DISPATCH_PENDING
		{[]journal.State{journal.StateInvoked}, journal.StateIndeterminate}, // INVOKED
		{[]journal.State{journal.StateExecuted}, journal.StateExecuted},     // terminal
		{[]journal.State{journal.StateFailed}, journal.StateFailed},         // terminal
		{[]journal.State{journal.StateIndeterminate}, journal.StateIndeterminate},
		{[]journal.State{journal.StateInvoked, journal.StateExecuted}, journal.StateExecuted},
	}
	ops := make([]string, len(plan))
	for i, p := range plan {
		ops[i] = journal.NewOperationID()
		if _, _, err := s.ConsumeAndPend(ctx, auths[i].ID, auths[i].Binding, pendingFor(auths[i], ops[i]), nil); err != nil {
			t.Fatal(err)
		}
		for _, st := range p.steps {
			o := journal.Outcome{}
			if st.Terminal() {
				o = evidence
			}
			if _, err := s.Transition(ctx, ops[i], st, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A Lease-style record that never reached DISPATCH_PENDING stays CONSUMED: nothing was sent.
	leaseRec := pendingFor(f.sign(t, 100), "op-consumed-only")
	leaseRec.State = journal.StateConsumed
	if _, err := s.Begin(ctx, leaseRec, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := f.open(t)
	n, err := s2.RecoverOnStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("RecoverOnStart promoted %d records, want 2", n)
	}
	for i, p := range plan {
		r, err := s2.Record(ctx, ops[i])
		if err != nil {
			t.Fatal(err)
		}
		if r.State != p.after {
			t.Fatalf("record %d: %s, want %s", i, r.State, p.after)
		}
		if i < 2 && r.Reason != journal.ReasonRecoveredOnStart {
			t.Fatalf("record %d: reason %q", i, r.Reason)
		}
		// The authority stays spent whatever happened: no retry is possible (AEB "Perform
		// Authenticated Reconciliation": never resurrect the original authorization).
		if _, err := s2.Consume(ctx, auths[i].ID, auths[i].Binding, authority.Consumption{OperationID: "op-retry"}); !errors.Is(err, authority.ErrConsumed) {
			t.Fatalf("authority %d after recovery: %v, want ErrConsumed", i, err)
		}
	}
	if r, _ := s2.Record(ctx, "op-consumed-only"); r.State != journal.StateConsumed {
		t.Fatalf("CONSUMED record became %s", r.State)
	}
	if n, err := s2.RecoverOnStart(ctx); err != nil || n != 0 {
		t.Fatalf("second RecoverOnStart: %d, %v", n, err)
	}
}

func TestContextDeadline(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	auths := f.issueN(t, s, 2)
	a := auths[0]

	t.Run("expired before the call", func(t *testing.T) {
		dead, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err := s.ConsumeAndPend(dead, a.ID, a.Binding, pendingFor(a, "op-dead"), nil)
		if !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("ConsumeAndPend with a cancelled context: %v", err)
		}
	})

	t.Run("deadline while waiting for the commit", func(t *testing.T) {
		// Hold the writer lock so that the consume cannot commit, and let its deadline pass
		// only once it waits in the committer (a timer could fire earlier, during the verify,
		// on a loaded machine — and then nothing would be waiting for the commit).
		tx, err := s.own.db.Begin(true)
		if err != nil {
			t.Fatal(err)
		}
		c := s.own.l.commit
		short := newDeadlineCtx()
		res := make(chan error, 1)
		go func() {
			_, _, err := s.ConsumeAndPend(short, a.ID, a.Binding, pendingFor(a, "op-slow"), nil)
			res <- err
		}()
		if !eventually(c, func() bool { return c.leading && len(c.queue) == 0 }) {
			tx.Rollback()
			t.Fatal("the consume never reached the commit")
		}
		short.expire()
		if err := <-res; !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, journal.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			tx.Rollback()
			t.Fatalf("ConsumeAndPend past its deadline: %v", err)
		}
		// Queue a write without deadline behind the abandoned one; the committer runs groups in
		// order, so when it returns, the abandoned consume's group has been committed.
		done := make(chan error, 1)
		go func() {
			_, err := s.Consume(ctx, auths[1].ID, auths[1].Binding, authority.Consumption{OperationID: "op-other"})
			done <- err
		}()
		if !eventually(c, func() bool { return len(c.queue) > 0 }) {
			tx.Rollback()
			t.Fatal("the second write was never queued")
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "", a.ID)
		if err != nil || got.State != authority.StateIssued {
			t.Fatalf("abandoned consume took effect: %s, %v", got.State, err)
		}
		if _, err := s.Record(ctx, "op-slow"); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("abandoned consume wrote its record: %v", err)
		}
	})
}

// deadlineCtx is a context whose deadline passes when the test calls expire.
type deadlineCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *deadlineCtx) expire() { c.once.Do(func() { close(c.done) }) }

// eventually polls cond under the committer's lock for up to ten seconds and reports whether
// it became true.
func eventually(c *committer, cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

func TestExclusiveOpenRefusesSecondOpener(t *testing.T) {
	f := newFixture(t)
	f.open(t)
	_, err := Open(f.path, Options{Verifier: f.signer.Verifier(), OpenTimeout: 100 * time.Millisecond})
	if !errors.Is(err, authority.ErrStoreUnavailable) {
		t.Fatalf("second exclusive Open: %v, want unavailable", err)
	}
}

func TestSchemaMismatch(t *testing.T) {
	f := newFixture(t)
	db, err := bolt.Open(f.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keySchema, []byte("actgate-boltstore/999"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(f.path, f.options()); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("Open of a file with another schema: %v", err)
	}
}

func TestOpenNeedsVerifier(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{}); err == nil {
		t.Fatal("Open without a verifier succeeded")
	}
}

func TestFileMode(t *testing.T) {
	f := newFixture(t)
	f.open(t)
	fi, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("store file mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestOneRecordPerAuthority: however a dispatch record was written — with the consume
// (ConsumeAndPend) or after it (Consume, then Begin) — an authority has exactly one, and
// ByAuthority finds it.
func TestOneRecordPerAuthority(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	auths := f.issueN(t, s, 2)

	a := auths[0]
	opA := journal.NewOperationID()
	if _, _, err := s.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, opA), nil); err != nil {
		t.Fatal(err)
	}
	again := pendingFor(a, journal.NewOperationID())
	again.State = journal.StateDispatchPending
	if _, err := s.Begin(ctx, again, nil); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("Begin for an authority ConsumeAndPend already journaled: %v", err)
	}

	b := auths[1]
	opB := journal.NewOperationID()
	if _, err := s.Consume(ctx, b.ID, b.Binding, authority.Consumption{OperationID: opB}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ByAuthority(ctx, b.ID); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("record before Begin: %v", err)
	}
	rec := pendingFor(b, opB)
	rec.State = journal.StateConsumed
	if _, err := s.Begin(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	rec.OperationID = journal.NewOperationID()
	if _, err := s.Begin(ctx, rec, nil); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("second Begin for one authority: %v", err)
	}
	for id, op := range map[string]string{a.ID: opA, b.ID: opB} {
		r, err := s.ByAuthority(ctx, id)
		if err != nil || r.OperationID != op {
			t.Fatalf("ByAuthority(%s) = %s, %v; want %s", id, r.OperationID, err, op)
		}
	}
}
