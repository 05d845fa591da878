package authority

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policysource"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// apiCounter counts the service's requests to the API server, by method and resource, at its
// transport: every request the service sends, whatever answers it.
type apiCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *apiCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.counts[r.Method+" "+resourceOf(r.URL.Path)]++
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// get returns the count of key ("POST tokenreviews", "GET pods", "LIST toolpolicies"…).
func (c *apiCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

func (c *apiCounter) reset() {
	c.mu.Lock()
	c.counts = map[string]int{}
	c.mu.Unlock()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf names the resource of an API path: /api/v1/namespaces/x/pods/y is "pods" (a GET
// of one object is "GET pods", a list "GET pods" too; the test tells them apart by count only).
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if i > 0 && parts[i-1] == "namespaces" {
			continue
		}
		switch parts[i] {
		case "pods", "toolpolicies", "tokenreviews", "acts", "leases", "bindingmoments", "status":
			if parts[i] == "status" && i > 1 {
				return parts[i-2] + "/status"
			}
			return parts[i]
		}
	}
	return path
}

// cachedService replaces the rig's service by one reading through a started Cache, with the
// token cache at tokenTTL, its API requests counted.
func cachedService(t *testing.T, r *rig, tokenTTL time.Duration) *apiCounter {
	t.Helper()
	counter := &apiCounter{counts: map[string]int{}}
	cfg := counter.wrap(fastConfig(serviceUser(t, r.env, r.ns)))
	c, err := client.New(cfg, client.Options{Scheme: r.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := service.NewCache(cfg, r.env.Scheme, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := cache.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Options{Client: c, Cache: cache, TokenReviewTTL: tokenTTL, Store: r.store, Signer: r.signer,
		Now: r.clock.Now, MomentTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r.svc = svc
	mux := http.NewServeMux()
	mux.Handle(review.Path, svc)
	mux.Handle(review.PolicyPath, svc.PolicyHandler())
	r.svc = svc
	r.serveHandlerTLS(t, mux)
	return counter
}

// updatePolicy changes the rig's policy with change, then accepts the new generation at epoch.
func (r *rig) updatePolicy(t testing.TB, epoch int64, change func(*v1alpha1.ToolPolicy)) {
	t.Helper()
	p := &v1alpha1.ToolPolicy{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKeyFromObject(r.policy), p); err != nil {
		t.Fatal(err)
	}
	change(p)
	if err := r.env.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	envtest.AcceptPolicy(t, r.env.Client, p, epoch)
}

func TestPodPolicyEndpoint(t *testing.T) {
	r := newRig(t, rigOptions{})
	cachedService(t, r, 0)
	ctx := context.Background()
	cl := r.client(r.agentTk)

	p, err := cl.PodPolicy(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy == nil || p.Policy.Name != "payments" || p.Policy.Namespace != r.ns || p.Policy.Epoch != 1 || len(p.Policy.Spec.Rules) != 3 {
		t.Fatalf("answer: %+v", p)
	}

	t.Run("watch returns the change", func(t *testing.T) {
		type answer struct {
			p   *review.PodPolicy
			err error
			at  time.Time
		}
		done := make(chan answer, 1)
		go func() {
			got, err := cl.PodPolicy(ctx, p.Version, 20*time.Second)
			done <- answer{got, err, time.Now()}
		}()
		time.Sleep(300 * time.Millisecond) // the watch is waiting
		select {
		case a := <-done:
			t.Fatalf("the watch answered before any change: %+v %v", a.p, a.err)
		default:
		}
		start := time.Now()
		r.updatePolicy(t, 2, func(p *v1alpha1.ToolPolicy) { p.Spec.AuthorityTTL = &metav1.Duration{Duration: 3 * time.Minute} })
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		// The first wake-up may be the new generation before it is accepted (none,
		// PolicyNotReady); a watch from that version returns the accepted one.
		got := a.p
		for got.Policy == nil || got.Policy.Epoch != 2 {
			if got.None == nil || got.None.Reason != review.ReasonPolicyNotReady {
				t.Fatalf("unexpected answer %+v", got)
			}
			if got, err = cl.PodPolicy(ctx, got.Version, 20*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("watch: policy update to epoch 2 answered %v after the update began", time.Since(start).Round(time.Millisecond))
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the change took %v to reach the watcher", time.Since(start))
		}
	})

	t.Run("a status write that changes neither spec nor epoch wakes no watch", func(t *testing.T) {
		held, err := cl.PodPolicy(ctx, "", 0)
		if err != nil || held.Policy == nil {
			t.Fatalf("%+v %v", held, err)
		}
		done := make(chan *review.PodPolicy, 1)
		start := time.Now()
		go func() {
			got, err := cl.PodPolicy(ctx, held.Version, 2*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		time.Sleep(200 * time.Millisecond)
		p := &v1alpha1.ToolPolicy{}
		if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(r.policy), p); err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: "Unrelated", Status: metav1.ConditionTrue,
			Reason: "Test", LastTransitionTime: metav1.Now()})
		if err := r.env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got == nil || got.Version != held.Version || time.Since(start) < 1500*time.Millisecond {
			t.Fatalf("after %v: %+v (held %s)", time.Since(start), got, held.Version)
		}
	})
	t.Run("a relabelled pod wakes its watch", func(t *testing.T) {
		pod := r.pod(t, "agent", "agent-relabel", map[string]string{"app.kubernetes.io/name": agentLabel})
		pcl := r.client(r.token(t, "agent", pod, audience))
		held, err := pcl.PodPolicy(ctx, "", 0)
		if err != nil || held.Policy == nil {
			t.Fatalf("%+v %v", held, err)
		}
		done := make(chan *review.PodPolicy, 1)
		go func() {
			got, err := pcl.PodPolicy(ctx, held.Version, 20*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		pod.Labels = map[string]string{"app.kubernetes.io/name": "reporting-agent"}
		if err := r.env.Client.Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		got := <-done
		took := time.Since(start)
		if got == nil || got.None == nil || got.None.Reason != review.ReasonNotGoverned {
			t.Fatalf("after relabelling: %+v", got)
		}
		t.Logf("watch: pod relabel answered after %v", took.Round(time.Millisecond))
		// Faster than the 5 s recheck: the pod informer woke the watch.
		if took > 3*time.Second {
			t.Fatalf("the relabel took %v to reach the watcher", took)
		}
	})
	t.Run("not governed", func(t *testing.T) {
		pod := r.pod(t, "other", "other-pp", map[string]string{"app.kubernetes.io/name": "reporting-agent"})
		got, err := r.client(r.token(t, "other", pod, audience)).PodPolicy(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got.Policy != nil || got.None == nil || got.None.Reason != review.ReasonNotGoverned || got.None.Code != ef.EFPolicyUnavailable {
			t.Fatalf("answer: %+v", got)
		}
	})
	t.Run("bad token", func(t *testing.T) {
		if _, err := r.client("not-a-token").PodPolicy(ctx, "", 0); !errors.Is(err, review.ErrPolicyRefused) {
			t.Fatalf("err = %v, want ErrPolicyRefused", err)
		}
	})
	t.Run("unbound token", func(t *testing.T) {
		if _, err := r.client(r.token(t, "agent", nil, audience)).PodPolicy(ctx, "", 0); !errors.Is(err, review.ErrPolicyRefused) {
			t.Fatalf("err = %v, want ErrPolicyRefused", err)
		}
	})
	t.Run("bad query", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, r.url+review.PolicyPath+"?watch=true&timeoutSeconds=9999", nil)
		req.Header.Set("Authorization", "Bearer "+r.agentTk)
		res, err := cl.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("HTTP %d", res.StatusCode)
		}
	})
}

// TestPolicySourceFollowsChange measures a ToolPolicy change reaching a running policy source
// (the sidecar's evaluator): from the client update that changes the policy until the source
// decides with the new epoch.
func TestPolicySourceFollowsChange(t *testing.T) {
	r := newRig(t, rigOptions{})
	cachedService(t, r, 0)
	src, err := policysource.New(policysource.Options{Client: r.client(r.agentTk), SinkID: sinkID})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- src.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := src.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	req := sink.PolicyRequest{Server: "payments", Destination: paymentsURL, Tool: "get_balance", Args: []byte(`{"account":"a"}`),
		Class: act.ClassInformational, Agent: r.agent, StrictArgs: true}
	if d := src.Evaluate(ctx, req); d.Outcome != sink.PolicyAllow || d.Epoch != 1 {
		t.Fatalf("before the change: %+v", d)
	}

	var worst time.Duration
	for i, epoch := range []int64{2, 3, 4} {
		role := v1alpha1.EvidenceRolePolicyPermit
		want := sink.PolicyPermit
		if i%2 == 1 {
			role, want = v1alpha1.EvidenceRoleNone, sink.PolicyAllow
		}
		start := time.Now()
		r.updatePolicy(t, epoch, func(p *v1alpha1.ToolPolicy) { p.Spec.Rules[0].Evidence.Role = role })
		var d sink.PolicyDecision
		for d = src.Evaluate(ctx, req); d.Epoch != epoch; d = src.Evaluate(ctx, req) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("epoch %d not seen after 10s: %+v, status %+v", epoch, d, src.Status())
			}
			time.Sleep(2 * time.Millisecond)
		}
		took := time.Since(start)
		worst = max(worst, took)
		if d.Outcome != want {
			t.Fatalf("epoch %d: outcome %s, want %s", epoch, d.Outcome, want)
		}
		t.Logf("policy change (client update + acceptance) to enforcement in the running source, epoch %d: %v", epoch, took.Round(time.Millisecond))
	}
	t.Logf("worst of 3: %v (target 2s)", worst.Round(time.Millisecond))

	// A policy the pod no longer matches: the source refuses every call.
	r.updatePolicy(t, 5, func(p *v1alpha1.ToolPolicy) {
		p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "someone-else"}}
	})
	deadline := time.Now().Add(10 * time.Second)
	for src.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("still ready: %+v", src.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := src.Evaluate(ctx, req); d.Outcome != sink.PolicyDeny || d.Code != ef.EFPolicyUnavailable {
		t.Fatalf("no policy: %+v", d)
	}
	if st := src.Status(); st.Reason != string(review.ReasonNotGoverned) {
		t.Fatalf("status %+v", st)
	}
	cancel()
	if err := <-runDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// TestServiceCaches counts the service's API requests: with its caches, repeated reviews by
// one pod send one TokenReview per token per TTL, and read no pod and list no ToolPolicy from
// the API server; without the token cache, every review sends its own TokenReview.
func TestServiceCaches(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name         string
		ttl          time.Duration
		maxTokenRevs int
	}{
		{"cached", 0, 1},
		{"token cache off", -1, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{})
			counter := cachedService(t, r, tc.ttl)
			// The informer has the pod once the cache lists it; wait so the count is of reviews.
			r.do(t, r.call(t, "warm", "get_balance", `{"account":"w"}`).req)
			time.Sleep(200 * time.Millisecond)
			tok := r.token(t, "agent", r.podNamed(t, "agent-0"), audience)
			counter.reset()
			var wg sync.WaitGroup
			var allowed atomic.Int32
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := r.call(t, "s-cache", "get_balance", `{"account":"a`+string(rune('a'+i%26))+`"}`)
					if resp := r.doAs(t, tok, c.req); resp.Allowed {
						allowed.Add(1)
					}
				}()
			}
			wg.Wait()
			if allowed.Load() != n {
				t.Fatalf("%d of %d reviews allowed", allowed.Load(), n)
			}
			trs, pods, lists := counter.get("POST tokenreviews"), counter.get("GET pods"), counter.get("GET toolpolicies")
			t.Logf("%d reviews: %d TokenReviews, %d pod GETs, %d ToolPolicy reads, %d Act creates, %d Act status writes",
				n, trs, pods, lists, counter.get("POST acts"), counter.get("PUT acts/status")+counter.get("PATCH acts/status"))
			if tc.ttl >= 0 && trs > tc.maxTokenRevs {
				t.Fatalf("%d TokenReviews for %d reviews of one token, want at most %d", trs, n, tc.maxTokenRevs)
			}
			if tc.ttl < 0 && trs != n {
				t.Fatalf("token cache off: %d TokenReviews for %d reviews", trs, n)
			}
			if pods != 0 || lists != 0 {
				t.Fatalf("with the informer cache: %d pod GETs and %d ToolPolicy reads from the API server", pods, lists)
			}
		})
	}
}

// serveHandlerTLS is serveTLS for a handler of the test's own.
func (r *rig) serveHandlerTLS(t testing.TB, h http.Handler) {
	t.Helper()
	p := testutil.NewPKI(t, t.TempDir())
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.url = srv.URL
	r.ca = p.Pool
}
