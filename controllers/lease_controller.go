package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=acts,verbs=get;list;watch

// AuthorityLeaseReconciler deletes authority Leases that the Lease store says may go
// (leasestore.Collectable: consumed, or expired, more than the retention ago) and that no live
// act still needs: every act naming the Lease is gone or settled. So an authority that expired
// unconsumed, and whose act settled EXPIRED or was never recorded, is cleaned up; a Lease of an
// in-flight or INDETERMINATE act, or one whose times cannot be read, is never deleted here.
// Settled acts take their Leases with them at retention (ActReconciler).
type AuthorityLeaseReconciler struct {
	// Client reads Leases and Acts from the cache and deletes Leases.
	Client client.Client
	// Clock is the trusted time.
	Clock clock.PassiveClock
	// Retention is how long after consumption or expiry a Lease is kept. Zero means
	// DefaultRetention.
	Retention time.Duration
}

// Reconcile deletes l when it is collectable and no unsettled act names it.
func (r *AuthorityLeaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	l := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, req.NamespacedName, l); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isAuthorityLease(l) || !l.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	retention := r.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	ok, wait := collectable(l, r.Clock.Now(), retention)
	if !ok {
		if wait > 0 {
			return after(wait), nil
		}
		return ctrl.Result{}, nil
	}
	acts, err := r.actsOf(ctx, l)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, a := range acts {
		if !deletable(a.Status) {
			// In flight, INDETERMINATE, or not yet recorded EXPIRED: the act decides first, and a
			// change of the act brings this Lease back.
			return ctrl.Result{}, nil
		}
	}
	// The read resourceVersion is a precondition: a Lease that changed since (a consume racing
	// this delete) wins, and the delete fails with a conflict.
	uid, rv := l.UID, l.ResourceVersion
	if err := r.Client.Delete(ctx, l, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return ctrl.Result{}, nil // gone, or changed: its update event brings it back
		}
		return ctrl.Result{}, fmt.Errorf("delete Lease %s: %w", klog.KObj(l), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted authority Lease past retention", "lease", klog.KObj(l),
		"consumed", readLease(l).consumed, "acts", len(acts))
	return ctrl.Result{}, nil
}

// actsOf lists the acts that name l (status.authorityRef) or that l's act-id label names.
func (r *AuthorityLeaseReconciler) actsOf(ctx context.Context, l *coordinationv1.Lease) ([]v1alpha1.Act, error) {
	var out []v1alpha1.Act
	matches := []client.MatchingFields{{indexActAuthority: l.Name}}
	if id := l.Labels[leasestore.LabelActID]; id != "" {
		matches = append(matches, client.MatchingFields{indexActLabel: id})
	}
	for _, m := range matches {
		var list v1alpha1.ActList
		if err := r.Client.List(ctx, &list, client.InNamespace(l.Namespace), m); err != nil {
			return nil, fmt.Errorf("list Acts of Lease %s: %w", klog.KObj(l), err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// SetupWithManager registers the reconciler; SetupIndexes must have run. Only authority Leases
// are watched; an act change (e.g. to EXPIRED) brings back the Lease it names.
func (r *AuthorityLeaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&coordinationv1.Lease{}, builder.WithPredicates(predicate.NewPredicateFuncs(isAuthorityLease))).
		Watches(&v1alpha1.Act{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			act, ok := o.(*v1alpha1.Act)
			if !ok || authorityName(act) == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: act.Namespace, Name: authorityName(act)}}}
		})).
		Named("authoritylease").
		Complete(r)
}
