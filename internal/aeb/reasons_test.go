package aeb

import (
	"slices"
	"testing"
)

// aeb1Reasons is the AEB-1 closed reason set as published with the suite's reference kernel
// (AEB_CONSEQUENCE_REASONS, github.com/emiliaprotocol/emilia-protocol, Apache-2.0). The vectors
// exercise only 21 of the 27; this pins the spelling of the rest.
var aeb1Reasons = []string{
	"authenticated_reconciliation", "blind_retry_refused", "distinct_principal_quorum_unsatisfied",
	"evidence_revoked", "evidence_stale", "exact_action_mismatch", "executor_self_approval_refused",
	"initiator_self_approval_refused", "local_atomic_reservation_unavailable", "local_policy_denied",
	"native_evidence_replay", "native_verification_failed", "native_verification_indeterminate",
	"normalized_action_mismatch", "operation_binding_mismatch", "operation_replay",
	"provider_and_effect_indeterminate", "provider_committed_effect_diverged",
	"provider_committed_effect_observed", "provider_proven_not_committed",
	"reconciliation_binding_mismatch", "reconciliation_indeterminate", "required_role_unsatisfied",
	"status_authority_not_pinned", "status_unavailable", "timeout_after_dispatch",
	"unauthenticated_reconciliation",
}

func TestReasonSets(t *testing.T) {
	defined := []Reason{
		ReasonAuthenticatedReconciliation, ReasonBlindRetryRefused, ReasonDistinctPrincipalQuorumUnsatisfied,
		ReasonEvidenceRevoked, ReasonEvidenceStale, ReasonExactActionMismatch, ReasonExecutorSelfApprovalRefused,
		ReasonInitiatorSelfApprovalRefused, ReasonLocalAtomicReservationUnavailable, ReasonLocalPolicyDenied,
		ReasonNativeEvidenceReplay, ReasonNativeVerificationFailed, ReasonNativeVerificationIndeterminate,
		ReasonNormalizedActionMismatch, ReasonOperationBindingMismatch, ReasonOperationReplay,
		ReasonProviderAndEffectIndeterminate, ReasonProviderCommittedEffectDiverged,
		ReasonProviderCommittedEffectObserved, ReasonProviderProvenNotCommitted,
		ReasonReconciliationBindingMismatch, ReasonReconciliationIndeterminate, ReasonRequiredRoleUnsatisfied,
		ReasonStatusAuthorityNotPinned, ReasonStatusUnavailable, ReasonTimeoutAfterDispatch,
		ReasonUnauthenticatedReconciliation,
	}
	got := reasonStrings(defined)
	slices.Sort(got)
	if !slices.Equal(got, aeb1Reasons) {
		t.Errorf("AEB-1 reason constants = %v\nwant %v", got, aeb1Reasons)
	}
	for _, r := range defined {
		if !r.AEB1() || !r.Valid() {
			t.Errorf("%s: AEB1()=%v Valid()=%v", r, r.AEB1(), r.Valid())
		}
	}
	for _, r := range []Reason{ReasonProviderCommittedEffectUnobserved, ReasonReconciliationStale} {
		if r.AEB1() || !r.Valid() || slices.Contains(aeb1Reasons, string(r)) {
			t.Errorf("extension %s: AEB1()=%v Valid()=%v", r, r.AEB1(), r.Valid())
		}
	}
	for _, r := range []Reason{"", "Evidence_Stale", "evidence_stale "} {
		if r.Valid() {
			t.Errorf("%q is Valid", r)
		}
	}
	if got := reasonSet([]Reason{ReasonOperationReplay, ReasonEvidenceStale}, []Reason{ReasonEvidenceStale}); !slices.Equal(got,
		[]Reason{ReasonEvidenceStale, ReasonOperationReplay}) {
		t.Errorf("reasonSet = %v", got)
	}
	if got := reasonSet(); got == nil || len(got) != 0 {
		t.Errorf("empty reasonSet = %#v, want empty non-nil", got)
	}
}
