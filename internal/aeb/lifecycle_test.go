package aeb

import (
	"errors"
	"testing"
	"time"
)

func admittedAssessment(t *testing.T) Assessment {
	t.Helper()
	c := admissionCase()
	r, err := Admit(c.Operation, c.Evidence, c.LocalPolicy, c.Reservation, c.EvaluatedAt)
	if err != nil || !r.Admitted() {
		t.Fatalf("baseline admission: %+v, %v", r, err)
	}
	return r.Assessment()
}

// TestObserve classifies every outcome a dispatch can report (AEB "Classify the Effect Outcome").
func TestObserve(t *testing.T) {
	a := admittedAssessment(t)
	op := baseOperation()
	pending := held(CustodyInvoking, ProviderNotInvoked, EffectNotObserved)
	for _, tc := range []struct {
		name    string
		obs     Observation
		want    want
		outcome Outcome
	}{
		{"provider committed as requested",
			Observation{SourceProviderEvidence, ProviderCommitted, EffectObservedAsRequested},
			passing.lifecycle(ReservationConsumed, CustodyTerminal, ProviderCommitted, EffectObservedAsRequested,
				RetryRefused, ReconciliationNotRequired, DecisionRecorded, ReasonProviderCommittedEffectObserved),
			OutcomeExecuted},
		{"provider committed, effect diverged",
			Observation{SourceProviderEvidence, ProviderCommitted, EffectDiverged},
			passing.lifecycle(ReservationConsumed, CustodyTerminal, ProviderCommitted, EffectDiverged,
				RetryRefused, ReconciliationNotRequired, DecisionRecorded, ReasonProviderCommittedEffectDiverged),
			OutcomeExecuted},
		// Committed but not observed stays open: the effect is what reconciliation must establish.
		{"provider committed, effect not observed",
			Observation{SourceProviderEvidence, ProviderCommitted, EffectNotObserved},
			passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderCommitted, EffectNotObserved,
				RetryRefused, ReconciliationRequired, DecisionIndeterminate, ReasonProviderCommittedEffectUnobserved),
			OutcomeExecuted},
		{"provider committed, effect indeterminate",
			Observation{SourceProviderEvidence, ProviderCommitted, EffectIndeterminate},
			passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderCommitted, EffectIndeterminate,
				RetryRefused, ReconciliationRequired, DecisionIndeterminate, ReasonProviderCommittedEffectUnobserved),
			OutcomeExecuted},
		// Proven not committed is terminal, and still never frees this operation for a retry.
		{"provider proven not committed",
			Observation{SourceProviderEvidence, ProviderProvenNotCommitted, EffectNotObserved},
			passing.lifecycle(ReservationConsumed, CustodyTerminal, ProviderProvenNotCommitted, EffectNotObserved,
				RetryRefused, ReconciliationNotRequired, DecisionRecorded, ReasonProviderProvenNotCommitted),
			OutcomeFailed},
		{"timeout after dispatch",
			Observation{SourceTimeoutAfterDispatch, ProviderIndeterminate, EffectIndeterminate},
			passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderIndeterminate, EffectIndeterminate,
				RetryRefused, ReconciliationRequired, DecisionIndeterminate, ReasonTimeoutAfterDispatch),
			OutcomeIndeterminate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Observe(a, op, pending, tc.obs)
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tc.want)
			if got.Outcome() != tc.outcome {
				t.Errorf("Outcome() = %s, want %s", got.Outcome(), tc.outcome)
			}
		})
	}
}

func TestObserveRejects(t *testing.T) {
	a := admittedAssessment(t)
	op := baseOperation()
	pending := held(CustodyInvoking, ProviderNotInvoked, EffectNotObserved)
	ok := Observation{SourceProviderEvidence, ProviderCommitted, EffectObservedAsRequested}
	other := pending
	other.OperationID = "operation:other:1"
	for _, tc := range []struct {
		name  string
		a     Assessment
		prior PriorOperation
		obs   Observation
		code  ErrorCode
		path  string
	}{
		// A timeout is never evidence of either outcome.
		{"timeout claiming commit", a, pending, Observation{SourceTimeoutAfterDispatch, ProviderCommitted, EffectObservedAsRequested},
			CodeInvalidCombination, "observation"},
		{"timeout claiming not committed", a, pending, Observation{SourceTimeoutAfterDispatch, ProviderProvenNotCommitted, EffectNotObserved},
			CodeInvalidCombination, "observation"},
		{"not invoked after dispatch", a, pending, Observation{SourceProviderEvidence, ProviderNotInvoked, EffectNotObserved},
			CodeInvalidEnum, "observation.provider_outcome"},
		{"effect observed without commit", a, pending, Observation{SourceProviderEvidence, ProviderProvenNotCommitted, EffectObservedAsRequested},
			CodeInvalidCombination, "observation"},
		{"already terminal", a, held(CustodyTerminal, ProviderCommitted, EffectObservedAsRequested), ok,
			CodeInvalidCombination, "prior.custody"},
		{"record of another operation", a, other, ok, CodeInvalidCombination, "prior.operation_id"},
		{"zero assessment", Assessment{}, pending, ok, CodeInvalidEnum, "assessment.verification"},
		{"assessment with a lifecycle reason", Assessment{VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
			SatisfactionSatisfied, AuthorizationAuthorized, []Reason{ReasonOperationReplay}}, pending, ok,
			CodeInvalidEnum, "assessment.reasons[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Observe(tc.a, op, tc.prior, tc.obs)
			assertInputError(t, err, tc.code, tc.path)
		})
	}
}

func assertInputError(t *testing.T, err error, code ErrorCode, path string) {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("err = %v, want *InputError %s at %s", err, code, path)
	}
	if ie.Code != code || ie.Path != path {
		t.Errorf("error = %s at %s, want %s at %s", ie.Code, ie.Path, code, path)
	}
}

// TestRetryNeverReinvokes: a retry of a held operation is refused in every custody and outcome,
// and reports whether reconciliation is still needed.
func TestRetryNeverReinvokes(t *testing.T) {
	a := admittedAssessment(t)
	op := baseOperation()
	for _, tc := range []struct {
		name  string
		prior PriorOperation
		rc    ReconciliationDecision
	}{
		{"dispatch pending", held(CustodyInvoking, ProviderNotInvoked, EffectNotObserved), ReconciliationRequired},
		{"indeterminate", held(CustodyInvoking, ProviderIndeterminate, EffectIndeterminate), ReconciliationRequired},
		{"committed, effect unobserved", held(CustodyInvoking, ProviderCommitted, EffectNotObserved), ReconciliationRequired},
		{"executed", held(CustodyTerminal, ProviderCommitted, EffectObservedAsRequested), ReconciliationNotRequired},
		{"failed", held(CustodyTerminal, ProviderProvenNotCommitted, EffectNotObserved), ReconciliationNotRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Retry(a, op, tc.prior)
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, passing.lifecycle(ReservationOperationReplay, tc.prior.Custody,
				tc.prior.ProviderOutcome, tc.prior.EffectRelation, RetryRefused, tc.rc, DecisionRefuse,
				ReasonBlindRetryRefused))
		})
	}
	t.Run("record of a different action", func(t *testing.T) {
		prior := held(CustodyInvoking, ProviderIndeterminate, EffectIndeterminate)
		prior.CAID = caidB
		got, err := Retry(a, op, prior)
		if err != nil {
			t.Fatal(err)
		}
		assertResult(t, got, passing.lifecycle(ReservationOperationReplay, CustodyInvoking,
			ProviderIndeterminate, EffectIndeterminate, RetryRefused, ReconciliationRequired, DecisionRefuse,
			ReasonOperationBindingMismatch))
	})
}

// TestReconcile: INDETERMINATE moves only on authenticated, matching, fresh, terminal evidence
// (AEB "Perform Authenticated Reconciliation").
func TestReconcile(t *testing.T) {
	a := admittedAssessment(t)
	op := baseOperation()
	unknown := held(CustodyInvoking, ProviderIndeterminate, EffectIndeterminate)
	dispatched := evalAt.Add(-10 * time.Minute)
	now := evalAt
	fresh := Freshness{DispatchedAt: dispatched, ObservedAt: now.Add(-time.Minute), ValidUntil: now.Add(time.Minute)}
	committed := ReconciliationEvidence{Authenticated: true, ProviderID: providerID, OperationID: op.OperationID,
		CAID: caidA, NormalizedActionDigest: digestA, ProviderOutcome: ProviderCommitted, EffectRelation: EffectObservedAsRequested}
	with := func(f func(*ReconciliationEvidence)) ReconciliationEvidence {
		r := committed
		f(&r)
		return r
	}
	stays := func(reason Reason) want {
		return passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderIndeterminate, EffectIndeterminate,
			RetryRefused, ReconciliationRefused, DecisionRefuse, reason)
	}
	reconciled := func(p ProviderOutcome, e EffectRelation) want {
		return passing.lifecycle(ReservationConsumed, CustodyTerminal, p, e,
			RetryRefused, ReconciliationAccepted, DecisionReconciled, ReasonAuthenticatedReconciliation)
	}
	for _, tc := range []struct {
		name  string
		rec   ReconciliationEvidence
		fresh Freshness
		want  want
	}{
		{"authenticated fresh commit", committed, fresh, reconciled(ProviderCommitted, EffectObservedAsRequested)},
		{"authenticated fresh divergence", with(func(r *ReconciliationEvidence) { r.EffectRelation = EffectDiverged }),
			fresh, reconciled(ProviderCommitted, EffectDiverged)},
		// FAILED by reconciliation still does not resurrect the authority.
		{"authenticated fresh not-committed", with(func(r *ReconciliationEvidence) {
			r.ProviderOutcome, r.EffectRelation = ProviderProvenNotCommitted, EffectNotObserved
		}), fresh, reconciled(ProviderProvenNotCommitted, EffectNotObserved)},
		{"unauthenticated", with(func(r *ReconciliationEvidence) { r.Authenticated = false }), fresh,
			stays(ReasonUnauthenticatedReconciliation)},
		{"unauthenticated and stale reports authentication first", with(func(r *ReconciliationEvidence) { r.Authenticated = false }),
			Freshness{}, stays(ReasonUnauthenticatedReconciliation)},
		{"another operation", with(func(r *ReconciliationEvidence) { r.OperationID = "operation:other:1" }), fresh,
			stays(ReasonReconciliationBindingMismatch)},
		{"another provider", with(func(r *ReconciliationEvidence) { r.ProviderID = "provider:other" }), fresh,
			stays(ReasonReconciliationBindingMismatch)},
		{"another action", with(func(r *ReconciliationEvidence) { r.CAID = caidB }), fresh,
			stays(ReasonReconciliationBindingMismatch)},
		{"another normalized action", with(func(r *ReconciliationEvidence) { r.NormalizedActionDigest = digestB }), fresh,
			stays(ReasonReconciliationBindingMismatch)},
		{"no freshness given", committed, Freshness{}, stays(ReasonReconciliationStale)},
		{"validity ends exactly now", committed,
			Freshness{DispatchedAt: dispatched, ObservedAt: now.Add(-time.Minute), ValidUntil: now},
			stays(ReasonReconciliationStale)},
		{"observed before the dispatch", committed,
			Freshness{DispatchedAt: dispatched, ObservedAt: dispatched.Add(-time.Second), ValidUntil: now.Add(time.Minute)},
			stays(ReasonReconciliationStale)},
		{"observed at the dispatch instant", committed,
			Freshness{DispatchedAt: dispatched, ObservedAt: dispatched, ValidUntil: now.Add(time.Minute)},
			reconciled(ProviderCommitted, EffectObservedAsRequested)},
		{"observed in the future", committed,
			Freshness{DispatchedAt: dispatched, ObservedAt: now.Add(time.Second), ValidUntil: now.Add(time.Minute)},
			stays(ReasonReconciliationStale)},
		// Authenticated and fresh but inconclusive: recorded, still locked.
		{"authenticated fresh but indeterminate", with(func(r *ReconciliationEvidence) {
			r.ProviderOutcome, r.EffectRelation = ProviderIndeterminate, EffectIndeterminate
		}), fresh, passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderIndeterminate, EffectIndeterminate,
			RetryRefused, ReconciliationRequired, DecisionIndeterminate, ReasonReconciliationIndeterminate)},
		{"authenticated fresh commit without observed effect", with(func(r *ReconciliationEvidence) {
			r.EffectRelation = EffectNotObserved
		}), fresh, passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderCommitted, EffectNotObserved,
			RetryRefused, ReconciliationRequired, DecisionIndeterminate, ReasonReconciliationIndeterminate)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Reconcile(a, op, unknown, tc.rec, tc.fresh, now)
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tc.want)
		})
	}
	t.Run("terminal record is not reconciled", func(t *testing.T) {
		_, err := Reconcile(a, op, held(CustodyTerminal, ProviderProvenNotCommitted, EffectNotObserved), committed, fresh, now)
		assertInputError(t, err, CodeInvalidCombination, "prior.custody")
	})
	t.Run("zero clock", func(t *testing.T) {
		_, err := Reconcile(a, op, unknown, committed, fresh, time.Time{})
		assertInputError(t, err, CodeInvalidInstant, "now")
	})
	t.Run("record of a different action", func(t *testing.T) {
		prior := unknown
		prior.NormalizedActionDigest = digestB
		got, err := Reconcile(a, op, prior, committed, fresh, now)
		if err != nil {
			t.Fatal(err)
		}
		assertResult(t, got, passing.lifecycle(ReservationOperationReplay, CustodyInvoking, ProviderIndeterminate,
			EffectIndeterminate, RetryRefused, ReconciliationRequired, DecisionRefuse, ReasonOperationBindingMismatch))
	})
}

// TestEvaluateReconciliationBindingMismatch: the AEB-1 case path refuses evidence about another
// operation too.
func TestEvaluateReconciliationBindingMismatch(t *testing.T) {
	c := admissionCase(func(c *Case) {
		c.Mode = ModeReconciliation
		c.Reservation.PriorOperations = []PriorOperation{held(CustodyInvoking, ProviderIndeterminate, EffectIndeterminate)}
		c.Reconciliation = &ReconciliationEvidence{Authenticated: true, ProviderID: providerID,
			OperationID: "operation:other:1", CAID: caidA, NormalizedActionDigest: digestA,
			ProviderOutcome: ProviderCommitted, EffectRelation: EffectObservedAsRequested}
	})
	got, err := Evaluate(c)
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, got, passing.lifecycle(ReservationConsumed, CustodyInvoking, ProviderIndeterminate,
		EffectIndeterminate, RetryRefused, ReconciliationRefused, DecisionRefuse, ReasonReconciliationBindingMismatch))
}

// TestPostDispatchKeepsEvidenceFindings: a post-dispatch result still reports what the evidence
// chain found (the dimensions stay separate), here for a retry presented with revoked evidence.
func TestPostDispatchKeepsEvidenceFindings(t *testing.T) {
	c := admissionCase(func(c *Case) {
		c.Mode = ModeRetry
		c.Evidence[0].Status.Verdict = StatusRevoked
		c.Reservation.PriorOperations = []PriorOperation{held(CustodyInvoking, ProviderIndeterminate, EffectIndeterminate)}
	})
	got, err := Evaluate(c)
	if err != nil {
		t.Fatal(err)
	}
	w := want{v: VerificationVerified, acc: AcceptanceRejected, m: ActionMatchMatch,
		s: SatisfactionUnsatisfied, z: AuthorizationNotAuthorized}
	assertResult(t, got, w.lifecycle(ReservationOperationReplay, CustodyInvoking, ProviderIndeterminate,
		EffectIndeterminate, RetryRefused, ReconciliationRequired, DecisionRefuse,
		ReasonBlindRetryRefused, ReasonEvidenceRevoked))
	if a := got.Assessment(); len(a.Reasons) != 1 || a.Reasons[0] != ReasonEvidenceRevoked {
		t.Errorf("Assessment().Reasons = %v, want [evidence_revoked]", a.Reasons)
	}
}

func TestOutcomeMapping(t *testing.T) {
	for p, want := range map[ProviderOutcome]Outcome{
		ProviderNotInvoked: OutcomeNotInvoked, ProviderCommitted: OutcomeExecuted,
		ProviderProvenNotCommitted: OutcomeFailed, ProviderIndeterminate: OutcomeIndeterminate,
		"": OutcomeIndeterminate, "FAILED": OutcomeIndeterminate,
	} {
		if got := p.Outcome(); got != want {
			t.Errorf("%q.Outcome() = %s, want %s", p, got, want)
		}
	}
}

func TestCAIDFromDigest(t *testing.T) {
	// sha256 of the empty string, whose base64url is well known.
	const empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	got, err := CAIDFromDigest(ActionTypeToolCall, empty)
	if err != nil {
		t.Fatal(err)
	}
	const want = "caid:1:actgate.tool-call.1:jcs-sha256:47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
	if got != want {
		t.Errorf("CAID = %s, want %s", got, want)
	}
	for _, tc := range []struct{ typ, digest string }{
		{ActionTypeToolCall, "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"},
		{ActionTypeToolCall, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"tool-call", empty},    // no version
		{"Tool.call.1", empty},  // upper case
		{"tool.call.01", empty}, // leading zero
	} {
		if _, err := CAIDFromDigest(tc.typ, tc.digest); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("CAIDFromDigest(%q, %q) err = %v, want invalid input", tc.typ, tc.digest, err)
		}
	}
}
