package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/metrics"
	reconclient "github.com/actgate/actgate/internal/reconcile"
)

// +kubebuilder:rbac:groups=actgate.io,resources=acts,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=actgate.io,resources=acts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=actgate.io,resources=toolpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Defaults of the ActReconciler's settings (the manager's flags).
const (
	DefaultRetention           = 24 * time.Hour
	DefaultLeaseGrace          = 30 * time.Second
	DefaultReconcileBackoff    = reconclient.DefaultSettleBackoff
	DefaultReconcileMaxBackoff = reconclient.DefaultSettleMaxBackoff
	DefaultReconcileFreshness  = reconclient.DefaultFreshness
)

// ActReconciler keeps Acts' Settled condition, reconciles INDETERMINATE outcomes, expires
// authority that was never consumed and escalations that were never resolved, and deletes
// settled acts past retention.
type ActReconciler struct {
	// Client reads Acts, ToolPolicies, BindingMoments and authority Leases from the cache, writes
	// Act status and deletes Acts and Leases.
	Client client.Client
	// APIReader reads Secrets and the pods of in-flight acts uncached.
	APIReader client.Reader
	// Recorder emits Events.
	Recorder events.EventRecorder
	// Clock is the trusted time: retention, expiry, backoff and answer freshness.
	Clock clock.PassiveClock

	// Retention is how long a settled act (denied, EXECUTED, FAILED, EXPIRED) is kept after it
	// settled; then it and its authority Leases are deleted (each Lease once it is also
	// consumed or expired more than Retention ago, leasestore.Collectable). Zero means
	// DefaultRetention.
	Retention time.Duration
	// LeaseGrace is how long past its expiry an unconsumed authority is declared expired, for
	// clock skew with the sinks. Zero means DefaultLeaseGrace.
	LeaseGrace time.Duration
	// DispatcherGoneGrace is how long an in-flight act whose dispatching pod is gone must have
	// gone unwritten before it is held INDETERMINATE (holdCutOffDispatch). Zero means
	// DefaultDispatcherGoneGrace.
	DispatcherGoneGrace time.Duration

	// Reconciler asks reconciliation endpoints.
	Reconciler *reconclient.Client
	// Backoff is the wait after the first reconciliation attempt; it doubles with each attempt up
	// to MaxBackoff. Zero means the defaults.
	Backoff, MaxBackoff time.Duration
	// Freshness is how long after the provider's observation an answer is accepted. Zero means
	// DefaultReconcileFreshness.
	Freshness time.Duration
	// RootCAs verify reconciliation endpoints whose Secret has no ca.crt; nil means the system
	// roots.
	RootCAs *x509.CertPool

	// Metrics counts reconciliation attempts by result; nil counts nothing.
	Metrics *metrics.Reconciliation
	// Started is when this manager started: Denied and Indeterminate Events are not emitted
	// for transitions recorded before it (a new leader does not repeat a previous one's
	// Events). Zero emits them for every act not yet notified by this process.
	Started time.Time

	// notified holds the acts this process emitted Denied or Indeterminate Events for.
	notified notified
}

// actScope is what one reconcile of an Act observed and decided.
type actScope struct {
	act *v1alpha1.Act
	now time.Time

	// deleted: retention deleted the act; there is no status to write.
	deleted bool
	// authorityExpired: the act's authority Lease expired unconsumed; the act becomes EXPIRED.
	authorityExpired bool
	// escalationExpired lists the binding moments that all expired unresolved; the act is denied.
	escalationExpired []string
	// dispatcherGone: the pod that dispatched the in-flight act is gone; it becomes INDETERMINATE.
	dispatcherGone *dispatcherGone

	// attempted: a reconciliation query was made; verdict is what it established and detail
	// explains a finding that did not settle the act.
	attempted bool
	verdict   reconclient.Verdict
	detail    string
	// notConfigured says why no query could be made.
	notConfigured string
}

// Reconcile runs the steps in order and writes the status they decided in one patch.
func (r *ActReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	act := &v1alpha1.Act{}
	if err := r.Client.Get(ctx, req.NamespacedName, act); err != nil {
		if apierrors.IsNotFound(err) {
			r.notified.forget(req.NamespacedName, "")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !act.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	s := &actScope{act: act, now: r.Clock.Now()}
	defer func() {
		if err := r.patchStatus(ctx, s); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
			return
		}
		r.notify(s)
	}()

	var res ctrl.Result
	var errs []error
	for _, step := range []func(context.Context, *actScope) (ctrl.Result, error){
		r.retain,
		r.expireAuthority,
		r.expireEscalation,
		r.holdCutOffDispatch,
		r.reconcileOutcome,
	} {
		stepRes, err := step(ctx, s)
		if err != nil {
			errs = append(errs, err)
		}
		res = lowestNonZero(res, stepRes)
		if s.deleted {
			break
		}
	}
	return res, kerrors.NewAggregate(errs)
}

// patchStatus writes the status the steps decided, when it changed, then emits their Events.
func (r *ActReconciler) patchStatus(ctx context.Context, s *actScope) error {
	if s.deleted {
		return nil
	}
	act := s.act
	// Events follow the status they describe: whoever sees one can read that status.
	defer func() {
		if s.notConfigured != "" {
			r.Recorder.Eventf(act, nil, corev1.EventTypeWarning, EventReconciliationNotConfigured, actionReconcile, "%s", note(s.notConfigured))
			r.Metrics.Observe(metrics.ResultNotConfigured)
		}
	}()
	if act.Status.State == "" && act.Status.Decision == "" && s.dispatcherGone == nil {
		return nil // the authority service has not written the act's status yet
	}
	status := actStatus(act, s, s.now)
	if apiequality.Semantic.DeepEqual(act.Status, status) {
		return nil
	}
	patch := client.MergeFromWithOptions(act.DeepCopy(), client.MergeFromWithOptimisticLock{})
	act.Status = status
	if err := r.Client.Status().Patch(ctx, act, patch); err != nil {
		return fmt.Errorf("patch Act %s status: %w", klog.KObj(act), err)
	}
	r.emitEvents(s)
	return nil
}

func (r *ActReconciler) emitEvents(s *actScope) {
	act := s.act
	if s.authorityExpired {
		r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, EventAuthorityExpired, actionExpire,
			"Authority %s expired unconsumed; nothing was invoked", authorityName(act))
	}
	if len(s.escalationExpired) > 0 {
		r.Recorder.Eventf(act, nil, corev1.EventTypeWarning, EventEscalationExpired, actionDeny,
			"%s", note(escalationExpiredMessage(s.escalationExpired)))
	}
	if g := s.dispatcherGone; g != nil {
		r.Recorder.Eventf(act, nil, corev1.EventTypeWarning, EventDispatcherGone, actionHold, "%s", note(g.message))
	}
	if s.attempted {
		v := s.verdict
		r.Metrics.Observe(string(v.Finding))
		switch v.Finding {
		case reconclient.FindingExecuted:
			r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, EventReconciledExecuted, actionReconcile,
				"Authenticated reconciliation of operation %s: EXECUTED (evidence %s)", act.Status.OperationID, v.EvidenceDigest)
		case reconclient.FindingFailed:
			r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, EventReconciledFailed, actionReconcile,
				"Authenticated reconciliation of operation %s: FAILED (evidence %s)", act.Status.OperationID, v.EvidenceDigest)
		default:
			r.Recorder.Eventf(act, nil, corev1.EventTypeWarning, EventReconciliationPrefix+string(v.Finding), actionReconcile,
				"%s", note(fmt.Sprintf("Operation %s stays INDETERMINATE: %s", act.Status.OperationID, s.detail)))
		}
	}
}

// SetupWithManager registers the reconciler; SetupIndexes must have run.
func (r *ActReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Act{}).
		Watches(&v1alpha1.ToolPolicy{}, handler.EnqueueRequestsFromMapFunc(r.actsForPolicy)).
		Watches(&v1alpha1.BindingMoment{}, handler.EnqueueRequestsFromMapFunc(r.actForMoment)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.actsForLease)).
		// A reconciliation query may wait up to its timeout on a slow endpoint; other acts go on.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("act").
		Complete(r)
}

// actsForPolicy maps a ToolPolicy to its INDETERMINATE acts, which may now be reconcilable.
func (r *ActReconciler) actsForPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	return r.actRequests(ctx, o.GetNamespace(), func(a *v1alpha1.Act) bool {
		return a.Status.State == v1alpha1.ActStateIndeterminate
	}, client.MatchingFields{indexActPolicy: o.GetName()})
}

// actForMoment maps a BindingMoment to the act it decides.
func (r *ActReconciler) actForMoment(_ context.Context, o client.Object) []reconcile.Request {
	bm, ok := o.(*v1alpha1.BindingMoment)
	if !ok || bm.Spec.ActRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: bm.Namespace, Name: bm.Spec.ActRef.Name}}}
}

// actsForLease maps an authority Lease to the acts naming it (status.authorityRef) or named by
// its act-id label.
func (r *ActReconciler) actsForLease(ctx context.Context, o client.Object) []reconcile.Request {
	if !isAuthorityLease(o) {
		return nil
	}
	reqs := r.actRequests(ctx, o.GetNamespace(), nil, client.MatchingFields{indexActAuthority: o.GetName()})
	if id := o.GetLabels()[leasestore.LabelActID]; id != "" {
		reqs = append(reqs, r.actRequests(ctx, o.GetNamespace(), nil, client.MatchingFields{indexActLabel: id})...)
	}
	return reqs
}

func (r *ActReconciler) actRequests(ctx context.Context, ns string, keep func(*v1alpha1.Act) bool, match client.MatchingFields) []reconcile.Request {
	var list v1alpha1.ActList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), match); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List Acts", "namespace", ns)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if keep == nil || keep(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *ActReconciler) retention() time.Duration {
	if r.Retention > 0 {
		return r.Retention
	}
	return DefaultRetention
}

func (r *ActReconciler) leaseGrace() time.Duration {
	if r.LeaseGrace > 0 {
		return r.LeaseGrace
	}
	return DefaultLeaseGrace
}

func authorityName(act *v1alpha1.Act) string {
	if act.Status.AuthorityRef == nil {
		return ""
	}
	return act.Status.AuthorityRef.Name
}
