package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

// retain deletes a settled act, and its authority Leases, once it has been settled for the
// retention. The time is the Settled condition's lastTransitionTime: when the act was recorded
// settled, not when it was created. In-flight and INDETERMINATE acts are never deleted.
func (r *ActReconciler) retain(ctx context.Context, s *actScope) (ctrl.Result, error) {
	act := s.act
	c := meta.FindStatusCondition(act.Status.Conditions, v1alpha1.ActSettledCondition)
	if !deletable(act.Status) || c == nil || c.Status != metav1.ConditionTrue {
		return ctrl.Result{}, nil
	}
	due := c.LastTransitionTime.Add(r.retention())
	if s.now.Before(due) {
		return after(due.Sub(s.now)), nil
	}
	// Leases first, each once the Lease store says it may go (consumed or expired more than the
	// retention ago). While one may not, the act stays too: the ledger entry outlives the
	// evidence it describes, never the other way round.
	pending, wait, err := r.deleteLeasesOf(ctx, act, s.now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pending {
		if wait <= 0 {
			// A Lease whose times cannot be read is kept for an operator; look again later.
			ctrl.LoggerFrom(ctx).Info("Keeping settled Act past retention: an authority Lease of it cannot be collected", "act", klog.KObj(act))
			wait = r.retention()
		}
		return after(wait), nil
	}
	uid, rv := act.UID, act.ResourceVersion
	if err := r.Client.Delete(ctx, act, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		if apierrors.IsNotFound(err) {
			s.deleted = true
			return ctrl.Result{}, nil
		}
		// A conflict means the act changed since it was read; look again.
		return ctrl.Result{}, fmt.Errorf("delete Act %s: %w", klog.KObj(act), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted settled Act past retention", "act", klog.KObj(act),
		"state", act.Status.State, "decision", act.Status.Decision, "settledAt", c.LastTransitionTime.Time)
	s.deleted = true
	return ctrl.Result{}, nil
}

// deleteLeasesOf deletes the collectable authority Leases of a settled act: the one
// status.authorityRef names and those labelled with its act ID. pending is true when one is
// not collectable yet; wait is how long until it is (zero if never).
func (r *ActReconciler) deleteLeasesOf(ctx context.Context, act *v1alpha1.Act, now time.Time) (pending bool, wait time.Duration, _ error) {
	leases := map[string]*coordinationv1.Lease{}
	if name := authorityName(act); name != "" {
		l := &coordinationv1.Lease{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: name}, l)
		switch {
		case err == nil:
			leases[name] = l
		case !apierrors.IsNotFound(err):
			return false, 0, fmt.Errorf("get Lease %s/%s: %w", act.Namespace, name, err)
		}
	}
	if act.Spec.ActID != "" {
		var list coordinationv1.LeaseList
		if err := r.Client.List(ctx, &list, client.InNamespace(act.Namespace),
			client.MatchingLabelsSelector{Selector: leasestore.Selector()},
			client.MatchingLabels{leasestore.LabelActID: leasestore.ActLabelValue(act.Spec.ActID)}); err != nil {
			return false, 0, fmt.Errorf("list Leases of act %s: %w", klog.KObj(act), err)
		}
		for i := range list.Items {
			l := &list.Items[i]
			// The label may be a digest of the ID; the annotation holds it exactly.
			if id, ok := l.Annotations[leasestore.AnnotationActID]; ok && id != act.Spec.ActID {
				continue
			}
			leases[l.Name] = l
		}
	}
	for _, l := range leases {
		if !isAuthorityLease(l) {
			continue
		}
		ok, w := collectable(l, now, r.retention())
		if !ok {
			pending = true
			if w > 0 && (wait == 0 || w < wait) {
				wait = w
			}
			continue
		}
		uid, rv := l.UID, l.ResourceVersion
		if err := r.Client.Delete(ctx, l, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
			return false, 0, fmt.Errorf("delete Lease %s: %w", klog.KObj(l), err)
		}
	}
	return pending, wait, nil
}

// expireAuthority moves an act whose authority was issued but never consumed to EXPIRED once
// the authority's signed expiry (plus the grace) has passed. The Lease stays, as evidence,
// until retention collects it.
func (r *ActReconciler) expireAuthority(ctx context.Context, s *actScope) (ctrl.Result, error) {
	act := s.act
	name := authorityName(act)
	if name == "" || !unconsumed(act.Status.State) || act.Status.Decision == v1alpha1.ActDecisionDenied {
		return ctrl.Result{}, nil
	}
	l := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: name}, l); err != nil {
		// A Lease that is not there (or not an authority Lease, which the cache does not hold)
		// says nothing about expiry: leave the act as it is.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isAuthorityLease(l) {
		return ctrl.Result{}, nil
	}
	expired, wait := readLease(l).expiredUnconsumed(s.now, r.leaseGrace())
	if !expired {
		if wait > 0 {
			return after(wait), nil
		}
		return ctrl.Result{}, nil
	}
	s.authorityExpired = true
	return ctrl.Result{}, nil
}

// expireEscalation denies an escalated act that was never authorized once every binding moment
// sent for it has expired unresolved (binding-moment-envelope-04 §7: an expired envelope can
// authorize nothing).
func (r *ActReconciler) expireEscalation(ctx context.Context, s *actScope) (ctrl.Result, error) {
	act := s.act
	if act.Status.Decision != v1alpha1.ActDecisionEscalated || !preAuthority(act.Status.State) {
		return ctrl.Result{}, nil
	}
	var list v1alpha1.BindingMomentList
	if err := r.Client.List(ctx, &list, client.InNamespace(act.Namespace), client.MatchingFields{indexMomentAct: act.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list BindingMoments of act %s: %w", klog.KObj(act), err)
	}
	states := map[string]v1alpha1.BindingMomentState{}
	for i := range list.Items {
		states[list.Items[i].Name] = list.Items[i].Status.State
	}
	for _, ref := range act.Status.BindingMomentRefs {
		if _, ok := states[ref.Name]; !ok {
			// Named but not seen (not created yet, or not in the cache yet): not known expired.
			return ctrl.Result{}, nil
		}
	}
	if len(states) == 0 {
		return ctrl.Result{}, nil
	}
	var expired []string
	for _, bm := range list.Items {
		if bm.Status.State != v1alpha1.BindingMomentExpired {
			return ctrl.Result{}, nil
		}
		expired = append(expired, bm.Name)
	}
	s.escalationExpired = expired
	return ctrl.Result{}, nil
}
