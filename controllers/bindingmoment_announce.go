package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/notify"
)

// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=actgate.io,resources=acts,verbs=get;list;watch

// Announcer delivers one announcement and says whether every webhook took it;
// *notify.Notifier implements it.
type Announcer interface {
	Deliver(ctx context.Context, m notify.Moment) error
}

// BindingMomentAnnouncer announces a BindingMoment to the notification webhooks when it first
// becomes pending, at most once, recording the outcome in the Announced condition:
//
//	no condition, pending      claim: Unknown/Announcing (optimistic lock), deliver, then
//	                           True/Delivered or False/DeliveryFailed
//	Unknown/Announcing         the manager stopped mid-delivery: False/Interrupted, not resent
//	True or False              nothing (resyncs and restarts never announce again)
//	resolved, expired          nothing: there is no decision left to announce
//
// The claim is written before anything is sent, so two reconciles (or a restart) can never
// both send. The announcement carries the synopsis, the principal, the act's agent, tool,
// server and class, the moment's name, digest and expiry and a console link — never the
// envelope's options or any argument (envelope-04 §8.4).
type BindingMomentAnnouncer struct {
	// Client reads binding moments and acts from the cache and writes the condition.
	Client client.Client
	// APIReader reads a moment from the API server before the condition is recorded, so a
	// stale cache can never hide the claim. Default Client.
	APIReader client.Reader
	// Notifier delivers announcements (its own bounded retries included).
	Notifier Announcer
	// Clock decides whether a moment is still pending.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles bounds parallel deliveries; default 2 (a slow webhook holds a
	// worker for the notifier's attempts).
	MaxConcurrentReconciles int
}

// Reconcile announces the moment or records why it will not be.
func (r *BindingMomentAnnouncer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bm := &v1alpha1.BindingMoment{}
	if err := r.Client.Get(ctx, req.NamespacedName, bm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	switch c := meta.FindStatusCondition(bm.Status.Conditions, v1alpha1.BindingMomentAnnouncedCondition); {
	case c != nil && c.Reason == v1alpha1.BindingMomentAnnouncingReason:
		return ctrl.Result{}, r.record(ctx, req.NamespacedName, metav1.Condition{
			Status: metav1.ConditionFalse, Reason: v1alpha1.BindingMomentInterruptedReason,
			Message: "The manager stopped while announcing; whether the webhooks received it is unknown and it is not repeated",
		})
	case c != nil:
		return ctrl.Result{}, nil
	case bm.Spec.Resolution != nil, bm.Status.State == v1alpha1.BindingMomentResolved,
		bm.Status.State == v1alpha1.BindingMomentExpired, !now.Before(bm.Spec.ExpiresAt.Time):
		return ctrl.Result{}, nil
	}

	// Claim before sending: a conflicting write means someone else saw a newer object; the
	// reconcile is retried with it and nothing has been sent.
	patch := client.MergeFromWithOptions(bm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	setCondition(&bm.Status.Conditions, metav1.Condition{
		Type: v1alpha1.BindingMomentAnnouncedCondition, Status: metav1.ConditionUnknown,
		Reason: v1alpha1.BindingMomentAnnouncingReason, Message: "Announcing to the notification webhooks",
	}, bm.Generation, now)
	if err := r.Client.Status().Patch(ctx, bm, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("claim the announcement of BindingMoment %s: %w", klog.KObj(bm), err)
	}

	m := r.moment(ctx, bm)
	err := r.Notifier.Deliver(ctx, m)
	c := metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.BindingMomentDeliveredReason,
		Message: "Announced to the notification webhooks"}
	log := ctrl.LoggerFrom(ctx).WithValues("envelopeDigest", bm.Spec.EnvelopeDigest)
	if err != nil {
		c = metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.BindingMomentDeliveryFailedReason,
			Message: "Not announced: " + err.Error()}
		log.Info("Binding moment announcement failed", "error", err.Error())
	} else {
		log.V(1).Info("Binding moment announced")
	}
	return ctrl.Result{}, r.record(ctx, req.NamespacedName, c)
}

// record replaces the Announcing claim with c on the latest object, retrying conflicts (the
// BindingMoment controller writes the same status). Only a claim is replaced: a reconcile that
// read a stale Announcing (its own earlier claim, already recorded) changes nothing.
func (r *BindingMomentAnnouncer) record(ctx context.Context, key types.NamespacedName, c metav1.Condition) error {
	c.Type = v1alpha1.BindingMomentAnnouncedCondition
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		bm := &v1alpha1.BindingMoment{}
		if err := reader.Get(ctx, key, bm); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cur := meta.FindStatusCondition(bm.Status.Conditions, c.Type); cur == nil || cur.Reason != v1alpha1.BindingMomentAnnouncingReason {
			return nil
		}
		patch := client.MergeFromWithOptions(bm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		setCondition(&bm.Status.Conditions, c, bm.Generation, r.Clock.Now())
		if err := r.Client.Status().Patch(ctx, bm, patch); err != nil {
			return fmt.Errorf("record the announcement of BindingMoment %s: %w", klog.KObj(bm), err)
		}
		return nil
	})
}

// moment is what the announcement says: the BindingMoment's spec and, when its Act can be
// read, the act's agent, tool, server, class, policy and rule.
func (r *BindingMomentAnnouncer) moment(ctx context.Context, bm *v1alpha1.BindingMoment) notify.Moment {
	m := notify.Moment{
		ID: bm.Namespace + "/" + bm.Name, EnvelopeDigest: string(bm.Spec.EnvelopeDigest),
		Synopsis: bm.Spec.Synopsis, Principals: []string{bm.Spec.Principal}, Expires: bm.Spec.ExpiresAt.Time,
	}
	a := &v1alpha1.Act{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: bm.Namespace, Name: bm.Spec.ActRef.Name}, a); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Announcing without the act", "act", bm.Spec.ActRef.Name, "error", err.Error())
		return m
	}
	m.Agent, m.Server, m.Tool, m.Class = a.Spec.Agent, a.Spec.Server, a.Spec.Tool, string(a.Spec.ConsequenceClass)
	m.Policy, m.Rule = a.Spec.PolicyRef.Name, a.Spec.Rule
	return m
}

// SetupWithManager registers the announcer as its own controller, so a slow webhook never
// delays the BindingMoment controller's resolution and expiry work.
func (r *BindingMomentAnnouncer) SetupWithManager(mgr ctrl.Manager) error {
	if r.Notifier == nil {
		return fmt.Errorf("BindingMomentAnnouncer: no Notifier")
	}
	n := r.MaxConcurrentReconciles
	if n <= 0 {
		n = 2
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.BindingMoment{}).
		Named("bindingmoment-announcer").
		WithOptions(controller.Options{MaxConcurrentReconciles: n}).
		Complete(r)
}
