package aeb

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// invariantViolations lists every way r breaks the AEB lifecycle's ordering. It is the
// executable form of "every arrow is conditional" (AEB "Introduction"), checked on every result
// the tests and the fuzzer produce.
func invariantViolations(r Result) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	for name, ok := range map[string]bool{
		"verification": r.Verification.Valid(), "acceptance": r.Acceptance.Valid(),
		"action_match": r.ActionMatch.Valid(), "satisfaction": r.Satisfaction.Valid(),
		"authorization": r.Authorization.Valid(), "reservation": r.Reservation.Valid(),
		"custody": r.Custody.Valid(), "provider_outcome": r.ProviderOutcome.Valid(),
		"effect_relation": r.EffectRelation.Valid(), "retry": r.Retry.Valid(),
		"reconciliation": r.Reconciliation.Valid(), "decision": r.Decision.Valid(),
	} {
		if !ok {
			bad("%s is not a defined value", name)
		}
	}
	if r.Reasons == nil {
		bad("reasons is nil")
	}
	for _, reason := range r.Reasons {
		if !reason.Valid() {
			bad("reason %q is not defined", reason)
		}
	}
	if !slices.IsSorted(r.Reasons) || len(slices.Compact(slices.Clone(r.Reasons))) != len(r.Reasons) {
		bad("reasons %v are not a sorted set", r.Reasons)
	}
	if !truthPairValid(r.ProviderOutcome, r.EffectRelation) {
		bad("provider %s with effect %s", r.ProviderOutcome, r.EffectRelation)
	}
	// Each decision needs the one before it.
	if r.Satisfaction == SatisfactionSatisfied &&
		(r.Verification != VerificationVerified || r.Acceptance != AcceptanceAccepted || r.ActionMatch != ActionMatchMatch) {
		bad("SATISFIED without VERIFIED, ACCEPTED and MATCH")
	}
	if r.Authorization == AuthorizationAuthorized && r.Satisfaction != SatisfactionSatisfied {
		bad("AUTHORIZED without SATISFIED")
	}
	if r.Reservation == ReservationReserved && r.Decision != DecisionAdmit {
		bad("RESERVED without ADMIT")
	}
	// ADMIT has every prerequisite in its passing value and nothing dispatched yet.
	if r.Decision == DecisionAdmit {
		want := Result{
			Verification: VerificationVerified, Acceptance: AcceptanceAccepted,
			ActionMatch: ActionMatchMatch, Satisfaction: SatisfactionSatisfied,
			Authorization: AuthorizationAuthorized, Reservation: ReservationReserved,
			Custody: CustodyReserved, ProviderOutcome: ProviderNotInvoked,
			EffectRelation: EffectNotObserved, Retry: RetryNotApplicable,
			Reconciliation: ReconciliationNotApplicable, Decision: DecisionAdmit,
		}
		got := r
		got.Reasons, want.Reasons = nil, nil
		if !reflect.DeepEqual(got, want) {
			bad("ADMIT with a non-passing dimension: %+v", r)
		}
		if len(r.Reasons) != 0 {
			bad("ADMIT with reasons %v", r.Reasons)
		}
	}
	// Custody that reached dispatch is never eligible for another dispatch.
	if (r.Custody == CustodyInvoking || r.Custody == CustodyTerminal) && r.Retry != RetryRefused {
		bad("custody %s with retry %s", r.Custody, r.Retry)
	}
	if r.Custody == CustodyTerminal && !terminalPair(r.ProviderOutcome, r.EffectRelation) {
		bad("TERMINAL with non-terminal outcome %s/%s", r.ProviderOutcome, r.EffectRelation)
	}
	if r.Custody == CustodyInvoking && terminalPair(r.ProviderOutcome, r.EffectRelation) {
		bad("INVOKING with terminal outcome %s/%s", r.ProviderOutcome, r.EffectRelation)
	}
	if r.Decision == DecisionReconciled && (r.Custody != CustodyTerminal || r.Reconciliation != ReconciliationAccepted) {
		bad("RECONCILED with custody %s, reconciliation %s", r.Custody, r.Reconciliation)
	}
	if r.Reservation == ReservationNotAttempted && r.Custody != CustodyUnreserved {
		bad("NOT_ATTEMPTED with custody %s", r.Custody)
	}
	return v
}

func assertInvariants(t testing.TB, r Result) {
	t.Helper()
	for _, msg := range invariantViolations(r) {
		t.Errorf("invariant: %s", msg)
	}
}
