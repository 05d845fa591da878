package controllers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/metrics"
)

// indexActState indexes Acts by status.state, so the INDETERMINATE count is a lookup.
const indexActState = "actgate.io/act-state"

// CountIndeterminateActs returns a count of the Acts in state INDETERMINATE that reader (the
// manager's cache, with SetupIndexes run) holds, for metrics.RegisterIndeterminate: the
// actgate_indeterminate_outstanding{source="acts"} gauge, taken at scrape time so no resync,
// restart or missed event can make it drift.
func CountIndeterminateActs(reader client.Reader) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		var list v1alpha1.ActList
		if err := reader.List(ctx, &list, client.MatchingFields{indexActState: string(v1alpha1.ActStateIndeterminate)},
			client.UnsafeDisableDeepCopy); err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
}

// momentMetric describes a BindingMoment for metrics.Moments: the policy and consequence class
// of the Act it decides (a cache read), and the envelope's hatches, decision class and
// calibration note (envelope-04 §5.8, §5.9). An envelope that does not parse (admission checks
// envelopes, so only a moment written around it) is counted with both hatches open: a hatch is
// reported disabled only when the envelope says so.
func (r *BindingMomentReconciler) momentMetric(ctx context.Context, bm *v1alpha1.BindingMoment) (metrics.Moment, *envelope.Envelope) {
	m := metrics.Moment{FreeTextHatch: true, DialogueHatch: true}
	a := &v1alpha1.Act{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bm.Namespace, Name: bm.Spec.ActRef.Name}, a); err == nil {
		if a.Spec.PolicyRef.Name != "" {
			m.Policy = a.Namespace + "/" + a.Spec.PolicyRef.Name // the name policy.Compile gives it
		}
		m.Class = act.ConsequenceClass(a.Spec.ConsequenceClass)
	}
	env, err := envelope.Parse([]byte(bm.Spec.Envelope))
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("BindingMoment envelope does not parse; counted without its hatches", "bindingMoment", klog.KObj(bm))
		return m, nil
	}
	h := env.Hatches()
	m.FreeTextHatch, m.DialogueHatch = h.FreeText, h.Dialogue
	if c := env.Content(); c.Meta != nil {
		m.DecisionClass = c.Meta.DecisionClass
		m.CalibrationNote = c.Meta.CalibrationNote != ""
	}
	return m, env
}

// observeMoment counts what the status patch just recorded, once: the patch carries an
// optimistic lock, so of two reconciles of the same transition only one writes it, and a
// resync writes nothing (the status already says it). emitted is the first status the
// controller wrote (state "" → anything).
func (r *BindingMomentReconciler) observeMoment(ctx context.Context, s *momentScope, emitted bool) {
	if !emitted && !s.resolved && !s.expired {
		return
	}
	bm := s.bm
	m, _ := r.momentMetric(ctx, bm)
	if emitted {
		r.Metrics.Emitted(m)
		// envelope-04 §12.3: a moment that disables a hatch removes a veto path and is worth
		// recording; the dialogue (question-space) hatch turns it into a forced choice.
		var closed []string
		if !m.FreeTextHatch {
			closed = append(closed, "free_text (the answer-space hatch: the principal cannot answer in their own words)")
		}
		if !m.DialogueHatch {
			closed = append(closed, "dialogue (the question-space hatch: the principal cannot reject the question; a forced choice)")
		}
		for _, c := range closed {
			r.Recorder.Eventf(bm, nil, corev1.EventTypeWarning, EventHatchDisabled, actionEmit,
				"Envelope %s disables hatch %s (envelope-04 §12.3)", bm.Spec.EnvelopeDigest, c)
		}
	}
	switch {
	case s.resolved && bm.Spec.Resolution != nil:
		at := s.now
		if bm.Status.ResolvedAt != nil {
			at = bm.Status.ResolvedAt.Time
		}
		kind := string(bm.Spec.Resolution.Kind)
		r.Metrics.Resolved(m, kind, at.Sub(bm.CreationTimestamp.Time))
		var surface string
		if v := bm.Spec.Resolution.Via; v != nil {
			surface = v.Surface
		}
		r.Resolutions.Resolved(surface, kind, at.Sub(announcedAt(bm)))
	case s.expired:
		r.Metrics.Expired(m)
	}
}

// announcedAt is when the principal was told of the moment: the Announced condition's
// transition to True (every notification webhook took the announcement), else the moment's
// creation (no announcement was configured, or it was not delivered).
func announcedAt(bm *v1alpha1.BindingMoment) time.Time {
	if c := meta.FindStatusCondition(bm.Status.Conditions, v1alpha1.BindingMomentAnnouncedCondition); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return bm.CreationTimestamp.Time
}

// notifiedKey is an Act's notification: its reason (EventDenied, EventIndeterminate).
type notifiedKey struct {
	act    types.NamespacedName
	uid    types.UID
	reason string
}

// notified remembers which Denied and Indeterminate Events this process emitted, so a resync or
// any other reconcile of the same act does not emit them again. It holds one entry per act
// notified (fewer than the Acts the cache holds); entries go when the act is deleted, and an
// Indeterminate entry when the act leaves INDETERMINATE. Every operation is O(1).
type notified struct {
	mu   sync.Mutex
	acts map[types.NamespacedName]map[string]types.UID // act → reason → uid notified
}

// first records k and reports whether it was new (a new object under the same name is new).
func (n *notified) first(k notifiedKey) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.acts == nil {
		n.acts = map[types.NamespacedName]map[string]types.UID{}
	}
	reasons := n.acts[k.act]
	if reasons == nil {
		reasons = map[string]types.UID{}
		n.acts[k.act] = reasons
	}
	if uid, ok := reasons[k.reason]; ok && uid == k.uid {
		return false
	}
	reasons[k.reason] = k.uid
	return true
}

// forget drops the entries of an act (every reason, or only reason when given).
func (n *notified) forget(name types.NamespacedName, reason string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	reasons := n.acts[name]
	if reasons == nil {
		return
	}
	if reason == "" {
		delete(n.acts, name)
		return
	}
	delete(reasons, reason)
	if len(reasons) == 0 {
		delete(n.acts, name)
	}
}

// startGrace allows for clock skew between the authority service, which stamps the Settled
// condition, and the manager.
const startGrace = time.Minute

// notify emits the Warning Events of a denied act and of an INDETERMINATE one, once per act and
// process (see notified). A transition recorded before the reconciler's Started time (less
// startGrace) is not notified: a manager that (re)starts or takes over leadership does not
// repeat the Events of every act in the cluster. The notes carry the EF code, tool, server,
// class and digests, never arguments.
func (r *ActReconciler) notify(s *actScope) {
	a := s.act
	key := types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
	if s.deleted {
		r.notified.forget(key, "")
		return
	}
	st := a.Status
	if st.State == "" && st.Decision == "" {
		return
	}
	c := settledCondition(st)
	if c.Reason != v1alpha1.ActIndeterminateReason {
		r.notified.forget(key, EventIndeterminate)
	}
	var reason string
	switch c.Reason {
	case v1alpha1.ActDeniedReason:
		reason = EventDenied
	case v1alpha1.ActIndeterminateReason:
		reason = EventIndeterminate
	default:
		return
	}
	if !r.notified.first(notifiedKey{act: key, uid: a.UID, reason: reason}) {
		return
	}
	if len(s.escalationExpired) > 0 {
		return // EscalationExpired, emitted with this status, already says it was denied
	}
	if !r.Started.IsZero() {
		at := a.CreationTimestamp.Time
		if sc := meta.FindStatusCondition(st.Conditions, v1alpha1.ActSettledCondition); sc != nil && sc.Reason == c.Reason {
			at = sc.LastTransitionTime.Time
		}
		if at.Before(r.Started.Add(-startGrace)) {
			return
		}
	}
	switch reason {
	case EventDenied:
		code := st.Code
		if code == "" {
			code = "no code"
		}
		r.Recorder.Eventf(a, nil, corev1.EventTypeWarning, EventDenied, actionDeny,
			"%s", note("Denied with "+code+": tool "+a.Spec.Tool+" on server "+a.Spec.Server+
				", class "+string(a.Spec.ConsequenceClass)+", action "+string(a.Spec.ActionDigest)+"; nothing was invoked"))
	case EventIndeterminate:
		r.Recorder.Eventf(a, nil, corev1.EventTypeWarning, EventIndeterminate, actionReconcile,
			"%s", note("Operation "+st.OperationID+" (tool "+a.Spec.Tool+" on server "+a.Spec.Server+", action "+
				string(a.Spec.ActionDigest)+") is INDETERMINATE: its outcome is unknown until authenticated reconciliation, and it is never retried"))
	}
}
