package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/metrics"
)

// histogramSum is the sum of the histogram series of name in reg whose labels include want.
func histogramSum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name || mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}

// count is the sum of the values (a histogram's sample counts) of every series of name in reg.
func count(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return n
}

// startMomentManager runs a second manager with only a BindingMomentReconciler on h's
// namespace and clock, with its own metrics registry: another process (a restarted manager, a
// new leader) looking at the same moments.
func startMomentManager(t *testing.T, h *harness) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	mgr, err := ctrl.NewManager(h.env.Config, ctrl.Options{
		Scheme: h.env.Scheme, Logger: testLogger(),
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{h.ns: {}}, ByObject: controllers.CacheByObject()},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	moments, err := metrics.NewMoments(reg)
	if err != nil {
		t.Fatal(err)
	}
	resolutions, err := metrics.NewResolutions(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.BindingMomentReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("actgate-test-2"),
		Clock: h.clock, Metrics: moments, Resolutions: resolutions}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("second manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("second manager did not stop")
		}
	})
	return reg
}

// TestBindingMomentResolutionAudit: a resolution's via ends in the moment's status.resolvedVia
// beside resolvedBy, and the moment's record on its Act's status.momentResolutions; each
// resolution is counted once in actgate_bindingmoment_resolutions_total{surface,kind} and
// actgate_bindingmoment_time_to_resolution_seconds{surface} (from the Announced condition,
// else creation, to status.resolvedAt); later reconciles, and a second manager started after
// the resolutions, count nothing again; an Act that lost its record gets it back.
func TestBindingMomentResolutionAudit(t *testing.T) {
	h := start(t, settings{})
	names := []string{"via-approval", "via-kubectl", "via-none", "via-invented"}
	refs := make([]v1alpha1.LocalObjectReference, len(names))
	for i, n := range names {
		refs[i] = v1alpha1.LocalObjectReference{Name: n}
	}
	h.createAct(t, newAct("payout", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionEscalated,
		State: v1alpha1.ActStateMatch, BindingMomentRefs: refs})
	expires := h.clock.Now().Add(time.Hour)
	for _, n := range names {
		h.create(t, newMoment(n, "payout", expires))
	}
	for _, n := range names {
		h.waitMoment(t, n, v1alpha1.BindingMomentPending, "False/AwaitingPrincipal")
	}

	// via-approval was announced 90 s before the controller's now; the others were not.
	announced := metav1.NewTime(h.clock.Now().Add(-90 * time.Second))
	eventually(t, 10*time.Second, func() error {
		bm := &v1alpha1.BindingMoment{}
		if err := h.c.Get(ctxFor(t), h.key("via-approval"), bm); err != nil {
			return err
		}
		meta.SetStatusCondition(&bm.Status.Conditions, metav1.Condition{Type: v1alpha1.BindingMomentAnnouncedCondition,
			Status: metav1.ConditionTrue, Reason: v1alpha1.BindingMomentDeliveredReason, Message: "Delivered", LastTransitionTime: announced})
		return h.c.Status().Update(ctxFor(t), bm)
	})

	authTime := metav1.NewTime(time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC))
	vias := map[string]*v1alpha1.ResolutionVia{
		"via-approval": {Surface: v1alpha1.SurfaceApprovalService, Issuer: "https://idp.example.com", Subject: "alice-sub", AuthTime: &authTime},
		"via-kubectl":  {Surface: v1alpha1.SurfaceKubectl},
		"via-none":     nil,
		"via-invented": {Surface: "my-own-bot"},
	}
	kinds := map[string]*v1alpha1.BindingMomentResolution{
		"via-approval": {Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To(int32(0))},
		"via-kubectl":  {Kind: v1alpha1.ResolutionDeclined},
		"via-none":     {Kind: v1alpha1.ResolutionQuestion},
		"via-invented": {Kind: v1alpha1.ResolutionAnswer, Answer: "Pay half."},
	}
	for _, n := range names {
		bm := &v1alpha1.BindingMoment{}
		if err := h.c.Get(ctxFor(t), h.key(n), bm); err != nil {
			t.Fatal(err)
		}
		r := kinds[n]
		r.EnvelopeDigest, r.Via = bm.Spec.EnvelopeDigest, vias[n]
		bm.Spec.Resolution = r
		if err := h.c.Update(ctxFor(t), bm); err != nil {
			t.Fatalf("resolve %s: %v", n, err)
		}
	}

	resolved := map[string]*v1alpha1.BindingMoment{}
	for _, n := range names {
		bm := h.waitMoment(t, n, v1alpha1.BindingMomentResolved, "True/"+map[v1alpha1.ResolutionKind]string{
			v1alpha1.ResolutionOption: "OptionSelected", v1alpha1.ResolutionDeclined: "Declined",
			v1alpha1.ResolutionQuestion: "Questioned", v1alpha1.ResolutionAnswer: "Answered"}[kinds[n].Kind])
		if bm.Status.ResolvedBy != "alice@example.com" || bm.Status.ResolvedAt == nil || !equality.Semantic.DeepEqual(bm.Status.ResolvedVia, vias[n]) {
			t.Fatalf("%s status: resolvedBy %q, resolvedAt %v, resolvedVia %+v; want alice, a time and %+v",
				n, bm.Status.ResolvedBy, bm.Status.ResolvedAt, bm.Status.ResolvedVia, vias[n])
		}
		resolved[n] = bm
	}

	// The Act records every moment's resolution.
	onAct := func() error {
		act, err := h.getAct(t, "payout")
		if err != nil {
			return err
		}
		if len(act.Status.MomentResolutions) != len(names) {
			return fmt.Errorf("act status.momentResolutions = %+v, want %d entries", act.Status.MomentResolutions, len(names))
		}
		for _, m := range act.Status.MomentResolutions {
			bm := resolved[m.Name]
			if bm == nil {
				return fmt.Errorf("act records an unknown moment %q", m.Name)
			}
			want := v1alpha1.ActMomentResolution{Name: m.Name, Kind: kinds[m.Name].Kind, ResolvedBy: "alice@example.com",
				ResolvedAt: bm.Status.ResolvedAt, ResolvedVia: vias[m.Name]}
			if !equality.Semantic.DeepEqual(m, want) {
				return fmt.Errorf("act records %+v, want %+v", m, want)
			}
		}
		return nil
	}
	eventually(t, 20*time.Second, onAct)

	series := []struct {
		surface, kind string
		since         time.Duration
	}{
		{v1alpha1.SurfaceApprovalService, "option", resolved["via-approval"].Status.ResolvedAt.Sub(announced.Time)},
		{v1alpha1.SurfaceKubectl, "declined", resolved["via-kubectl"].Status.ResolvedAt.Sub(resolved["via-kubectl"].CreationTimestamp.Time)},
		{metrics.SurfaceUnknown, "question", resolved["via-none"].Status.ResolvedAt.Sub(resolved["via-none"].CreationTimestamp.Time)},
		{metrics.SurfaceOther, "answer", resolved["via-invented"].Status.ResolvedAt.Sub(resolved["via-invented"].CreationTimestamp.Time)},
	}
	countedOnce := func() error {
		for _, s := range series {
			if err := h.metricIs(t, metrics.NameBindingMomentResolutions, map[string]string{"surface": s.surface, "kind": s.kind}, 1); err != nil {
				return err
			}
			if err := h.metricIs(t, metrics.NameBindingMomentTimeToResolution, map[string]string{"surface": s.surface}, 1); err != nil {
				return err
			}
			if got := histogramSum(t, h.reg, metrics.NameBindingMomentTimeToResolution, map[string]string{"surface": s.surface}); got != s.since.Seconds() {
				return fmt.Errorf("time to resolution through %s = %vs, want %vs", s.surface, got, s.since.Seconds())
			}
		}
		if n := count(t, h.reg, metrics.NameBindingMomentResolutions); n != float64(len(names)) {
			return fmt.Errorf("%v resolutions counted in all, want %d", n, len(names))
		}
		return nil
	}
	eventually(t, 10*time.Second, countedOnce)
	if s := series[0].since; s != 90*time.Second {
		t.Fatalf("via-approval resolved %v after its announcement; the fake clock did not stand still", s)
	}

	// Later reconciles count nothing again, and neither does another manager started now.
	objs := make([]client.Object, len(names))
	for i, n := range names {
		objs[i] = resolved[n]
	}
	second := startMomentManager(t, h)
	h.poke(t, objs...)
	consistently(t, 3*time.Second, func() error {
		if n := count(t, second, metrics.NameBindingMomentResolutions) + count(t, second, metrics.NameBindingMomentTimeToResolution); n != 0 {
			return fmt.Errorf("a manager started after the resolutions counted %v", n)
		}
		return countedOnce()
	})

	// A manager that stopped between the moment's status and the Act's leaves the Act without
	// the record; the next reconcile writes it, and counts nothing.
	act, err := h.getAct(t, "payout")
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFromWithOptions(act.DeepCopy(), client.MergeFromWithOptimisticLock{})
	act.Status.MomentResolutions = act.Status.MomentResolutions[1:]
	if err := h.c.Status().Patch(ctxFor(t), act, patch); err != nil {
		t.Fatal(err)
	}
	h.poke(t, objs...)
	eventually(t, 20*time.Second, onAct)
	consistently(t, time.Second, countedOnce)
}
