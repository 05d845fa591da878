package authority

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// TestReportBoundToCallerPod: an outcome Report is accepted only from the pod whose sidecar
// made the call. Pod B of the same namespace, service account and policy as pod A, holding
// the authority id, operation id and act id of A's call, is refused, and A's Act is left as
// it was; A's own report is then recorded. Both ways a call is authorised are covered: a
// Permit (the Act's permit record) and a Review whose Lease A consumed.
func TestReportBoundToCallerPod(t *testing.T) {
	r := newRig(t, rigOptions{})
	podB := r.pod(t, "agent", "agent-b", map[string]string{"app.kubernetes.io/name": agentLabel})
	tokenB := r.token(t, "agent", podB, audience)

	check := func(t *testing.T, actID string, rep review.Request) {
		t.Helper()
		before := r.actObject(t, actID)
		expectDeny(t, r.doAs(t, tokenB, rep), ef.EF002, review.ReasonAuthority)
		after := r.actObject(t, actID)
		if after.ResourceVersion != before.ResourceVersion || after.Status.State != before.Status.State {
			t.Fatalf("pod B's report changed pod A's Act: state %q → %q, resourceVersion %s → %s",
				before.Status.State, after.Status.State, before.ResourceVersion, after.ResourceVersion)
		}
		// The act's own pod reports it.
		if got := r.do(t, rep); !got.Allowed || got.Reported == nil {
			t.Fatalf("pod A's report: %+v", got)
		}
		if s := r.actObject(t, actID).Status.State; s != v1alpha1.ActStateFailed {
			t.Fatalf("after pod A's report the act is %q, want %s", s, v1alpha1.ActStateFailed)
		}
	}

	t.Run("permit", func(t *testing.T) {
		c := r.call(t, "s-pod-a", "email_send", `{"to":"permit@example.com"}`)
		resp := r.do(t, permitReq(t, c, 1, "op-a-permit"))
		if !resp.Allowed || resp.Authority == nil {
			t.Fatalf("permit: %+v", resp)
		}
		actID := c.cand.Act.CandidateActID
		check(t, actID, report(actID, resp.Authority.ID, "op-a-permit", v1alpha1.ActStateFailed))
	})

	t.Run("lease", func(t *testing.T) {
		c := r.call(t, "s-pod-a", "email_send", `{"to":"lease@example.com"}`)
		resp := r.do(t, c.req)
		if !resp.Allowed || resp.Authority == nil {
			t.Fatalf("review: %+v", resp)
		}
		if got := r.do(t, consumeReq(resp.Authority.ID, "op-a-lease", c.binding(r.ns, 1))); !got.Allowed || got.Consumed == nil {
			t.Fatalf("consume: %+v", got)
		}
		check(t, c.cand.Act.CandidateActID, reportReq(resp.Authority.ID, "op-a-lease", v1alpha1.ActStateFailed, digestOf(`{"sent":false}`)))
	})
}

// TestCallerPodRecreatedSameName: a pod deleted and created again under the same name is
// another pod (another UID). The old pod's bound token, still authenticated from the
// service's TokenReview cache (its clock does not move here), names the old UID: the service
// refuses it as an unidentified pod and records nothing, while the new pod's own token is
// served.
func TestCallerPodRecreatedSameName(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/name": agentLabel}
	old := r.pod(t, "agent", "agent-r", labels)
	oldToken := r.token(t, "agent", old, audience)

	first := r.call(t, "s-recreate", "email_send", `{"to":"first@example.com"}`)
	if resp := r.doAs(t, oldToken, first.req); !resp.Allowed || resp.Authority == nil {
		t.Fatalf("the old pod's first review: %+v", resp)
	}

	if err := r.env.Client.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the old pod is not gone: %v", err)
	}
	recreated := r.pod(t, "agent", "agent-r", labels)
	if recreated.UID == old.UID {
		t.Fatalf("the recreated pod has the old UID %s", old.UID)
	}

	second := r.call(t, "s-recreate", "email_send", `{"to":"second@example.com"}`)
	expectDeny(t, r.doAs(t, oldToken, second.req), ef.EFPolicyDenied, review.ReasonPodNotFound)
	err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: second.cand.Act.CandidateActID}, &v1alpha1.Act{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the old pod's token recorded an Act for the new pod (%v)", err)
	}

	// The new pod's own token names its UID and is served.
	newToken := r.token(t, "agent", recreated, audience)
	if resp := r.doAs(t, newToken, second.req); !resp.Allowed || resp.Authority == nil {
		t.Fatalf("the recreated pod's review: %+v", resp)
	}
}
