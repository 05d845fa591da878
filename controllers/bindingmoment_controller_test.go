package controllers_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/ef"
)

func newMoment(name, act string, expires time.Time) *v1alpha1.BindingMoment {
	return &v1alpha1.BindingMoment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BindingMomentSpec{
			Envelope: `{"synopsis":"Pay 500.00 to ACME"}`, EnvelopeDigest: digestEnv,
			Synopsis: "Pay 500.00 to ACME", Principal: "alice@example.com",
			ActRef: v1alpha1.LocalObjectReference{Name: act}, ExpiresAt: metav1.NewTime(expires),
		},
	}
}

func (h *harness) waitMoment(t *testing.T, name string, state v1alpha1.BindingMomentState, cond string) *v1alpha1.BindingMoment {
	t.Helper()
	bm := &v1alpha1.BindingMoment{}
	eventually(t, 20*time.Second, func() error {
		if err := h.c.Get(ctxFor(t), h.key(name), bm); err != nil {
			return err
		}
		if err := expect("state", bm.Status.State, state); err != nil {
			return err
		}
		return expect("Resolved", condition(bm.Status.Conditions, v1alpha1.BindingMomentResolvedCondition), cond)
	})
	return bm
}

func TestBindingMomentExpiry(t *testing.T) {
	const ttl = 10 * time.Minute
	h := start(t, settings{})
	expires := h.clock.Now().Add(ttl)
	escalated := v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionEscalated, State: v1alpha1.ActStateMatch,
		Code: string(ef.EFEscalationRequired), BindingMomentRefs: []v1alpha1.LocalObjectReference{{Name: "ask-alice"}}}
	h.createAct(t, newAct("payout", "payments"), escalated)
	bm := newMoment("ask-alice", "payout", expires)
	h.create(t, bm)

	h.waitMoment(t, "ask-alice", v1alpha1.BindingMomentPending, "False/AwaitingPrincipal")
	h.waitSettled(t, "payout", "False/AwaitingPrincipal")

	// A second before expiresAt it is still pending, and the act still waits.
	h.clock.Step(ttl - time.Second)
	h.poke(t, bm)
	consistently(t, 2*time.Second, func() error {
		got := &v1alpha1.BindingMoment{}
		if err := h.c.Get(ctxFor(t), h.key("ask-alice"), got); err != nil {
			return err
		}
		if err := expect("state", got.Status.State, v1alpha1.BindingMomentPending); err != nil {
			return err
		}
		act, err := h.getAct(t, "payout")
		if err != nil {
			return err
		}
		return expect("decision", act.Status.Decision, v1alpha1.ActDecisionEscalated)
	})

	// At expiresAt it expires, and the act it gates is denied: the escalation expired.
	h.clock.Step(time.Second)
	h.poke(t, bm)
	h.waitMoment(t, "ask-alice", v1alpha1.BindingMomentExpired, "False/Expired")
	h.waitEvent(t, "ask-alice", controllers.EventBindingMomentExpired, corev1.EventTypeNormal, "can authorize nothing")
	act := h.waitSettled(t, "payout", "True/Denied")
	if act.Status.Decision != v1alpha1.ActDecisionDenied || act.Status.Code != string(ef.EFEscalationRequired) || act.Status.State != v1alpha1.ActStateMatch {
		t.Fatalf("act status = %+v", act.Status)
	}
	h.waitEvent(t, "payout", controllers.EventEscalationExpired, corev1.EventTypeWarning, "ask-alice")
}

func TestBindingMomentResolvedAndQuorum(t *testing.T) {
	const ttl = 10 * time.Minute
	h := start(t, settings{})
	expires := h.clock.Now().Add(ttl)

	// An act that asked two principals is denied only when both moments expired.
	h.createAct(t, newAct("two", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionEscalated,
		State: v1alpha1.ActStateMatch, BindingMomentRefs: []v1alpha1.LocalObjectReference{{Name: "two-a"}, {Name: "two-b"}}})
	early, late := newMoment("two-a", "two", expires), newMoment("two-b", "two", expires.Add(ttl))
	// A resolved moment is recorded as resolved and never expires.
	resolved := newMoment("resolved", "other", expires)
	resolved.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To(int32(0)), EnvelopeDigest: digestEnv}
	h.create(t, early, late, resolved)

	bm := h.waitMoment(t, "resolved", v1alpha1.BindingMomentResolved, "True/OptionSelected")
	if bm.Status.ResolvedBy != "alice@example.com" || bm.Status.ResolvedAt == nil {
		t.Fatalf("resolved status = %+v", bm.Status)
	}
	h.waitEvent(t, "resolved", controllers.EventBindingMomentResolved, corev1.EventTypeNormal, "alice@example.com")

	h.clock.Step(ttl)
	h.poke(t, early, late, resolved)
	h.waitMoment(t, "two-a", v1alpha1.BindingMomentExpired, "False/Expired")
	consistently(t, 2*time.Second, func() error {
		act, err := h.getAct(t, "two")
		if err != nil {
			return err
		}
		if act.Status.Decision != v1alpha1.ActDecisionEscalated {
			return fmt.Errorf("denied while %s was still pending", late.Name)
		}
		got := &v1alpha1.BindingMoment{}
		if err := h.c.Get(ctxFor(t), h.key("resolved"), got); err != nil {
			return err
		}
		return expect("resolved state", got.Status.State, v1alpha1.BindingMomentResolved)
	})

	h.clock.Step(ttl)
	h.poke(t, late)
	h.waitMoment(t, "two-b", v1alpha1.BindingMomentExpired, "False/Expired")
	h.waitSettled(t, "two", "True/Denied")
}
