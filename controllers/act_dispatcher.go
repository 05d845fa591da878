package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
)

// DefaultDispatcherGoneGrace is how long an act whose dispatching pod is gone must have gone
// unwritten before the Act controller holds it INDETERMINATE (the manager's
// --dispatcher-gone-grace).
const DefaultDispatcherGoneGrace = 30 * time.Second

// dispatcherGone is what holdCutOffDispatch found: the pod that dispatched the act is gone.
type dispatcherGone struct {
	reason  string // v1alpha1.ActPodDeletedReason or ActPodTerminatedReason
	message string
}

// holdCutOffDispatch moves an act that consumed its authority but has no outcome (CONSUMED
// through INVOKED) to INDETERMINATE once the pod whose sidecar dispatched it is gone: deleted
// (or replaced by a pod of the same name with another UID), or Succeeded/Failed. The sidecar's
// journal, which alone knew how far the dispatch went, went with the pod, so the outcome cannot
// be known (action-evidence-boundary, "Classify the Effect Outcome"); the act is held until
// authenticated reconciliation and is never marked EXECUTED or FAILED by guess.
//
// A sidecar that is terminating may still be delivering the outcome from its outbox, and a pod
// deleted by force on an unreachable node may still run: the act must also have gone unwritten
// for the grace (its newest managedFields time) before it is held. The pod is read uncached by
// name, once per reconcile of an in-flight act, which is requeued every grace until it settles:
// the manager watches no pods.
func (r *ActReconciler) holdCutOffDispatch(ctx context.Context, s *actScope) (ctrl.Result, error) {
	act := s.act
	if !inFlight(act.Status.State) || act.Status.Decision == v1alpha1.ActDecisionDenied {
		return ctrl.Result{}, nil
	}
	uid, name := act.Labels[v1alpha1.LabelActPodUID], act.Annotations[v1alpha1.AnnotationActPod]
	if uid == "" || name == "" {
		return ctrl.Result{}, nil // not recorded for a pod (or before pods were recorded)
	}
	grace := r.dispatcherGoneGrace()
	pod := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: name}, pod)
	var gone *dispatcherGone
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(pod.UID) != uid):
		gone = &dispatcherGone{reason: v1alpha1.ActPodDeletedReason,
			message: fmt.Sprintf("Pod %s (uid %s), whose sidecar dispatched operation %s, was deleted without reporting an outcome", name, uid, act.Status.OperationID)}
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get Pod %s/%s of Act %s: %w", act.Namespace, name, klog.KObj(act), err)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		gone = &dispatcherGone{reason: v1alpha1.ActPodTerminatedReason,
			message: fmt.Sprintf("Pod %s (uid %s), whose sidecar dispatched operation %s, is %s without reporting an outcome", name, uid, act.Status.OperationID, pod.Status.Phase)}
	default:
		return after(grace), nil // the pod runs: its sidecar reports the outcome
	}
	if quiet := s.now.Sub(lastWrite(act)); quiet < grace {
		return after(grace - quiet), nil
	}
	gone.message += fmt.Sprintf(" and the act was not updated for %s: the outcome cannot be known; the act is held INDETERMINATE until authenticated reconciliation and is never retried", grace)
	s.dispatcherGone = gone
	return ctrl.Result{}, nil
}

// inFlight reports whether an act in state s consumed its authority and has no outcome yet.
func inFlight(s v1alpha1.ActState) bool {
	switch s {
	case v1alpha1.ActStateConsumed, v1alpha1.ActStateReserved, v1alpha1.ActStateDispatchPending, v1alpha1.ActStateInvoked:
		return true
	}
	return false
}

// lastWrite is when act was last written: its newest managedFields time, else its creation.
func lastWrite(act *v1alpha1.Act) time.Time {
	t := act.CreationTimestamp.Time
	for _, mf := range act.ManagedFields {
		if mf.Time != nil && mf.Time.After(t) {
			t = mf.Time.Time
		}
	}
	return t
}

// applyDispatcherGone records what holdCutOffDispatch found on st: INDETERMINATE, the message,
// and the DispatcherGone condition.
func applyDispatcherGone(st *v1alpha1.ActStatus, g *dispatcherGone, generation int64, now time.Time) {
	st.State = v1alpha1.ActStateIndeterminate
	st.Message = clip(g.message+".", 1024)
	setCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.ActDispatcherGoneCondition, Status: metav1.ConditionTrue, Reason: g.reason, Message: g.message,
	}, generation, now)
}

// dispatcherIsGone reports whether st records that the dispatching pod is gone.
func dispatcherIsGone(st v1alpha1.ActStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ActDispatcherGoneCondition)
}

func (r *ActReconciler) dispatcherGoneGrace() time.Duration {
	if r.DispatcherGoneGrace > 0 {
		return r.DispatcherGoneGrace
	}
	return DefaultDispatcherGoneGrace
}
