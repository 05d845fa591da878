package controllers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/metrics"
)

// sample returns the value (a histogram's sample count) of the series of name whose labels
// include want, and whether there is one.
func (h *harness) sample(t *testing.T, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// metricIs checks the series of name with labels want has value n (0 also matches no series).
func (h *harness) metricIs(t *testing.T, name string, want map[string]string, n float64) error {
	t.Helper()
	if got, _ := h.sample(t, name, want); got != n {
		return fmt.Errorf("%s%v = %v, want %v", name, want, got, n)
	}
	return nil
}

// realEnvelope builds a valid envelope (envelope-04) with the dialogue hatch closed and meta.
func realEnvelope(t *testing.T) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Build(envelope.Draft{
		Synopsis:        "Pay 500.00 to ACME for invoice 42.",
		Findings:        []string{"Invoice 42 is due today."},
		Recommendations: []string{"Pay it in full."},
		Offer:           "Ask for detail on any item.",
		Stem:            "How should invoice 42 be paid?",
		Options: []envelope.DraftOption{
			{Label: "Pay in full", Reasoning: "Settles the invoice.", Tool: "send_payment", Args: json.RawMessage(`{"amount":500}`)},
			{Label: "Pay half", Reasoning: "Keeps cash while checking.", Tool: "send_payment", Args: json.RawMessage(`{"amount":250}`)},
		},
		CloseDialogue: true,
		Meta:          &envelope.Meta{DecisionClass: "Consent", CalibrationNote: "Earlier I said the amount was small; it is not."},
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestBindingMomentMetricsAndHatchEvent: a moment is counted emitted once, with its disabled
// hatch (and one HatchDisabled Warning Event, envelope-04 §12.3) and its calibration note
// (§5.9); its resolution once, by kind, with the emission → resolution time; an expiry once.
// Later reconciles (pokes) count nothing again.
func TestBindingMomentMetricsAndHatchEvent(t *testing.T) {
	h := start(t, settings{})
	env := realEnvelope(t)
	escalated := v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionEscalated, State: v1alpha1.ActStateMatch,
		Code: string(ef.EFEscalationRequired), BindingMomentRefs: []v1alpha1.LocalObjectReference{{Name: "ask-alice"}, {Name: "ask-bob"}}}
	h.createAct(t, newAct("payout", "payments"), escalated)
	bm := newMoment("ask-alice", "payout", h.clock.Now().Add(10*time.Minute))
	bm.Spec.Envelope, bm.Spec.EnvelopeDigest, bm.Spec.Synopsis = string(env.Canonical()), v1alpha1.Digest(env.Digest()), env.Content().Synopsis
	other := newMoment("ask-bob", "payout", h.clock.Now().Add(10*time.Minute))
	h.create(t, bm, other)
	h.waitMoment(t, "ask-alice", v1alpha1.BindingMomentPending, "False/AwaitingPrincipal")
	h.waitMoment(t, "ask-bob", v1alpha1.BindingMomentPending, "False/AwaitingPrincipal")

	policy := h.ns + "/payments"
	base := func(dc string) map[string]string {
		return map[string]string{"policy": policy, "class": "FINANCIAL", "decision_class": dc}
	}
	with := func(m map[string]string, k, v string) map[string]string {
		m[k] = v
		return m
	}
	emittedOnce := func() error {
		for _, c := range []struct {
			name   string
			labels map[string]string
			n      float64
		}{
			{metrics.NameMomentsEmitted, base("consent"), 1},
			{metrics.NameMomentsEmitted, base("none"), 1}, // ask-bob: the fixture's non-envelope, hatches unknown
			{metrics.NameMomentsHatchDisabled, with(base("consent"), "hatch", "dialogue"), 1},
			{metrics.NameMomentsHatchDisabled, with(base("consent"), "hatch", "free_text"), 0},
			{metrics.NameMomentsHatchDisabled, with(base("none"), "hatch", "dialogue"), 0},
			{metrics.NameMomentsCalibrationNote, base("consent"), 1},
			{metrics.NameMomentsCalibrationNote, base("none"), 0},
		} {
			if err := h.metricIs(t, c.name, c.labels, c.n); err != nil {
				return err
			}
		}
		if n := h.rec.count("ask-alice", controllers.EventHatchDisabled); n != 1 {
			return fmt.Errorf("%d HatchDisabled Events for ask-alice, want 1", n)
		}
		if n := h.rec.count("ask-bob", controllers.EventHatchDisabled); n != 0 {
			return fmt.Errorf("%d HatchDisabled Events for ask-bob, want 0", n)
		}
		return nil
	}
	eventually(t, 10*time.Second, emittedOnce)
	ev := h.waitEvent(t, "ask-alice", controllers.EventHatchDisabled, "Warning", "dialogue", env.Digest())
	if strings.Contains(ev.Note, "500") {
		t.Fatalf("the Event carries envelope content: %q", ev.Note)
	}
	h.poke(t, bm, other)
	consistently(t, 2*time.Second, emittedOnce)

	// The principal questions the framing: resolved{kind="question"} once, and its time.
	got := &v1alpha1.BindingMoment{}
	if err := h.c.Get(ctxFor(t), h.key("ask-alice"), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion, EnvelopeDigest: got.Spec.EnvelopeDigest}
	if err := h.c.Update(ctxFor(t), got); err != nil {
		t.Fatal(err)
	}
	h.waitMoment(t, "ask-alice", v1alpha1.BindingMomentResolved, "True/Questioned")
	resolvedOnce := func() error {
		if err := h.metricIs(t, metrics.NameMomentsResolved, with(base("consent"), "kind", "question"), 1); err != nil {
			return err
		}
		return h.metricIs(t, metrics.NameMomentResolution, map[string]string{"kind": "question"}, 1)
	}
	eventually(t, 10*time.Second, resolvedOnce)

	// ask-bob expires: expired once; nothing else moves.
	h.clock.Step(10 * time.Minute)
	h.poke(t, bm, other)
	h.waitMoment(t, "ask-bob", v1alpha1.BindingMomentExpired, "False/Expired")
	eventually(t, 10*time.Second, func() error { return h.metricIs(t, metrics.NameMomentsExpired, base("none"), 1) })
	h.poke(t, bm, other)
	consistently(t, 2*time.Second, func() error {
		if err := resolvedOnce(); err != nil {
			return err
		}
		if err := h.metricIs(t, metrics.NameMomentsExpired, base("none"), 1); err != nil {
			return err
		}
		if err := h.metricIs(t, metrics.NameMomentsExpired, base("consent"), 0); err != nil {
			return err
		}
		return emittedOnce()
	})
}

// TestActDeniedAndIndeterminateEvents: a denied act gets one Warning Event Denied with its EF
// code; an INDETERMINATE one gets one Warning Event Indeterminate and is counted by the
// outstanding gauge until it settles; later reconciles emit nothing again; no Event carries an
// argument.
func TestActDeniedAndIndeterminateEvents(t *testing.T) {
	h := start(t, settings{backoff: time.Hour, maxBackoff: time.Hour})
	now := metav1.Now()
	denied := h.createAct(t, newAct("denied", "payments"), v1alpha1.ActStatus{
		Decision: v1alpha1.ActDecisionDenied, State: v1alpha1.ActStateVerified, Code: string(ef.EFPolicyDenied),
		Conditions: []metav1.Condition{{Type: v1alpha1.ActSettledCondition, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ActDeniedReason, Message: "Denied", LastTransitionTime: now}},
	})
	indet := h.createAct(t, newAct("lost", "payments"), v1alpha1.ActStatus{
		Decision: v1alpha1.ActDecisionAllowed, State: v1alpha1.ActStateIndeterminate, OperationID: "op-lost",
	})
	running := h.createAct(t, newAct("running", "payments"), v1alpha1.ActStatus{
		Decision: v1alpha1.ActDecisionAllowed, State: v1alpha1.ActStateInvoked, OperationID: "op-run",
	})

	ev := h.waitEvent(t, "denied", controllers.EventDenied, "Warning", string(ef.EFPolicyDenied), "send_payment", string(digestAction))
	if strings.Contains(ev.Note, "amount") {
		t.Fatalf("Denied note: %q", ev.Note)
	}
	h.waitEvent(t, "lost", controllers.EventIndeterminate, "Warning", "op-lost", "INDETERMINATE")
	gauge := map[string]string{"source": metrics.SourceActs}
	eventually(t, 10*time.Second, func() error { return h.metricIs(t, metrics.NameIndeterminate, gauge, 1) })
	// No policy "payments" exists: the reconciliation could not be made and is counted so.
	eventually(t, 10*time.Second, func() error {
		if n, _ := h.sample(t, metrics.NameReconciliationResults, map[string]string{"result": metrics.ResultNotConfigured}); n < 1 {
			return fmt.Errorf("NotConfigured counted %v times", n)
		}
		return nil
	})

	once := func() error {
		for _, c := range []struct {
			name, reason string
			n            int
		}{
			{"denied", controllers.EventDenied, 1}, {"denied", controllers.EventIndeterminate, 0},
			{"lost", controllers.EventIndeterminate, 1}, {"lost", controllers.EventDenied, 0},
			{"running", controllers.EventDenied, 0}, {"running", controllers.EventIndeterminate, 0},
		} {
			if got := h.rec.count(c.name, c.reason); got != c.n {
				return fmt.Errorf("%d %s Events for %s, want %d", got, c.reason, c.name, c.n)
			}
		}
		return nil
	}
	h.poke(t, denied, indet, running)
	consistently(t, 2*time.Second, once)

	// The running act ends INDETERMINATE too: its own Event, and the gauge says 2.
	running.Status.State = v1alpha1.ActStateIndeterminate
	if err := h.c.Status().Update(ctxFor(t), running); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, "running", controllers.EventIndeterminate, "Warning", "op-run")
	eventually(t, 10*time.Second, func() error { return h.metricIs(t, metrics.NameIndeterminate, gauge, 2) })
	if got := h.rec.count("running", controllers.EventIndeterminate); got != 1 {
		t.Fatalf("%d Indeterminate Events for running", got)
	}
}

// TestActEventsNotRepeatedForTransitionsBeforeStart: a manager started after an act was denied
// (a restart, a new leader) does not emit its Denied Event again; an act denied since it started
// gets one.
func TestActEventsNotRepeatedForTransitionsBeforeStart(t *testing.T) {
	h := start(t, settings{started: time.Now()})
	denied := func(name string, at time.Time) *v1alpha1.Act {
		return h.createAct(t, newAct(name, "payments"), v1alpha1.ActStatus{
			Decision: v1alpha1.ActDecisionDenied, State: v1alpha1.ActStateVerified, Code: string(ef.EFPolicyDenied),
			Conditions: []metav1.Condition{{Type: v1alpha1.ActSettledCondition, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ActDeniedReason, Message: "Denied", LastTransitionTime: metav1.NewTime(at)}},
		})
	}
	old := denied("old-deny", time.Now().Add(-time.Hour))
	denied("new-deny", time.Now())
	h.waitEvent(t, "new-deny", controllers.EventDenied, "Warning", string(ef.EFPolicyDenied))
	h.poke(t, old)
	consistently(t, 2*time.Second, func() error {
		if n := h.rec.count("old-deny", controllers.EventDenied); n != 0 {
			return fmt.Errorf("a manager started after the deny emitted %d Denied Events for it", n)
		}
		return nil
	})
}
