package controllers

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
)

// toolPolicyStatus derives the status of tp from what the reconcile observed. It is pure.
//
//	compiled  secrets            Accepted                Ready
//	no        (not considered)   False <compile reason>  False NotAccepted
//	yes       read failed        True Compiled           Unknown InternalError
//	yes       missing            True Compiled           False SecretNotFound
//	yes       all present        True Compiled           True Enforcing | Auditing
//
// policyEpoch is s.epoch: one more than before exactly when an accepted spec has a generation
// the status had not observed.
func toolPolicyStatus(tp *v1alpha1.ToolPolicy, s *policyScope, now time.Time) v1alpha1.ToolPolicyStatus {
	st := *tp.Status.DeepCopy()
	gen := tp.Generation
	st.ObservedGeneration = gen
	st.PolicyEpoch = s.epoch

	accepted := metav1.Condition{Type: v1alpha1.ToolPolicyAcceptedCondition}
	if s.compileErr != nil {
		accepted.Status = metav1.ConditionFalse
		accepted.Reason, accepted.Message = compileReason(s.compileErr)
	} else {
		accepted.Status = metav1.ConditionTrue
		accepted.Reason = v1alpha1.ToolPolicyCompiledReason
		accepted.Message = fmt.Sprintf("The spec compiled; policy epoch %d", s.epoch)
	}
	setCondition(&st.Conditions, accepted, gen, now)

	ready := metav1.Condition{Type: v1alpha1.ToolPolicyReadyCondition}
	switch {
	case s.compileErr != nil:
		ready.Status = metav1.ConditionFalse
		ready.Reason = v1alpha1.ToolPolicyNotAcceptedReason
		ready.Message = "The policy is not accepted; calls to its servers are denied"
	case s.secretsErr != nil:
		ready.Status = metav1.ConditionUnknown
		ready.Reason = ReasonInternalError
		ready.Message = "Referenced Secrets could not be read: " + s.secretsErr.Error()
	case len(s.missingSecrets) > 0:
		ready.Status = metav1.ConditionFalse
		ready.Reason = v1alpha1.ToolPolicySecretNotFoundReason
		ready.Message = strings.Join(s.missingSecrets, "; ")
	case tp.Spec.Mode == v1alpha1.PolicyModeAudit:
		ready.Status = metav1.ConditionTrue
		ready.Reason = v1alpha1.ToolPolicyAuditingReason
		ready.Message = fmt.Sprintf("Served at policy epoch %d in mode Audit: calls are observed, nothing is enforced", s.epoch)
	default:
		ready.Status = metav1.ConditionTrue
		ready.Reason = v1alpha1.ToolPolicyEnforcingReason
		ready.Message = fmt.Sprintf("Served at policy epoch %d in mode Enforce", s.epoch)
	}
	setCondition(&st.Conditions, ready, gen, now)
	return st
}
