package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/aeb"
)

func testExpectation() Expectation {
	return Expectation{Query: testQuery(), Agent: "system:serviceaccount:shop:agent", SinkID: "billing-sink", NotBefore: t0.Add(-time.Minute)}
}

func TestJudge(t *testing.T) {
	const window = 5 * time.Minute
	now := t0.Add(time.Minute)
	q := testQuery()
	q.Nonce = nonceA
	with := func(mutate func(*Answer)) Answer {
		a := Answer{Query: q, Outcome: OutcomeExecuted, ObservedAt: t0, EvidenceDigest: digestB}
		if mutate != nil {
			mutate(&a)
		}
		return a
	}
	for _, tc := range []struct {
		name   string
		answer Answer
		now    time.Time
		want   Finding
		reason aeb.Reason
		state  v1alpha1.ActState
	}{
		{"executed", with(nil), now, FindingExecuted, aeb.ReasonAuthenticatedReconciliation, v1alpha1.ActStateExecuted},
		{"failed", with(func(a *Answer) { a.Outcome = OutcomeFailed }), now, FindingFailed, aeb.ReasonAuthenticatedReconciliation, v1alpha1.ActStateFailed},
		{"unknown", with(func(a *Answer) { a.Outcome = OutcomeUnknown }), now, FindingUnknown, aeb.ReasonReconciliationIndeterminate, ""},
		{"other operation", with(func(a *Answer) { a.OperationID = "op-0002" }), now, FindingMismatch, aeb.ReasonReconciliationBindingMismatch, ""},
		{"other action digest", with(func(a *Answer) { a.ActionDigest = digestB }), now, FindingMismatch, aeb.ReasonReconciliationBindingMismatch, ""},
		{"other tool", with(func(a *Answer) { a.Tool = "refund" }), now, FindingMismatch, aeb.ReasonReconciliationBindingMismatch, ""},
		{"other server", with(func(a *Answer) { a.Server = "ledger" }), now, FindingMismatch, aeb.ReasonReconciliationBindingMismatch, ""},
		{"operation id that needs hashing", with(func(a *Answer) { a.OperationID = "op 0001" }), now, FindingMismatch, aeb.ReasonReconciliationBindingMismatch, ""},
		{"mismatch outranks failed", with(func(a *Answer) { a.OperationID = "op-0002"; a.Outcome = OutcomeFailed }), now, FindingMismatch, aeb.ReasonReconciliationBindingMismatch, ""},
		{"observed before the act existed", with(func(a *Answer) { a.ObservedAt = t0.Add(-2 * time.Minute) }), now, FindingStale, aeb.ReasonReconciliationStale, ""},
		{"observed in the future", with(func(a *Answer) { a.ObservedAt = now.Add(time.Second) }), now, FindingStale, aeb.ReasonReconciliationStale, ""},
		{"older than the window", with(nil), t0.Add(window + time.Second), FindingStale, aeb.ReasonReconciliationStale, ""},
		{"exactly at the window's end", with(nil), t0.Add(window), FindingStale, aeb.ReasonReconciliationStale, ""},
		{"just inside the window", with(nil), t0.Add(window - time.Nanosecond), FindingExecuted, aeb.ReasonAuthenticatedReconciliation, v1alpha1.ActStateExecuted},
		{"observed at creation", with(func(a *Answer) { a.ObservedAt = t0.Add(-time.Minute) }), now, FindingExecuted, aeb.ReasonAuthenticatedReconciliation, v1alpha1.ActStateExecuted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Judge(testExpectation(), tc.answer, window, tc.now)
			if err != nil {
				t.Fatalf("Judge: %v", err)
			}
			if v.Finding != tc.want || v.Reason != tc.reason || v.State != tc.state {
				t.Fatalf("Judge = %+v, want %s/%s/%q", v, tc.want, tc.reason, tc.state)
			}
			if v.Finding.Settles() != (tc.state != "") {
				t.Fatalf("Settles = %v for %s", v.Finding.Settles(), v.Finding)
			}
			if tc.state != "" && v.EvidenceDigest != digestB {
				t.Fatalf("EvidenceDigest = %q", v.EvidenceDigest)
			}
			if tc.state == "" && v.EvidenceDigest != "" {
				t.Fatalf("a finding that does not settle carries evidence %q", v.EvidenceDigest)
			}
		})
	}
}

func TestJudgeRefusesUnusableExpectation(t *testing.T) {
	exp := testExpectation()
	exp.ActionDigest = "sha256:nope"
	if _, err := Judge(exp, Answer{Query: testQuery(), Outcome: OutcomeExecuted, ObservedAt: t0}, time.Minute, t0); err == nil {
		t.Fatal("Judge accepted an expectation without a valid action digest")
	}
}

func TestFindingResult(t *testing.T) {
	for f, want := range map[Finding]v1alpha1.ReconciliationResult{
		FindingExecuted:        v1alpha1.ReconciliationExecuted,
		FindingFailed:          v1alpha1.ReconciliationFailed,
		FindingUnknown:         v1alpha1.ReconciliationNoEvidence,
		FindingStale:           v1alpha1.ReconciliationNoEvidence,
		FindingMalformed:       v1alpha1.ReconciliationNoEvidence,
		FindingMismatch:        v1alpha1.ReconciliationMismatch,
		FindingUnauthenticated: v1alpha1.ReconciliationUnauthenticated,
		FindingUnreachable:     v1alpha1.ReconciliationUnreachable,
	} {
		if got := f.Result(); got != want {
			t.Errorf("%s.Result() = %s, want %s", f, got, want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Finding
		ok   bool
	}{
		{errorf(ErrUnreachable, "x"), FindingUnreachable, true},
		{errorf(ErrUnauthenticated, "x"), FindingUnauthenticated, true},
		{errorf(ErrMalformed, "x"), FindingMalformed, true},
		{errorf(ErrReplayed, "x"), FindingStale, true},
		{errorf(ErrConfig, "x"), "", false},
		{errors.New("other"), "", false},
	} {
		got, ok := Classify(tc.err)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Classify(%v) = %s, %v", tc.err, got, ok)
		}
	}
}
