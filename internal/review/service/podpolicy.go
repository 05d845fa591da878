package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// policyRecheck is how often a waiting watch looks at its answer again without being woken:
// the only wake-up when the service has no Cache, and a safety net when it has.
const policyRecheck = 5 * time.Second

// changes wakes the policy-endpoint watchers of a namespace.
type changes struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

func newChanges() *changes { return &changes{waiting: map[string]chan struct{}{}} }

// wait returns a channel closed at the next change in ns.
func (c *changes) wait(ns string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.waiting[ns]
	if ch == nil {
		ch = make(chan struct{})
		c.waiting[ns] = ch
	}
	return ch
}

// notify wakes every watcher of ns.
func (c *changes) notify(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.waiting[ns]; ch != nil {
		close(ch)
		delete(c.waiting, ns)
	}
}

// PolicyHandler answers GET review.PolicyPath: the PodPolicy of the pod the bearer token is
// bound to, found with the rule every review applies (authenticate, the caller's pod, exactly
// one selecting ToolPolicy, Accepted at its generation, with an epoch, that compiles). With
// ?watch=true&version=V it waits until the answer's version is not V, or timeoutSeconds pass,
// and answers then.
//
// The status is 200 with the PodPolicy (policy or none), 400 for a bad query or level header,
// 401 when the caller is not authenticated, 403 when its sidecar's review protocol level is
// not served, 503 when the API server failed or was too slow; the body of a non-200 answer is
// a Status, never a PodPolicy, so a sidecar never reads one as a policy. Every answer states
// the service's level (review.LevelHeader).
func (s *Service) PolicyHandler() http.Handler { return http.HandlerFunc(s.servePolicy) }

func (s *Service) servePolicy(w http.ResponseWriter, r *http.Request) {
	review.SetLevel(w.Header(), review.Level)
	if r.Method != http.MethodGet {
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The pod policy is read with GET.")
		return
	}
	if r.URL.Path != review.PolicyPath {
		writeStatus(w, http.StatusNotFound, "NotFound", "The pod policy is at "+review.PolicyPath+".")
		return
	}
	if o := levelRefusal(r); o != nil {
		writeStatus(w, o.status, string(o.resp.Reason), o.resp.Message)
		return
	}
	q := r.URL.Query()
	watch := q.Get(review.PolicyWatchParam) == "true"
	held := q.Get(review.PolicyVersionParam)
	timeout := review.DefaultPolicyWatchSeconds
	if v := q.Get(review.PolicyTimeoutParam); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > review.MaxPolicyWatchSeconds {
			writeStatus(w, http.StatusBadRequest, "BadRequest", "timeoutSeconds must be 1 to "+strconv.Itoa(review.MaxPolicyWatchSeconds)+".")
			return
		}
		timeout = n
	}
	token, ok := bearerToken(r)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, string(review.ReasonUnauthenticated), "A bearer token is required.")
		return
	}
	ctx := r.Context()
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	if watch {
		// A watch outlives the server's write timeout, which is sized for one review.
		_ = http.NewResponseController(w).SetWriteDeadline(deadline.Add(s.timeout + 10*time.Second))
	}
	for {
		// The token is reviewed on every look (from the cache within its TTL), so a watch ends
		// when its token or pod stops being valid.
		p, status, o := s.podPolicy(ctx, token)
		if status != http.StatusOK {
			writeStatus(w, status, string(o.resp.Reason), o.resp.Message)
			return
		}
		if !watch || p.Version != held || !time.Now().Before(deadline) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(p)
			return
		}
		woken := s.changes.wait(p.namespace)
		wait := min(time.Until(deadline), policyRecheck)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
}

// podPolicyAnswer is a PodPolicy with the namespace its watchers wait on.
type podPolicyAnswer struct {
	review.PodPolicy
	namespace string
}

// podPolicy is the answer for the caller of token: 200 and a PodPolicy (the governing policy,
// or none with its reason), or another status and the refusal.
func (s *Service) podPolicy(ctx context.Context, token string) (podPolicyAnswer, int, outcome) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	p := podPolicyAnswer{PodPolicy: review.PodPolicy{TypeMeta: metav1.TypeMeta{APIVersion: review.APIVersion, Kind: review.PolicyKind}}}
	c, refused := s.authenticate(ctx, token)
	if c != nil {
		p.namespace = c.namespace
	}
	if refused != nil {
		if refused.status != http.StatusForbidden {
			return p, refused.status, *refused
		}
		// Not found, not governed, ambiguous: an answer, and the sidecar refuses every call.
		p.None = &review.NoPolicy{Reason: refused.resp.Reason, Code: ef.EFPolicyUnavailable, Message: refused.resp.Message}
		p.Version = review.NoneVersion(refused.resp.Reason, "")
		return p, http.StatusOK, outcome{}
	}
	pol := c.policy
	if _, notServed := s.serve(c); notServed != nil {
		p.None = &review.NoPolicy{Reason: review.ReasonPolicyNotReady, Code: ef.EFPolicyUnavailable, Message: notServed.resp.Message}
		p.Version = review.NoneVersion(review.ReasonPolicyNotReady, fmt.Sprintf("%s/%d", pol.UID, pol.Generation))
		return p, http.StatusOK, outcome{}
	}
	p.Policy = &review.GoverningPolicy{
		Name: pol.Name, Namespace: pol.Namespace, UID: pol.UID, Generation: pol.Generation,
		ResourceVersion: pol.ResourceVersion, Epoch: pol.Status.PolicyEpoch, Spec: *pol.Spec.DeepCopy(),
	}
	for i := range pol.Status.ToolPins {
		p.Policy.ToolPins = append(p.Policy.ToolPins, *pol.Status.ToolPins[i].DeepCopy())
	}
	p.Version = review.PinnedPolicyVersion(pol.UID, pol.Generation, pol.Status.PolicyEpoch, pol.Status.ToolPins)
	return p, http.StatusOK, outcome{}
}

// writeStatus answers with a metav1.Status: the refusals of the policy endpoint.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg,
	})
}
