package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

// DefaultDispatcherGoneGrace is how long an act whose dispatching pod is gone must have gone
// unwritten before the Act controller holds it INDETERMINATE (the manager's
// --dispatcher-gone-grace).
const DefaultDispatcherGoneGrace = 30 * time.Second

// dispatcherGone is what holdCutOffDispatch found: the pod that dispatched the act is gone.
type dispatcherGone struct {
	reason  string // v1alpha1.ActPodDeletedReason or ActPodTerminatedReason
	message string
	// authority and operation are set for an act a Permit recorded, which has no status until
	// its outcome: the consumed authority Lease names them.
	authority, operation string
}

// holdCutOffDispatch moves an act that consumed its authority but has no outcome (CONSUMED
// through INVOKED) to INDETERMINATE once the pod whose sidecar dispatched it is gone: deleted
// (or replaced by a pod of the same name with another UID), or Succeeded/Failed. The sidecar's
// journal, which alone knew how far the dispatch went, went with the pod, so the outcome cannot
// be known (action-evidence-boundary, "Classify the Effect Outcome"); the act is held until
// authenticated reconciliation and is never marked EXECUTED or FAILED by guess.
//
// An act a Permit recorded has no status until its outcome is reported; it is in flight from
// its create, whose permit record names the authority and the operation that consumed it. An
// act without a permit record is in flight when its authority Lease, found by the act-id label
// and read from the cache, is consumed; the Lease's holder is then its operation.
//
// A sidecar that is terminating may still be delivering the outcome from its outbox, and a pod
// deleted by force on an unreachable node may still run: the act must also have gone unwritten
// for the grace (its newest managedFields time) before it is held. The pod is read uncached by
// name, once per reconcile of an in-flight act, which is requeued every grace until it settles:
// the manager watches no pods.
func (r *ActReconciler) holdCutOffDispatch(ctx context.Context, s *actScope) (ctrl.Result, error) {
	act := s.act
	uid, name := act.Labels[v1alpha1.LabelActPodUID], act.Annotations[v1alpha1.AnnotationActPod]
	if uid == "" || name == "" {
		return ctrl.Result{}, nil // not recorded for a pod (or before pods were recorded)
	}
	var permit *dispatcherGone
	switch st := act.Status; {
	case inFlight(st.State) && st.Decision != v1alpha1.ActDecisionDenied:
	case st.State == "" && st.Decision == "" && st.AuthorityRef == nil && st.OperationID == "":
		if permit = consumedByPermit(act); permit == nil {
			var err error
			if permit, err = r.consumedByLease(ctx, act); err != nil || permit == nil {
				return ctrl.Result{}, err
			}
		}
	default:
		return ctrl.Result{}, nil
	}
	op := act.Status.OperationID
	if permit != nil {
		op = permit.operation
	}
	grace := r.dispatcherGoneGrace()
	pod := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: name}, pod)
	var gone *dispatcherGone
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(pod.UID) != uid):
		gone = &dispatcherGone{reason: v1alpha1.ActPodDeletedReason,
			message: fmt.Sprintf("Pod %s (uid %s), whose sidecar dispatched operation %s, was deleted without reporting an outcome", name, uid, op)}
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get Pod %s/%s of Act %s: %w", act.Namespace, name, klog.KObj(act), err)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		gone = &dispatcherGone{reason: v1alpha1.ActPodTerminatedReason,
			message: fmt.Sprintf("Pod %s (uid %s), whose sidecar dispatched operation %s, is %s without reporting an outcome", name, uid, op, pod.Status.Phase)}
	default:
		return after(grace), nil // the pod runs: its sidecar reports the outcome
	}
	if quiet := s.now.Sub(lastWrite(act)); quiet < grace {
		return after(grace - quiet), nil
	}
	if permit != nil {
		gone.authority, gone.operation = permit.authority, permit.operation
	}
	gone.message += fmt.Sprintf(" and the act was not updated for %s: the outcome cannot be known; "+
		"the act is held INDETERMINATE until authenticated reconciliation and is never retried", grace)
	s.dispatcherGone = gone
	return ctrl.Result{}, nil
}

// consumedByPermit returns the authority and operation of the permit record the authority
// service wrote on act when a Permit created it (its create is the consumption), or nil when
// act has none.
func consumedByPermit(act *v1alpha1.Act) *dispatcherGone {
	auth, op := act.Annotations[v1alpha1.AnnotationActPermitAuthority], act.Annotations[v1alpha1.AnnotationActPermitOperation]
	if auth == "" || op == "" {
		return nil
	}
	return &dispatcherGone{authority: auth, operation: op}
}

// consumedByLease returns the authority and operation of act's consumed authority Lease, or
// nil when none of its Leases is consumed: an act a Permit recorded with a Lease rather than a
// permit record.
func (r *ActReconciler) consumedByLease(ctx context.Context, act *v1alpha1.Act) (*dispatcherGone, error) {
	var list coordinationv1.LeaseList
	if err := r.Client.List(ctx, &list, client.InNamespace(act.Namespace),
		client.MatchingLabelsSelector{Selector: leasestore.Selector()},
		client.MatchingLabels{leasestore.LabelActID: leasestore.ActLabelValue(act.Spec.ActID)}); err != nil {
		return nil, fmt.Errorf("list Leases of act %s: %w", klog.KObj(act), err)
	}
	for i := range list.Items {
		l := &list.Items[i]
		// The label may be a digest of the ID; the annotation holds it exactly.
		if id := l.Annotations[leasestore.AnnotationActID]; !isAuthorityLease(l) || id != act.Spec.ActID || !readLease(l).consumed {
			continue
		}
		op := l.Annotations[leasestore.AnnotationConsumedBy]
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			op = *l.Spec.HolderIdentity
		}
		return &dispatcherGone{authority: l.Name, operation: op}, nil
	}
	return nil, nil
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
	if g.authority != "" {
		// A Permit's act: allowed, its authority consumed by the operation (as a report
		// would have recorded it).
		st.Decision = v1alpha1.ActDecisionAllowed
		st.AuthorityRef = &v1alpha1.LocalObjectReference{Name: g.authority}
		st.OperationID = g.operation
	}
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
