package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/metrics"
)

// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=bindingmoments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=actgate.io,resources=acts,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=acts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// BindingMomentReconciler records a binding moment's resolution (who, when, through which
// surface and with which authentication: status.resolvedBy, resolvedAt, resolvedVia), copies
// that record onto the Act's status.momentResolutions, and expires the moment unresolved at
// spec.expiresAt. The act it gates is denied by the ActReconciler once all of the act's binding
// moments have expired.
type BindingMomentReconciler struct {
	// Client reads binding moments from the cache and writes their status.
	Client client.Client
	// Recorder emits Events.
	Recorder events.EventRecorder
	// Clock is the trusted time expiry is measured against.
	Clock clock.PassiveClock
	// Metrics counts moments emitted, resolved by kind and expired, disabled hatches and
	// calibration notes (envelope-04 §5.8, §5.9, §12.2, §12.3); nil counts nothing. Each is
	// counted in the status transition that records it (see observeMoment).
	Metrics *metrics.Moments
	// Resolutions counts resolutions by surface and the time from announcement to resolution
	// (docs/operations.md "Metrics and Events"); nil counts nothing. Each is counted in the
	// status transition that records the resolution, as Metrics is.
	Resolutions *metrics.Resolutions
}

// momentScope is what one reconcile of a BindingMoment decided.
type momentScope struct {
	bm  *v1alpha1.BindingMoment
	now time.Time
	// resolved: spec.resolution is present and the status does not record it yet.
	resolved bool
	// expired: spec.expiresAt has passed with no resolution.
	expired bool
}

// actConflictRetry is how soon a copy onto the Act that lost a write race (or read a stale
// cache) is tried again.
const actConflictRetry = time.Second

// Reconcile records the resolution or the expiry, or waits for expiresAt; a resolved moment's
// record is then copied onto its Act (again on every reconcile until the Act has it, so a
// restart between the two writes loses nothing).
func (r *BindingMomentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bm := &v1alpha1.BindingMoment{}
	if err := r.Client.Get(ctx, req.NamespacedName, bm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &momentScope{bm: bm, now: r.Clock.Now()}
	res := r.decide(s)
	if err := r.patchStatus(ctx, s); err != nil {
		return res, err
	}
	switch err := r.recordOnAct(ctx, bm); {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: actConflictRetry}, nil
	case err != nil:
		return res, err
	}
	return res, nil
}

// recordOnAct copies a resolved moment's record (kind, resolvedBy, resolvedAt, resolvedVia)
// into its Act's status.momentResolutions under the moment's name, when the Act does not hold
// it yet. The patch carries an optimistic lock: two moments of one act (minPrincipals > 1)
// never overwrite each other's entry. A missing Act has nothing to record on.
func (r *BindingMomentReconciler) recordOnAct(ctx context.Context, bm *v1alpha1.BindingMoment) error {
	if bm.Status.State != v1alpha1.BindingMomentResolved || bm.Spec.Resolution == nil {
		return nil
	}
	want := v1alpha1.ActMomentResolution{Name: bm.Name, Kind: bm.Spec.Resolution.Kind, ResolvedBy: bm.Status.ResolvedBy,
		ResolvedAt: bm.Status.ResolvedAt.DeepCopy(), ResolvedVia: bm.Status.ResolvedVia.DeepCopy()}
	act := &v1alpha1.Act{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bm.Namespace, Name: bm.Spec.ActRef.Name}, act); err != nil {
		return client.IgnoreNotFound(err)
	}
	i := slices.IndexFunc(act.Status.MomentResolutions, func(m v1alpha1.ActMomentResolution) bool { return m.Name == bm.Name })
	if i >= 0 && apiequality.Semantic.DeepEqual(act.Status.MomentResolutions[i], want) {
		return nil
	}
	if i < 0 && len(act.Status.MomentResolutions) >= maxActMomentResolutions {
		ctrl.LoggerFrom(ctx).Info("Act already records the most moment resolutions it can hold; this one is on the BindingMoment only",
			"act", klog.KObj(act), "bindingMoment", klog.KObj(bm), "max", maxActMomentResolutions)
		return nil
	}
	patch := client.MergeFromWithOptions(act.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if i >= 0 {
		act.Status.MomentResolutions[i] = want
	} else {
		act.Status.MomentResolutions = append(act.Status.MomentResolutions, want)
	}
	if err := r.Client.Status().Patch(ctx, act, patch); err != nil {
		return fmt.Errorf("record BindingMoment %s on Act %s: %w", bm.Name, klog.KObj(act), err)
	}
	return nil
}

// maxActMomentResolutions is the CRD's bound on an Act's status.momentResolutions (as on
// bindingMomentRefs).
const maxActMomentResolutions = 32

// decide records what happened. A final state stays (the CRD forbids leaving it). At or after
// expiresAt the moment expires, even if a resolution was written meanwhile: a resolution
// recorded at or after expiry authorizes nothing (the authority service counts only those with
// status.resolvedAt before expiresAt), so it is not recorded as one. Before then a resolution
// is recorded (admission checked its author); otherwise the moment is looked at again at
// expiresAt.
func (r *BindingMomentReconciler) decide(s *momentScope) ctrl.Result {
	bm := s.bm
	switch {
	case bm.Status.State == v1alpha1.BindingMomentResolved || bm.Status.State == v1alpha1.BindingMomentExpired:
		return ctrl.Result{}
	case !s.now.Before(bm.Spec.ExpiresAt.Time):
		s.expired = true
		return ctrl.Result{}
	case bm.Spec.Resolution != nil:
		s.resolved = true
		return ctrl.Result{}
	}
	return after(bm.Spec.ExpiresAt.Sub(s.now))
}

func (r *BindingMomentReconciler) patchStatus(ctx context.Context, s *momentScope) error {
	bm := s.bm
	status := bindingMomentStatus(bm, s)
	if apiequality.Semantic.DeepEqual(bm.Status, status) {
		return nil
	}
	patch := client.MergeFromWithOptions(bm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	emitted := bm.Status.State == ""
	bm.Status = status
	if err := r.Client.Status().Patch(ctx, bm, patch); err != nil {
		return fmt.Errorf("patch BindingMoment %s status: %w", klog.KObj(bm), err)
	}
	r.observeMoment(ctx, s, emitted)
	switch {
	case s.expired:
		r.Recorder.Eventf(bm, nil, corev1.EventTypeNormal, EventBindingMomentExpired, actionExpire,
			"Expired unresolved at %s; it can authorize nothing", bm.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	case s.resolved:
		r.Recorder.Eventf(bm, nil, corev1.EventTypeNormal, EventBindingMomentResolved, actionRecord,
			"Resolved by %s: %s", bm.Spec.Principal, bm.Spec.Resolution.Kind)
	}
	return nil
}

// bindingMomentStatus derives the status. It is pure.
//
//	state     Resolved condition
//	Pending   False AwaitingPrincipal
//	Expired   False Expired
//	Resolved  True  OptionSelected | Answered | Questioned | Declined
func bindingMomentStatus(bm *v1alpha1.BindingMoment, s *momentScope) v1alpha1.BindingMomentStatus {
	st := *bm.Status.DeepCopy()
	st.ObservedGeneration = bm.Generation
	if st.State == "" {
		st.State = v1alpha1.BindingMomentPending
	}
	switch {
	case s.resolved:
		st.State = v1alpha1.BindingMomentResolved
		st.ResolvedBy = bm.Spec.Principal // admission admits the resolution from no one else
		t := metav1.NewTime(s.now)
		st.ResolvedAt = &t
		// Admission checked via's issuer, subject and authTime against the request's
		// authentication; it is recorded as written.
		st.ResolvedVia = bm.Spec.Resolution.Via.DeepCopy()
	case s.expired:
		st.State = v1alpha1.BindingMomentExpired
	}
	c := metav1.Condition{Type: v1alpha1.BindingMomentResolvedCondition, Status: metav1.ConditionFalse}
	switch st.State {
	case v1alpha1.BindingMomentResolved:
		c.Status = metav1.ConditionTrue
		c.Reason, c.Message = resolutionReason(bm.Spec.Resolution)
	case v1alpha1.BindingMomentExpired:
		c.Reason = v1alpha1.BindingMomentExpiredReason
		c.Message = "Expired unresolved at " + bm.Spec.ExpiresAt.UTC().Format(time.RFC3339) + "; it can authorize nothing"
	default:
		c.Reason = v1alpha1.BindingMomentAwaitingPrincipalReason
		c.Message = "Waiting for " + bm.Spec.Principal + " until " + bm.Spec.ExpiresAt.UTC().Format(time.RFC3339)
	}
	setCondition(&st.Conditions, c, bm.Generation, s.now)
	return st
}

func resolutionReason(res *v1alpha1.BindingMomentResolution) (string, string) {
	if res == nil {
		return v1alpha1.BindingMomentAwaitingPrincipalReason, "Resolved"
	}
	switch res.Kind {
	case v1alpha1.ResolutionOption:
		idx := int32(-1)
		if res.OptionIdx != nil {
			idx = *res.OptionIdx
		}
		return v1alpha1.BindingMomentOptionSelectedReason, fmt.Sprintf("The principal selected option %d", idx)
	case v1alpha1.ResolutionAnswer:
		return v1alpha1.BindingMomentAnsweredReason, "The principal answered"
	case v1alpha1.ResolutionQuestion:
		return v1alpha1.BindingMomentQuestionedReason, "The principal questioned the framing"
	}
	return v1alpha1.BindingMomentDeclinedReason, "The principal declined"
}

// SetupWithManager registers the reconciler.
func (r *BindingMomentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.BindingMoment{}).
		Named("bindingmoment").
		Complete(r)
}
