package controllers_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/metrics"
	reconclient "github.com/actgate/actgate/internal/reconcile"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// shared is the one API server the tests of this package share (a start costs seconds on two
// cores). It starts on the first test that asks for it; TestMain stops it after the last test,
// once every test's manager has been stopped by its cleanup.
var shared struct {
	once sync.Once
	env  *envtest.Env
	err  error
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(testLogger())
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// apiServer returns the shared control plane, skipping t under -short.
func apiServer(t *testing.T) *envtest.Env {
	t.Helper()
	envtest.SkipIfShort(t)
	shared.once.Do(func() { shared.env, shared.err = envtest.New(context.Background()) })
	if shared.err != nil {
		t.Fatalf("envtest: %v", shared.err)
	}
	return shared.env
}

// testLogger discards logs unless ACTGATE_TEST_LOG is set.
func testLogger() logr.Logger {
	if os.Getenv("ACTGATE_TEST_LOG") == "" {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
}

// harness is one running manager with every reconciler of the package, watching one fresh
// namespace, on a fake clock.
type harness struct {
	env   *envtest.Env
	c     client.Client
	ns    string
	clock *clocktesting.FakeClock
	// reg holds the reconcilers' metrics (internal/metrics) and the INDETERMINATE Acts gauge.
	reg *prometheus.Registry
	// rec counts the Events the reconcilers emit, by object and reason, and passes them on.
	rec *countingRecorder
}

// countingRecorder counts Events by regarding object name and reason before recording them:
// the events.k8s.io recorder folds repeats into a series it writes minutes later, so the API
// alone cannot show that an Event was emitted once.
type countingRecorder struct {
	events.EventRecorder
	mu sync.Mutex
	n  map[string]int
}

func (r *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if o, err := meta.Accessor(regarding); err == nil {
		r.mu.Lock()
		r.n[o.GetName()+"/"+reason]++
		r.mu.Unlock()
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// count is how many Events with reason were emitted about the object named name.
func (r *countingRecorder) count(name, reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name+"/"+reason]
}

// settings adjusts the reconcilers a harness runs.
type settings struct {
	retention, grace, backoff, maxBackoff, freshness time.Duration
	// dispatcherGone is the ActReconciler's DispatcherGoneGrace.
	dispatcherGone time.Duration
	// started is the ActReconciler's Started (zero: every act is notified).
	started time.Time
}

// start runs a manager for t in a fresh namespace; t's cleanup stops it (before TestMain stops
// the API server, so no watch outlives it).
func start(t *testing.T, set settings) *harness {
	t.Helper()
	env := apiServer(t)
	// The fake clock starts an hour ahead of the API server's, so objects the server stamps
	// (creationTimestamp) are never in the fake clock's future however long a test runs.
	h := &harness{env: env, c: env.Client, ns: env.Namespace(t), clock: clocktesting.NewFakeClock(time.Now().Add(time.Hour).Truncate(time.Second)),
		reg: prometheus.NewPedanticRegistry()}

	log := testLogger()
	cacheOpts := cache.Options{DefaultNamespaces: map[string]cache.Config{h.ns: {}}, ByObject: controllers.CacheByObject()}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 log,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test runs its own manager in the one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controllers.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	h.rec = &countingRecorder{EventRecorder: mgr.GetEventRecorder("actgate-test"), n: map[string]int{}}
	moments, err := metrics.NewMoments(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	resolutions, err := metrics.NewResolutions(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	results, err := metrics.NewReconciliation(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterIndeterminate(h.reg, metrics.SourceActs, 5*time.Second, controllers.CountIndeterminateActs(mgr.GetClient())); err != nil {
		t.Fatal(err)
	}
	for _, setup := range []interface{ SetupWithManager(ctrl.Manager) error }{
		&controllers.ToolPolicyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("actgate-toolpolicy"), Clock: h.clock, SecretRecheck: 200 * time.Millisecond},
		&controllers.ActReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: h.rec, Clock: h.clock,
			Retention: set.retention, LeaseGrace: set.grace, DispatcherGoneGrace: set.dispatcherGone,
			Reconciler: &reconclient.Client{Timeout: 5 * time.Second},
			Backoff:    set.backoff, MaxBackoff: set.maxBackoff, Freshness: set.freshness,
			Metrics: results, Started: set.started},
		&controllers.AuthorityLeaseReconciler{Client: mgr.GetClient(), Clock: h.clock, Retention: set.retention},
		&controllers.BindingMomentReconciler{Client: mgr.GetClient(),
			Recorder: h.rec, Clock: h.clock, Metrics: moments, Resolutions: resolutions},
	} {
		if err := setup.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
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
	return h
}

func (h *harness) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: h.ns, Name: name}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// poke changes an annotation of o, which makes every controller watching it reconcile it
// again: how a test lets a reconciler see a fake clock that moved.
func (h *harness) poke(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.actgate.io/poke":"%d"}}}`, time.Now().UnixNano()))
		// An object that is gone needs no poke (a reconciler may delete it meanwhile).
		if err := h.c.Patch(ctxFor(t), o, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			t.Fatalf("poke %s: %v", o.GetName(), err)
		}
	}
}

// eventually polls cond until it returns nil or timeout passes, then fails t with its error.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, "the condition", cond)
}

// consistently checks cond every 100ms for d and fails t the first time it returns an error:
// the state stays as it is.
func consistently(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("state changed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// events lists the events.k8s.io Events about the named object with the given reason.
func (h *harness) events(t *testing.T, name, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := h.c.List(ctxFor(t), &list, client.InNamespace(h.ns)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an Event about name with reason whose note contains every want.
func (h *harness) waitEvent(t *testing.T, name, reason, eventType string, want ...string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, 20*time.Second, func() error {
		for _, e := range h.events(t, name, reason) {
			ok := e.Type == eventType
			for _, w := range want {
				ok = ok && strings.Contains(e.Note, w)
			}
			if ok {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s Event %s about %s containing %q", eventType, reason, name, want)
	})
	return found
}
