package node_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/test/testutil"
)

// authorityAudience is the chart's default authority.audience.
const authorityAudience = "actgate-authority"

// checkBoundToken reads the token the kubelet projected into the sidecar's volume (from the
// node's disk: the agent container has no such mount) and has the API server review it: it is
// the agent's service account, for the authority's audience only, bound to this very pod.
// It keeps the token in s.boundToken, for deletePodStopsSidecarLast to check again once the
// pod is gone.
func (s *suite) checkBoundToken(pod *corev1.Pod) {
	t := s.t
	path := filepath.Join(s.n.Dir, "kubelet", "root", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "actgate-token", "token")
	b, err := os.ReadFile(path)
	if err != nil {
		fatalf(t, "the sidecar's projected token on the node: %v", err)
	}
	token := strings.TrimSpace(string(b))
	var claims struct {
		Aud        []string `json:"aud"`
		Sub        string   `json:"sub"`
		Kubernetes struct {
			Pod struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	if parts := strings.Split(token, "."); len(parts) == 3 {
		if payload, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			_ = json.Unmarshal(payload, &claims)
		}
	}
	if len(claims.Aud) != 1 || claims.Aud[0] != authorityAudience || claims.Kubernetes.Pod.UID != string(pod.UID) ||
		claims.Sub != "system:serviceaccount:"+agentNS+":"+agentSA {
		errorf(t, "the projected token's claims: %+v, want audience %s, pod %s, subject %s", claims, authorityAudience, pod.UID, agentSA)
	}
	tr := s.review(token, authorityAudience)
	if !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:"+agentNS+":"+agentSA ||
		!slicesEqual(tr.Status.User.Extra["authentication.kubernetes.io/pod-uid"], string(pod.UID)) {
		errorf(t, "TokenReview of the sidecar's token for %s: %+v", authorityAudience, tr.Status)
	}
	if tr := s.review(token, "some-other-service"); tr.Status.Authenticated {
		errorf(t, "the sidecar's token is accepted for another audience: %+v", tr.Status)
	}
	t.Logf("the sidecar's projected token: audience %v, bound to pod %s/%s (uid %s)", claims.Aud, agentNS, claims.Kubernetes.Pod.Name, claims.Kubernetes.Pod.UID)
	s.boundToken = token
}

func (s *suite) review(token, audience string) *authenticationv1.TokenReview {
	s.t.Helper()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := s.c.Create(s.t.Context(), tr); err != nil {
		fatal(s.t, err)
	}
	return tr
}

func slicesEqual(got authenticationv1.ExtraValue, want string) bool {
	return len(got) == 1 && got[0] == want
}

// killSidecarMidDispatch has alice authorise a payment that the upstream then holds, kills
// the sidecar process with SIGKILL while that dispatch is in flight, and checks that the
// kubelet restarts the sidecar, which finds the dispatch in its journal (the pod's emptyDir),
// recovers it INDETERMINATE and reports that to its Act through the outbox: the Act reads
// INDETERMINATE; the same action from a new session is refused with EF_INDETERMINATE at once,
// before any review, binding moment or consume, and the upstream never sees it again.
func (s *suite) killSidecarMidDispatch(pod *corev1.Pod) {
	t := s.t
	const held = `{"amount":75,"to":"ACME","hold_seconds":90}`
	before := s.counts().Counts["send_payment"]
	s.escalateAndResolve("held", "send_payment", held)
	done := make(chan string, 1)
	go func() {
		var r callResult
		err := s.postJSONErr(s.agent+"/call", map[string]any{"session": "held", "tool": "send_payment", "args": json.RawMessage(held)}, &r)
		done <- fmt.Sprintf("err=%v result=%+v", err, r)
	}()
	testutil.Eventually(t, 60*time.Second, "the held send_payment to reach the upstream", func() error {
		if got := s.counts().Counts["send_payment"]; got != before+1 {
			return fmt.Errorf("upstream send_payment count %d", got)
		}
		return nil
	})
	ops := s.counts().Operations
	heldOp := ops[len(ops)-1]
	side := s.container(pod, "actgate-sidecar")
	if side.PID <= 0 {
		fatalf(t, "no PID for the sidecar container: %+v", side)
	}
	if err := syscall.Kill(side.PID, syscall.SIGKILL); err != nil {
		fatalf(t, "kill the sidecar (pid %d): %v", side.PID, err)
	}
	t.Logf("killed the sidecar (pid %d) with the dispatch in flight", side.PID)
	select {
	case r := <-done:
		t.Logf("the held call ended with the sidecar: %s", r)
	case <-time.After(90 * time.Second):
		fatal(t, "the held call did not end when the sidecar died")
	}
	testutil.Eventually(t, 90*time.Second, "the kubelet to restart the sidecar", func() error {
		if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, st := range pod.Status.InitContainerStatuses {
			if st.Name == "actgate-sidecar" && st.RestartCount >= 1 && st.State.Running != nil && containerID(pod, "actgate-sidecar") != side.ID {
				return nil
			}
		}
		return fmt.Errorf("%+v", pod.Status.InitContainerStatuses)
	})
	testutil.Eventually(t, 60*time.Second, "the restarted sidecar to serve", func() error {
		if r := s.call("after-restart", "get_balance", `{"account":"ACME"}`); r.Err != "" || r.IsError {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	var moments v1alpha1.BindingMomentList
	if err := s.c.List(t.Context(), &moments, client.InNamespace(agentNS)); err != nil {
		fatal(t, err)
	}
	r := s.call("retry-after-restart", "send_payment", held)
	if !r.IsError || r.code() != string(ef.EFIndeterminate) {
		errorf(t, "the same action after the restart: isError=%v code %q: %s (want %s)", r.IsError, r.code(), r.Text, ef.EFIndeterminate)
	}
	var after v1alpha1.BindingMomentList
	if err := s.c.List(t.Context(), &after, client.InNamespace(agentNS)); err != nil {
		fatal(t, err)
	}
	if len(after.Items) != len(moments.Items) {
		errorf(t, "the refused INDETERMINATE action raised %d new binding moments", len(after.Items)-len(moments.Items))
	}
	if got := s.counts().Counts["send_payment"]; got != before+1 {
		errorf(t, "the upstream saw send_payment %d times since the hold, want 1: the in-flight action ran again", got-before)
	}
	// The restarted sidecar's outbox reported what its recovery found: the Act of the
	// dispatch the kill cut off is INDETERMINATE, said by the sidecar (its pod runs), and
	// stays so (only authenticated reconciliation moves it on).
	a := s.waitActState(heldOp, v1alpha1.ActStateIndeterminate, 60*time.Second)
	if meta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ActDispatcherGoneCondition) {
		errorf(t, "Act %s of the killed sidecar's dispatch says its pod is gone: %+v", a.Name, a.Status.Conditions)
	}
	t.Logf("Act %s of the dispatch the kill cut off: %s (%s)", a.Name, a.Status.State, a.Status.Message)
}

// waitActState waits until the Act recording operation op is in state want, and returns it.
func (s *suite) waitActState(op string, want v1alpha1.ActState, d time.Duration) v1alpha1.Act {
	t := s.t
	t.Helper()
	var found v1alpha1.Act
	testutil.Eventually(t, d, fmt.Sprintf("the Act of operation %s to be %s", op, want), func() error {
		var acts v1alpha1.ActList
		if err := s.c.List(t.Context(), &acts, client.InNamespace(agentNS)); err != nil {
			return err
		}
		for _, a := range acts.Items {
			if a.Status.OperationID != op {
				continue
			}
			found = a
			if a.Status.State != want {
				return fmt.Errorf("Act %s is %s: %s", a.Name, a.Status.State, a.Status.Message)
			}
			return nil
		}
		return fmt.Errorf("no Act records operation %s", op)
	})
	return found
}

// deletePodStopsSidecarLast deletes the agent pod while a payment alice authorised is held in
// the upstream, and watches the runtime: the agent container stops before the sidecar, the
// held action reaches the upstream once only, and the sidecar's token stops working once the
// pod is gone. The in-flight Act, whose journal went with the pod, is held INDETERMINATE by
// the manager once the pod is gone and the grace passed, and stays so.
func (s *suite) deletePodStopsSidecarLast(pod *corev1.Pod) {
	t := s.t
	if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
		fatal(t, err)
	}
	const held = `{"amount":42,"to":"ACME","hold_seconds":90}`
	before := s.counts()
	s.escalateAndResolve("held-delete", "send_payment", held)
	go func() {
		var r callResult
		_ = s.postJSONErr(s.agent+"/call", map[string]any{"session": "held-delete", "tool": "send_payment", "args": json.RawMessage(held)}, &r)
	}()
	testutil.Eventually(t, 60*time.Second, "the held send_payment to reach the upstream", func() error {
		if got := s.counts().Counts["send_payment"]; got != before.Counts["send_payment"]+1 {
			return fmt.Errorf("upstream send_payment count %d", got)
		}
		return nil
	})
	ops := s.counts().Operations
	heldOp := ops[len(ops)-1]
	sideID, agentID := containerID(pod, "actgate-sidecar"), containerID(pod, "agent")
	s.kubectl("-n", agentNS, "delete", "pod", agentPod, "--wait=false")
	var side, agent runtimeContainer
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && (side.FinishedAt.IsZero() || agent.FinishedAt.IsZero()) {
		if c, err := s.inspect(sideID); err == nil && c.State == "CONTAINER_EXITED" {
			side = c
		}
		if c, err := s.inspect(agentID); err == nil && c.State == "CONTAINER_EXITED" {
			agent = c
		}
		time.Sleep(100 * time.Millisecond)
	}
	if side.FinishedAt.IsZero() || agent.FinishedAt.IsZero() {
		fatalf(t, "did not see both containers exit: sidecar %+v, agent %+v", side, agent)
	}
	if side.FinishedAt.Before(agent.FinishedAt) {
		errorf(t, "the sidecar stopped at %v, before the agent at %v", side.FinishedAt, agent.FinishedAt)
	}
	t.Logf("on delete the agent stopped %s before the sidecar", side.FinishedAt.Sub(agent.FinishedAt))
	s.kubectl("-n", agentNS, "wait", "--for=delete", "pod/"+agentPod, "--timeout=60s")
	podGone := time.Now()
	if got := s.counts().Counts["send_payment"]; got != before.Counts["send_payment"]+1 {
		errorf(t, "the upstream saw send_payment %d times since the hold, want 1", got-before.Counts["send_payment"])
	}
	if s.boundToken != "" {
		gone := time.Now()
		testutil.Eventually(t, 90*time.Second, "the deleted pod's token to stop authenticating", func() error {
			if tr := s.review(s.boundToken, authorityAudience); tr.Status.Authenticated {
				return fmt.Errorf("still authenticated as %s", tr.Status.User.Username)
			}
			return nil
		})
		t.Logf("the deleted pod's token stopped authenticating %s after the pod was gone", time.Since(gone).Round(time.Millisecond))
	}
	a := s.waitActState(heldOp, v1alpha1.ActStateIndeterminate, 3*dispatcherGoneGrace+60*time.Second)
	cond := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ActDispatcherGoneCondition)
	t.Logf("the Act of the call in flight when the pod was deleted: %s, %s %s after the pod was gone; DispatcherGone %+v; %s",
		a.Name, a.Status.State, time.Since(podGone).Round(time.Second), cond, a.Status.Message)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ActPodDeletedReason || !strings.Contains(cond.Message, string(pod.UID)) {
		errorf(t, "Act %s: DispatcherGone %+v, want True/%s naming pod %s", a.Name, cond, v1alpha1.ActPodDeletedReason, pod.UID)
	}
	// Held until authenticated reconciliation (the policy declares none here): nothing moves it.
	time.Sleep(dispatcherGoneGrace)
	s.waitActState(heldOp, v1alpha1.ActStateIndeterminate, time.Second)
	t.Logf("kubectl get acts -o wide:\n%s", s.kubectl("-n", agentNS, "get", "acts", "-o", "wide"))
}

// postJSONErr is postJSON for a goroutine: it returns the error instead of failing the test.
func (s *suite) postJSONErr(url string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
