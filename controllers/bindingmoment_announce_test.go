package controllers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/notify"
)

// hookReceiver is a local webhook receiver answering status to every request.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	bodies []string
}

func newHookReceiver(t *testing.T, status int) *hookReceiver {
	r := &hookReceiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.mu.Unlock()
		w.WriteHeader(r.status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// startAnnouncer runs a manager with the BindingMoment controller and the announcer in h's
// namespace, posting to url; the returned function stops it (t's cleanup too).
func startAnnouncer(t *testing.T, h *harness, url string) (stop func()) {
	t.Helper()
	n, err := notify.New(notify.Options{
		Webhooks: []notify.Webhook{{URL: url}}, ConsoleURL: "https://console.example/moments/{id}",
		MaxAttempts: 2, AttemptTimeout: 5 * time.Second,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(h.env.Config, ctrl.Options{
		Scheme: h.env.Scheme, Logger: testLogger(),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{h.ns: {}}, ByObject: controllers.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controllers.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.BindingMomentReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("actgate-test"), Clock: h.clock}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.BindingMomentAnnouncer{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Notifier: n, Clock: h.clock}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("manager: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("manager did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func announcerHarness(t *testing.T) *harness {
	env := apiServer(t)
	return &harness{env: env, c: env.Client, ns: env.Namespace(t),
		clock: clocktesting.NewFakeClock(time.Now().Add(time.Hour).Truncate(time.Second))}
}

// A distinctive value in the envelope's options: the announcement never carries it
// (envelope-04 §8.4).
const envelopeSecret = "IBAN-DE00-SECRET-7731"

func announcedMoment(name, act string, expires time.Time) *v1alpha1.BindingMoment {
	bm := newMoment(name, act, expires)
	bm.Spec.Envelope = `{"synopsis":"Pay 500.00 to ACME","question":{"options":[{"label":"Pay ` + envelopeSecret + `"}]}}`
	return bm
}

func (h *harness) waitAnnounced(t *testing.T, name, want string) *v1alpha1.BindingMoment {
	t.Helper()
	bm := &v1alpha1.BindingMoment{}
	eventually(t, 20*time.Second, func() error {
		if err := h.c.Get(ctxFor(t), h.key(name), bm); err != nil {
			return err
		}
		return expect("Announced", condition(bm.Status.Conditions, v1alpha1.BindingMomentAnnouncedCondition), want)
	})
	return bm
}

// TestBindingMomentAnnouncedOnce: a pending BindingMoment is announced to the local receiver
// once, with the synopsis, principal, act facts and console link and nothing of the envelope's
// options; resyncs and a manager restart do not announce it again.
func TestBindingMomentAnnouncedOnce(t *testing.T) {
	h := announcerHarness(t)
	r := newHookReceiver(t, http.StatusOK)
	stop := startAnnouncer(t, h, r.srv.URL)
	h.createAct(t, newAct("payout", "payments"), v1alpha1.ActStatus{})
	bm := announcedMoment("ask-alice", "payout", h.clock.Now().Add(10*time.Minute))
	h.create(t, bm)

	h.waitAnnounced(t, "ask-alice", "True/Delivered")
	// The BindingMoment controller and the announcer reconcile the object independently: the
	// announcer's condition can land first, with Resolved still absent.
	eventually(t, 20*time.Second, func() error {
		got := &v1alpha1.BindingMoment{}
		if err := h.c.Get(ctxFor(t), h.key("ask-alice"), got); err != nil {
			return err
		}
		return expect("Resolved", condition(got.Status.Conditions, v1alpha1.BindingMomentResolvedCondition), "False/AwaitingPrincipal")
	})
	bodies := r.received()
	if len(bodies) != 1 {
		t.Fatalf("receiver got %d announcements, want 1", len(bodies))
	}
	for _, want := range []string{"Pay 500.00 to ACME", "alice@example.com", "payments/send_payment", "FINANCIAL", h.ns + "/ask-alice",
		"https://console.example/moments/" + h.ns + "%2Fask-alice", string(digestEnv)} {
		if !strings.Contains(bodies[0], want) {
			t.Errorf("announcement lacks %q: %s", want, bodies[0])
		}
	}
	if strings.Contains(bodies[0], envelopeSecret) {
		t.Errorf("the announcement carries the envelope's options: %s", bodies[0])
	}

	// Resyncs: the moment changes (annotations) and is reconciled again; no second announcement.
	h.poke(t, bm)
	h.poke(t, bm)
	consistently(t, 2*time.Second, func() error { return expect("announcements", len(r.received()), 1) })

	// A restarted manager does not announce it again either.
	stop()
	startAnnouncer(t, h, r.srv.URL)
	h.poke(t, bm)
	consistently(t, 3*time.Second, func() error { return expect("announcements", len(r.received()), 1) })
}

// TestBindingMomentAnnouncement covers the moments that are not announced, or not twice.
func TestBindingMomentAnnouncement(t *testing.T) {
	t.Run("a refusing receiver: DeliveryFailed, not retried", func(t *testing.T) {
		h := announcerHarness(t)
		r := newHookReceiver(t, http.StatusForbidden)
		startAnnouncer(t, h, r.srv.URL)
		h.create(t, announcedMoment("ask", "no-act", h.clock.Now().Add(10*time.Minute)))
		bm := h.waitAnnounced(t, "ask", "False/DeliveryFailed")
		if c := bm.Status.Conditions; !strings.Contains(conditionMessage(c), "rejected") || strings.Contains(conditionMessage(c), r.srv.URL+"/") {
			t.Errorf("message %q", conditionMessage(c))
		}
		h.poke(t, bm)
		consistently(t, 2*time.Second, func() error { return expect("requests", len(r.received()), 1) })
	})
	t.Run("expired before it was seen: not announced", func(t *testing.T) {
		h := announcerHarness(t)
		r := newHookReceiver(t, http.StatusOK)
		h.create(t, announcedMoment("late", "no-act", h.clock.Now().Add(-time.Minute)))
		startAnnouncer(t, h, r.srv.URL)
		eventually(t, 20*time.Second, func() error {
			bm := &v1alpha1.BindingMoment{}
			if err := h.c.Get(ctxFor(t), h.key("late"), bm); err != nil {
				return err
			}
			return expect("state", bm.Status.State, v1alpha1.BindingMomentExpired)
		})
		consistently(t, 2*time.Second, func() error { return expect("requests", len(r.received()), 0) })
	})
	t.Run("interrupted mid-delivery: recorded, not resent", func(t *testing.T) {
		h := announcerHarness(t)
		r := newHookReceiver(t, http.StatusOK)
		bm := announcedMoment("cut", "no-act", h.clock.Now().Add(10*time.Minute))
		h.create(t, bm)
		// What a manager that stopped between its claim and its record leaves behind.
		bm.Status.Conditions = []metav1.Condition{{Type: v1alpha1.BindingMomentAnnouncedCondition, Status: metav1.ConditionUnknown,
			Reason: v1alpha1.BindingMomentAnnouncingReason, Message: "Announcing", LastTransitionTime: metav1.Now()}}
		if err := h.c.Status().Update(ctxFor(t), bm); err != nil {
			t.Fatal(err)
		}
		startAnnouncer(t, h, r.srv.URL)
		h.waitAnnounced(t, "cut", "False/Interrupted")
		consistently(t, 2*time.Second, func() error { return expect("requests", len(r.received()), 0) })
	})
}

func conditionMessage(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type == v1alpha1.BindingMomentAnnouncedCondition {
			return c.Message
		}
	}
	return ""
}
