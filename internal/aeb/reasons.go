package aeb

import "slices"

// Reason is a stable, typed reason code. Results carry reasons as a set in ascending byte order:
// the AEB-1 md does not state an order, but the AEB-CONSEQUENCE-CONFORMANCE-REPORT-v1 result
// contract of the same suite rejects a result whose reasons are duplicated or unsorted.
type Reason string

// The AEB-1 closed reason set (27 codes).
const (
	ReasonAuthenticatedReconciliation        Reason = "authenticated_reconciliation"
	ReasonBlindRetryRefused                  Reason = "blind_retry_refused"
	ReasonDistinctPrincipalQuorumUnsatisfied Reason = "distinct_principal_quorum_unsatisfied"
	ReasonEvidenceRevoked                    Reason = "evidence_revoked"
	ReasonEvidenceStale                      Reason = "evidence_stale"
	ReasonExactActionMismatch                Reason = "exact_action_mismatch"
	ReasonExecutorSelfApprovalRefused        Reason = "executor_self_approval_refused"
	ReasonInitiatorSelfApprovalRefused       Reason = "initiator_self_approval_refused"
	ReasonLocalAtomicReservationUnavailable  Reason = "local_atomic_reservation_unavailable"
	ReasonLocalPolicyDenied                  Reason = "local_policy_denied"
	ReasonNativeEvidenceReplay               Reason = "native_evidence_replay"
	ReasonNativeVerificationFailed           Reason = "native_verification_failed"
	ReasonNativeVerificationIndeterminate    Reason = "native_verification_indeterminate"
	ReasonNormalizedActionMismatch           Reason = "normalized_action_mismatch"
	ReasonOperationBindingMismatch           Reason = "operation_binding_mismatch"
	ReasonOperationReplay                    Reason = "operation_replay"
	ReasonProviderAndEffectIndeterminate     Reason = "provider_and_effect_indeterminate"
	ReasonProviderCommittedEffectDiverged    Reason = "provider_committed_effect_diverged"
	ReasonProviderCommittedEffectObserved    Reason = "provider_committed_effect_observed"
	ReasonProviderProvenNotCommitted         Reason = "provider_proven_not_committed"
	ReasonReconciliationBindingMismatch      Reason = "reconciliation_binding_mismatch"
	ReasonReconciliationIndeterminate        Reason = "reconciliation_indeterminate"
	ReasonRequiredRoleUnsatisfied            Reason = "required_role_unsatisfied"
	ReasonStatusAuthorityNotPinned           Reason = "status_authority_not_pinned"
	ReasonStatusUnavailable                  Reason = "status_unavailable"
	ReasonTimeoutAfterDispatch               Reason = "timeout_after_dispatch"
	ReasonUnauthenticatedReconciliation      Reason = "unauthenticated_reconciliation"
)

// actgate extensions: situations AEB requires handling for but which the AEB-1 case format cannot
// express. They never occur in a result of Evaluate on an AEB-1 case.
const (
	// ReasonProviderCommittedEffectUnobserved: the provider reports COMMITTED but the effect was
	// not (or not conclusively) observed, so the operation stays INVOKING pending reconciliation.
	// AEB-1 has no code for this pair; reusing "provider_committed_effect_observed" would tell an
	// operator the opposite of what happened.
	ReasonProviderCommittedEffectUnobserved Reason = "provider_committed_effect_unobserved"
	// ReasonReconciliationStale: the reconciliation observation is missing its time, predates the
	// dispatch, is future-dated or past its validity (AEB "Perform Authenticated Reconciliation":
	// stale observations leave the operation INDETERMINATE).
	ReasonReconciliationStale Reason = "reconciliation_stale"
)

// AEB1 reports whether r belongs to the AEB-1 closed reason set.
func (r Reason) AEB1() bool {
	switch r {
	case ReasonAuthenticatedReconciliation, ReasonBlindRetryRefused,
		ReasonDistinctPrincipalQuorumUnsatisfied, ReasonEvidenceRevoked, ReasonEvidenceStale,
		ReasonExactActionMismatch, ReasonExecutorSelfApprovalRefused,
		ReasonInitiatorSelfApprovalRefused, ReasonLocalAtomicReservationUnavailable,
		ReasonLocalPolicyDenied, ReasonNativeEvidenceReplay, ReasonNativeVerificationFailed,
		ReasonNativeVerificationIndeterminate, ReasonNormalizedActionMismatch,
		ReasonOperationBindingMismatch, ReasonOperationReplay, ReasonProviderAndEffectIndeterminate,
		ReasonProviderCommittedEffectDiverged, ReasonProviderCommittedEffectObserved,
		ReasonProviderProvenNotCommitted, ReasonReconciliationBindingMismatch,
		ReasonReconciliationIndeterminate, ReasonRequiredRoleUnsatisfied,
		ReasonStatusAuthorityNotPinned, ReasonStatusUnavailable, ReasonTimeoutAfterDispatch,
		ReasonUnauthenticatedReconciliation:
		return true
	}
	return false
}

// Valid reports whether r is a defined reason (AEB-1 or an actgate extension).
func (r Reason) Valid() bool {
	return r.AEB1() || r == ReasonProviderCommittedEffectUnobserved || r == ReasonReconciliationStale
}

// reasonSet returns the union of the given reasons, deduplicated and in ascending byte order.
// The result is never nil, so an empty set marshals as [] like the vectors' "reasons": [].
func reasonSet(groups ...[]Reason) []Reason {
	out := []Reason{}
	for _, g := range groups {
		out = append(out, g...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fromEvidenceChain reports whether r is produced by the evidence chain (Assess) rather than by
// a lifecycle step.
func (r Reason) fromEvidenceChain() bool {
	switch r {
	case ReasonNativeVerificationFailed, ReasonNativeVerificationIndeterminate,
		ReasonEvidenceRevoked, ReasonStatusAuthorityNotPinned, ReasonEvidenceStale,
		ReasonStatusUnavailable, ReasonExactActionMismatch, ReasonNormalizedActionMismatch,
		ReasonRequiredRoleUnsatisfied, ReasonInitiatorSelfApprovalRefused,
		ReasonExecutorSelfApprovalRefused, ReasonDistinctPrincipalQuorumUnsatisfied,
		ReasonLocalPolicyDenied:
		return true
	}
	return false
}

func assessmentReasons(rs []Reason) []Reason {
	out := []Reason{}
	for _, r := range rs {
		if r.fromEvidenceChain() {
			out = append(out, r)
		}
	}
	return reasonSet(out)
}
