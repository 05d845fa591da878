package journal

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	t0        = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)
	digestA   = "sha256:" + strings.Repeat("a", 64)
	digestB   = "sha256:" + strings.Repeat("b", 64)
	evidence1 = "sha256:" + strings.Repeat("1", 64)
	evidence2 = "sha256:" + strings.Repeat("2", 64)
)

func newRecord(t *testing.T, s State) DispatchRecord {
	t.Helper()
	rec, err := NewRecord(DispatchRecord{
		OperationID:     "op-1",
		ActID:           "act-1",
		AuthorityID:     "authz-1",
		ActionDigest:    digestA,
		ArgumentsDigest: digestB,
		Upstream:        "mcp://payments.example",
		Tool:            "payout",
		State:           StateDispatchPending,
	}, nil, "inst-1", t0)
	if err != nil {
		t.Fatal(err)
	}
	rec.State = s // the state under test, however it was reached
	return rec
}

func authoritative(d string) Outcome { return Outcome{Authoritative: true, EvidenceDigest: d} }

// TestApply is the transition table of AEB "Classify the Effect Outcome" as the invoker sees it.
func TestApply(t *testing.T) {
	cases := []struct {
		name    string
		from    State
		to      State
		o       Outcome
		wantErr error
	}{
		{"consumed to pending", StateConsumed, StateDispatchPending, Outcome{}, nil},
		{"consumed cannot invoke without pending", StateConsumed, StateInvoked, Outcome{}, ErrInvalidTransition},
		{"consumed cannot execute", StateConsumed, StateExecuted, authoritative(evidence1), ErrInvalidTransition},
		{"pending to invoked", StateDispatchPending, StateInvoked, Outcome{}, nil},
		{"pending to executed with evidence", StateDispatchPending, StateExecuted, authoritative(evidence1), nil},
		{"pending to failed with evidence", StateDispatchPending, StateFailed, authoritative(evidence1), nil},
		{"pending to indeterminate", StateDispatchPending, StateIndeterminate, Outcome{Reason: "timeout_after_dispatch"}, nil},
		{"pending back to consumed", StateDispatchPending, StateConsumed, Outcome{}, ErrInvalidTransition},
		{"invoked to executed", StateInvoked, StateExecuted, authoritative(evidence1), nil},
		{"invoked to failed", StateInvoked, StateFailed, authoritative(evidence1), nil},
		{"invoked to indeterminate", StateInvoked, StateIndeterminate, Outcome{}, nil},
		{"invoked to invoked", StateInvoked, StateInvoked, Outcome{}, ErrInvalidTransition},
		{"invoked back to pending", StateInvoked, StateDispatchPending, Outcome{}, ErrInvalidTransition},
		// FAILED only on authoritative evidence: a timeout or local error is not FAILED.
		{"failed without authority", StateInvoked, StateFailed, Outcome{EvidenceDigest: evidence1}, ErrEvidenceRequired},
		{"failed without digest", StateInvoked, StateFailed, Outcome{Authoritative: true}, ErrEvidenceRequired},
		{"failed with malformed digest", StateInvoked, StateFailed, Outcome{Authoritative: true, EvidenceDigest: "sha256:XYZ"}, ErrEvidenceRequired},
		{"executed without authority", StateInvoked, StateExecuted, Outcome{EvidenceDigest: evidence1}, ErrEvidenceRequired},
		// No EXECUTED → anything, no FAILED → anything.
		{"executed to failed", StateExecuted, StateFailed, authoritative(evidence1), ErrInvalidTransition},
		{"executed to indeterminate", StateExecuted, StateIndeterminate, Outcome{}, ErrInvalidTransition},
		{"executed to pending", StateExecuted, StateDispatchPending, Outcome{}, ErrInvalidTransition},
		{"failed to executed", StateFailed, StateExecuted, authoritative(evidence1), ErrInvalidTransition},
		{"failed to pending", StateFailed, StateDispatchPending, Outcome{}, ErrInvalidTransition},
		// INDETERMINATE leaves only through Reconcile.
		{"indeterminate to executed", StateIndeterminate, StateExecuted, authoritative(evidence1), ErrInvalidTransition},
		{"indeterminate to failed", StateIndeterminate, StateFailed, authoritative(evidence1), ErrInvalidTransition},
		{"indeterminate to pending", StateIndeterminate, StateDispatchPending, Outcome{}, ErrInvalidTransition},
		{"unknown target", StateInvoked, State("DONE"), Outcome{}, ErrInvalidTransition},
		{"result on non-terminal", StateDispatchPending, StateInvoked, Outcome{Result: []byte("x")}, ErrInvalidRecord},
		{"bad evidence on non-terminal", StateDispatchPending, StateIndeterminate, Outcome{EvidenceDigest: "md5:1"}, ErrInvalidRecord},
		{"oversized receipt", StateDispatchPending, StateInvoked, Outcome{Receipt: make([]byte, MaxReceiptBytes+1)}, ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecord(t, tc.from)
			got, err := Apply(rec, tc.to, tc.o, t0.Add(time.Second))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Apply(%s → %s) error = %v, want %v", tc.from, tc.to, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if got.State != tc.from || len(got.History) != len(rec.History) {
					t.Fatalf("failed transition changed the record: state %s, %d steps", got.State, len(got.History))
				}
				return
			}
			if got.State != tc.to {
				t.Fatalf("state = %s, want %s", got.State, tc.to)
			}
			last := got.History[len(got.History)-1]
			if last.From != tc.from || last.To != tc.to || !last.At.Equal(t0.Add(time.Second)) || last.Reason != tc.o.Reason {
				t.Fatalf("history step = %+v", last)
			}
			if tc.to.Terminal() && got.CompletedAt.IsZero() {
				t.Fatal("terminal outcome without CompletedAt")
			}
			if tc.to == StateInvoked && got.InvokedAt.IsZero() {
				t.Fatal("INVOKED without InvokedAt")
			}
			if rec.State != tc.from || len(rec.History) != 1 {
				t.Fatal("Apply modified its input")
			}
		})
	}
}

func TestApplyRecordsResultReceiptAndIsIdempotent(t *testing.T) {
	rec := newRecord(t, StateInvoked)
	o := Outcome{Authoritative: true, EvidenceDigest: evidence1, Result: []byte(`{"ok":true}`), Receipt: []byte("r1"), Reason: "provider_committed"}
	got, err := Apply(rec, StateExecuted, o, t0)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Result) != `{"ok":true}` || got.EvidenceDigest != evidence1 || len(got.Receipts) != 1 || string(got.Receipts[0]) != "r1" {
		t.Fatalf("record = %+v", got)
	}
	o.Result[0] = 'X' // the record must not alias the caller's bytes
	o.Receipt[0] = 'X'
	if string(got.Result) != `{"ok":true}` || string(got.Receipts[0]) != "r1" {
		t.Fatal("record aliases caller's result or receipt")
	}
	again, err := Apply(got, StateExecuted, authoritative(evidence1), t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("repeating the same terminal outcome: %v", err)
	}
	if len(again.History) != len(got.History) || !again.UpdatedAt.Equal(got.UpdatedAt) {
		t.Fatal("an idempotent repeat changed the record")
	}
	if _, err := Apply(got, StateExecuted, authoritative(evidence2), t0); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("EXECUTED again with different evidence: %v, want ErrInvalidTransition", err)
	}
}

func TestReceiptLimit(t *testing.T) {
	rec := newRecord(t, StateDispatchPending)
	rec.Receipts = make([][]byte, MaxReceipts)
	if _, err := Apply(rec, StateInvoked, Outcome{Receipt: []byte("r")}, t0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("receipt over the limit: %v", err)
	}
}

// TestApplyReconciliation follows AEB "Perform Authenticated Reconciliation".
func TestApplyReconciliation(t *testing.T) {
	match := func(outcome State) Reconciliation {
		return Reconciliation{Authenticated: true, OperationID: "op-1", ActionDigest: digestA, Upstream: "mcp://payments.example", Outcome: outcome, EvidenceDigest: evidence1}
	}
	with := func(r Reconciliation, f func(*Reconciliation)) Reconciliation { f(&r); return r }
	cases := []struct {
		name    string
		from    State
		r       Reconciliation
		wantErr error
		want    State
	}{
		{"authenticated executed", StateIndeterminate, match(StateExecuted), nil, StateExecuted},
		{"authenticated failed", StateIndeterminate, match(StateFailed), nil, StateFailed},
		{"unauthenticated", StateIndeterminate, with(match(StateExecuted), func(r *Reconciliation) { r.Authenticated = false }), ErrReconciliationRefused, StateIndeterminate},
		{"other operation", StateIndeterminate, with(match(StateExecuted), func(r *Reconciliation) { r.OperationID = "op-2" }), ErrReconciliationRefused, StateIndeterminate},
		{"other action", StateIndeterminate, with(match(StateExecuted), func(r *Reconciliation) { r.ActionDigest = digestB }), ErrReconciliationRefused, StateIndeterminate},
		{"other provider", StateIndeterminate, with(match(StateExecuted), func(r *Reconciliation) { r.Upstream = "mcp://evil.example" }), ErrReconciliationRefused, StateIndeterminate},
		{"no evidence", StateIndeterminate, with(match(StateExecuted), func(r *Reconciliation) { r.EvidenceDigest = "" }), ErrEvidenceRequired, StateIndeterminate},
		{"outcome indeterminate", StateIndeterminate, match(StateIndeterminate), ErrInvalidTransition, StateIndeterminate},
		{"outcome pending", StateIndeterminate, match(StateDispatchPending), ErrInvalidTransition, StateIndeterminate},
		{"live invoked record", StateInvoked, match(StateExecuted), ErrInvalidTransition, StateInvoked},
		{"live pending record", StateDispatchPending, match(StateFailed), ErrInvalidTransition, StateDispatchPending},
		{"executed to failed", StateExecuted, match(StateFailed), ErrInvalidTransition, StateExecuted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyReconciliation(newRecord(t, tc.from), tc.r, t0)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if got.State != tc.want {
				t.Fatalf("state = %s, want %s", got.State, tc.want)
			}
			if tc.wantErr == nil && got.Reason != ReasonAuthenticatedReconciliation {
				t.Fatalf("reason = %q", got.Reason)
			}
		})
	}
}

func TestRecover(t *testing.T) {
	for _, s := range []State{StateConsumed, StateDispatchPending, StateInvoked, StateExecuted, StateFailed, StateIndeterminate} {
		t.Run(string(s), func(t *testing.T) {
			got, changed := Recover(newRecord(t, s), t0)
			want := s
			if s == StateDispatchPending || s == StateInvoked {
				want = StateIndeterminate
			}
			if got.State != want || changed != (want != s) {
				t.Fatalf("Recover(%s) = %s changed=%v, want %s", s, got.State, changed, want)
			}
			if changed && got.Reason != ReasonRecoveredOnStart {
				t.Fatalf("reason = %q", got.Reason)
			}
		})
	}
}

func TestValidateNew(t *testing.T) {
	good := DispatchRecord{OperationID: "op-1", ActID: "act-1", AuthorityID: "authz-1", ActionDigest: digestA, ArgumentsDigest: digestB, Upstream: "u", Tool: "t", State: StateDispatchPending}
	with := func(f func(*DispatchRecord)) DispatchRecord { r := good; f(&r); return r }
	cases := []struct {
		name string
		rec  DispatchRecord
		ok   bool
	}{
		{"good pending", good, true},
		{"good consumed", with(func(r *DispatchRecord) { r.State = StateConsumed }), true},
		{"no operation", with(func(r *DispatchRecord) { r.OperationID = "" }), false},
		{"long operation", with(func(r *DispatchRecord) { r.OperationID = strings.Repeat("o", MaxIDLength+1) }), false},
		{"no act", with(func(r *DispatchRecord) { r.ActID = "" }), false},
		{"no authority", with(func(r *DispatchRecord) { r.AuthorityID = "" }), false},
		{"no upstream", with(func(r *DispatchRecord) { r.Upstream = "" }), false},
		{"no tool", with(func(r *DispatchRecord) { r.Tool = "" }), false},
		{"uppercase digest", with(func(r *DispatchRecord) { r.ActionDigest = "sha256:" + strings.Repeat("A", 64) }), false},
		{"short digest", with(func(r *DispatchRecord) { r.ArgumentsDigest = "sha256:abc" }), false},
		{"begins invoked", with(func(r *DispatchRecord) { r.State = StateInvoked }), false},
		{"begins executed", with(func(r *DispatchRecord) { r.State = StateExecuted }), false},
		{"begins with result", with(func(r *DispatchRecord) { r.Result = []byte("x") }), false},
		{"begins with evidence", with(func(r *DispatchRecord) { r.EvidenceDigest = evidence1 }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateNew(tc.rec)
			if tc.ok != (err == nil) {
				t.Fatalf("ValidateNew = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("error %v does not wrap ErrInvalidRecord", err)
			}
		})
	}
}

func TestCodesRoundTrip(t *testing.T) {
	for _, cs := range codeSentinels {
		t.Run(string(cs.code), func(t *testing.T) {
			err := ErrorOf(cs.code, "remote said so")
			if !errors.Is(err, cs.err) || CodeOf(err) != cs.code || err.Error() != "remote said so" {
				t.Fatalf("ErrorOf(%s) = %v (code %s)", cs.code, err, CodeOf(err))
			}
		})
	}
	if err := ErrorOf("NO_SUCH_CODE", "x"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unknown code gave %v, want ErrUnavailable", err)
	}
	if CodeOf(errors.New("other")) != "" {
		t.Fatal("CodeOf of a foreign error is not empty")
	}
}

func TestNewOperationID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewOperationID()
		if len(id) != 35 || !strings.HasPrefix(id, "op-") || seen[id] {
			t.Fatalf("bad or repeated operation ID %q", id)
		}
		seen[id] = true
	}
	// Later IDs sort after earlier ones (the millisecond prefix), which keeps journal writes local.
	first := NewOperationID()
	time.Sleep(2 * time.Millisecond)
	if second := NewOperationID(); second <= first {
		t.Fatalf("%s issued after %s sorts before it", second, first)
	}
}
