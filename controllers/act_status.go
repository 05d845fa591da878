package controllers

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
)

// actStatus derives the Act status the steps decided. It is pure.
func actStatus(act *v1alpha1.Act, s *actScope, now time.Time) v1alpha1.ActStatus {
	st := *act.Status.DeepCopy()
	if s.authorityExpired {
		st.State = v1alpha1.ActStateExpired
	}
	if s.dispatcherGone != nil {
		applyDispatcherGone(&st, s.dispatcherGone, act.Generation, now)
	}
	if len(s.escalationExpired) > 0 {
		st.Decision = v1alpha1.ActDecisionDenied
		st.Code = string(ef.EFEscalationRequired)
		st.Message = escalationExpiredMessage(s.escalationExpired)
	}
	if s.attempted {
		rec := st.Reconciliation
		if rec == nil {
			rec = &v1alpha1.ActReconciliation{}
		}
		rec.Attempts++
		t := metav1.NewTime(now)
		rec.LastAttemptTime = &t
		rec.LastResult = s.verdict.Finding.Result()
		if s.verdict.Finding.Settles() {
			// The CRD admits leaving INDETERMINATE only with the evidence digest beside it.
			rec.EvidenceDigest = s.verdict.EvidenceDigest
			st.State = s.verdict.State
		}
		st.Reconciliation = rec
	}
	setCondition(&st.Conditions, settledCondition(st), act.Generation, now)
	return st
}

// settledCondition derives Settled from the decision and state:
//
//	decision Denied, nothing consumed           True  Denied
//	EXECUTED | FAILED | EXPIRED                 True  Executed | Failed | Expired
//	INDETERMINATE                               False Indeterminate
//	decision Escalated, not yet authorized      False AwaitingPrincipal
//	anything else                               False InProgress
func settledCondition(st v1alpha1.ActStatus) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ActSettledCondition, Status: metav1.ConditionFalse}
	switch {
	case st.State == v1alpha1.ActStateExecuted:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ActExecutedReason, "The effect occurred"
	case st.State == v1alpha1.ActStateFailed:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ActFailedReason, "The effect did not occur"
	case st.State == v1alpha1.ActStateExpired:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ActExpiredReason, "Authority expired unconsumed; nothing was invoked"
	case st.State == v1alpha1.ActStateIndeterminate:
		c.Reason = v1alpha1.ActIndeterminateReason
		c.Message = "The outcome is unknown until authenticated reconciliation; the call is never retried blindly"
		if dispatcherIsGone(st) {
			c.Message = "The pod that dispatched the call is gone without reporting an outcome, so " +
				"the outcome is unknown until authenticated reconciliation; the call is never retried blindly"
		}
		if st.Reconciliation != nil && st.Reconciliation.LastResult != "" {
			c.Message += fmt.Sprintf(" (%d attempts, last result %s)", st.Reconciliation.Attempts, st.Reconciliation.LastResult)
		}
	case st.Decision == v1alpha1.ActDecisionDenied && !consumed(st.State):
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ActDeniedReason
		c.Message = "Denied"
		if st.Code != "" {
			c.Message += " with " + st.Code
		}
		c.Message += "; nothing was invoked"
	case st.Decision == v1alpha1.ActDecisionEscalated && preAuthority(st.State):
		c.Reason, c.Message = v1alpha1.ActAwaitingPrincipalReason, "Waiting for a principal to resolve a binding moment"
	default:
		c.Reason, c.Message = v1alpha1.ActInProgressReason, "Between decision and outcome"
	}
	return c
}

// preAuthority reports whether an act in state s has not been issued authority yet.
func preAuthority(s v1alpha1.ActState) bool {
	switch s {
	case "", v1alpha1.ActStateVerified, v1alpha1.ActStateMatch, v1alpha1.ActStateSatisfied:
		return true
	}
	return false
}

// unconsumed reports whether an act in state s may hold authority that was never consumed.
func unconsumed(s v1alpha1.ActState) bool {
	return preAuthority(s) || s == v1alpha1.ActStateAuthorized
}

// consumed reports whether an act in state s consumed its authority: from CONSUMED on, the
// dispatch may have happened, and the act ends only EXECUTED, FAILED or INDETERMINATE.
func consumed(s v1alpha1.ActState) bool {
	return !unconsumed(s) && s != v1alpha1.ActStateExpired
}

// deletable reports whether retention may delete an act with status st: it can change no more.
// In-flight (CONSUMED through INVOKED) and INDETERMINATE acts never are, whatever their
// conditions say.
func deletable(st v1alpha1.ActStatus) bool {
	switch st.State {
	case v1alpha1.ActStateExecuted, v1alpha1.ActStateFailed, v1alpha1.ActStateExpired:
		return true
	}
	return st.Decision == v1alpha1.ActDecisionDenied && unconsumed(st.State)
}

func escalationExpiredMessage(moments []string) string {
	return "Escalation expired: binding moment " + strings.Join(moments, ", ") +
		" expired unresolved; no authority was issued and nothing was invoked"
}
