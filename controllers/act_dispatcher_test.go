package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
)

// TestCutOffDispatchHeldIndeterminate: an Act whose authority was consumed and whose outcome
// never arrived is moved to INDETERMINATE, with the DispatcherGone condition naming why, once
// the pod that dispatched it (by UID) is gone and the Act went unwritten for the grace — and
// not before, and never while the pod runs. Deleted, replaced (same name, another UID) and
// Succeeded pods count as gone; settled, unconsumed and unlabelled acts are left as they are.
// The held act then stays INDETERMINATE (its policy declares no reconciliation endpoint): no
// outcome is guessed.
func TestCutOffDispatchHeldIndeterminate(t *testing.T) {
	const grace = 2 * time.Hour
	h := start(t, settings{dispatcherGone: grace})
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}}},
		}
		if err := h.c.Create(ctxFor(t), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alive, deleted, replaced, finished := pod("alive"), pod("deleted"), pod("replaced"), pod("finished")
	inFlight := func(state v1alpha1.ActState, op string) v1alpha1.ActStatus {
		return v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed, State: state, OperationID: op,
			AuthorityRef: &v1alpha1.LocalObjectReference{Name: "auth-" + op}}
	}
	act := func(name string, p *corev1.Pod, st v1alpha1.ActStatus) {
		a := newAct(name, "no-such-policy")
		if p != nil {
			a.Labels = map[string]string{v1alpha1.LabelActPodUID: string(p.UID)}
			a.Annotations = map[string]string{v1alpha1.AnnotationActPod: p.Name}
		}
		h.createAct(t, a, st)
	}
	act("of-alive", alive, inFlight(v1alpha1.ActStateConsumed, "op-alive"))
	act("of-deleted", deleted, inFlight(v1alpha1.ActStateConsumed, "op-deleted"))
	act("of-deleted-invoked", deleted, inFlight(v1alpha1.ActStateInvoked, "op-invoked"))
	act("of-replaced", replaced, inFlight(v1alpha1.ActStateDispatchPending, "op-replaced"))
	act("of-finished", finished, inFlight(v1alpha1.ActStateConsumed, "op-finished"))
	act("executed", deleted, inFlight(v1alpha1.ActStateExecuted, "op-executed"))
	act("authorized", deleted, v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed, State: v1alpha1.ActStateAuthorized})
	act("unlabelled", nil, inFlight(v1alpha1.ActStateConsumed, "op-unlabelled"))
	// Acts a Permit recorded have no status until the outcome. The permit record the service
	// writes on the Act at its create names the authority and the operation that consumed it:
	// the act is in flight, and no Lease exists for it.
	permitted := newAct("permit-recorded", "no-such-policy")
	permitted.Labels = map[string]string{v1alpha1.LabelActPodUID: string(deleted.UID)}
	permitted.Annotations = map[string]string{v1alpha1.AnnotationActPod: deleted.Name,
		v1alpha1.AnnotationActPermitAuthority: "authz-" + strings.Repeat("7", 64), v1alpha1.AnnotationActPermitOperation: "op-recorded"}
	h.create(t, permitted)
	// An act without a permit record: a consumed authority Lease says it is in flight; one
	// whose authority is only issued is not.
	auths := h.authorities(t)
	for name, op := range map[string]string{"permit-consumed": "op-permit", "permit-issued": ""} {
		a := newAct(name, "no-such-policy")
		a.Labels = map[string]string{v1alpha1.LabelActPodUID: string(deleted.UID)}
		a.Annotations = map[string]string{v1alpha1.AnnotationActPod: deleted.Name}
		h.create(t, a)
		auth := auths.issue(t, a, time.Hour)
		if op != "" {
			auths.consume(t, auth, op)
		}
	}

	// The pods go: one deleted, one deleted and created again under its name, one Succeeded.
	for _, p := range []*corev1.Pod{deleted, replaced} {
		if err := h.c.Delete(ctxFor(t), p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, func() error {
		err := h.c.Get(ctxFor(t), client.ObjectKeyFromObject(replaced), &corev1.Pod{})
		if err == nil {
			return fmt.Errorf("pod %s still there", replaced.Name)
		}
		return client.IgnoreNotFound(err)
	})
	again := pod("replaced")
	if again.UID == replaced.UID {
		t.Fatalf("the new pod kept the UID %s", again.UID)
	}
	finished.Status.Phase = corev1.PodSucceeded
	if err := h.c.Status().Update(ctxFor(t), finished); err != nil {
		t.Fatal(err)
	}

	want := map[string]v1alpha1.ActState{
		"of-alive": v1alpha1.ActStateConsumed, "of-deleted": v1alpha1.ActStateConsumed,
		"of-deleted-invoked": v1alpha1.ActStateInvoked, "of-replaced": v1alpha1.ActStateDispatchPending,
		"of-finished": v1alpha1.ActStateConsumed, "executed": v1alpha1.ActStateExecuted,
		"authorized": v1alpha1.ActStateAuthorized, "unlabelled": v1alpha1.ActStateConsumed,
		"permit-consumed": "", "permit-issued": "", "permit-recorded": "",
	}
	var all []client.Object
	for name := range want {
		all = append(all, &v1alpha1.Act{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}})
	}
	states := func() error {
		for name, st := range want {
			a, err := h.getAct(t, name)
			if err != nil {
				return err
			}
			if a.Status.State != st {
				return fmt.Errorf("Act %s is %s, want %s (%s)", name, a.Status.State, st, a.Status.Message)
			}
		}
		return nil
	}

	// Within the grace (the acts were written an hour ago on the reconciler's clock): the pods
	// are gone, but a terminating sidecar's outbox may still report, so nothing moves.
	h.poke(t, all...)
	consistently(t, 3*time.Second, states)

	// Past the grace since the acts' last write: the cut-off dispatches are held.
	h.clock.Step(grace)
	h.poke(t, all...)
	for _, name := range []string{"of-deleted", "of-deleted-invoked", "of-replaced", "of-finished", "permit-consumed", "permit-recorded"} {
		want[name] = v1alpha1.ActStateIndeterminate
	}
	eventually(t, 20*time.Second, states)
	for name, reason := range map[string]string{
		"of-deleted": v1alpha1.ActPodDeletedReason, "of-deleted-invoked": v1alpha1.ActPodDeletedReason,
		"of-replaced": v1alpha1.ActPodDeletedReason, "of-finished": v1alpha1.ActPodTerminatedReason,
		"permit-consumed": v1alpha1.ActPodDeletedReason, "permit-recorded": v1alpha1.ActPodDeletedReason,
	} {
		a, err := h.getAct(t, name)
		if err != nil {
			t.Fatal(err)
		}
		gone := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ActDispatcherGoneCondition)
		if gone == nil || gone.Status != metav1.ConditionTrue || gone.Reason != reason ||
			!strings.Contains(gone.Message, a.Annotations[v1alpha1.AnnotationActPod]) || !strings.Contains(gone.Message, a.Labels[v1alpha1.LabelActPodUID]) {
			t.Errorf("Act %s: DispatcherGone %+v, want True/%s naming the pod", name, gone, reason)
		}
		settled := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ActSettledCondition)
		if settled == nil || settled.Status != metav1.ConditionFalse || settled.Reason != v1alpha1.ActIndeterminateReason ||
			!strings.Contains(settled.Message, "pod that dispatched the call is gone") {
			t.Errorf("Act %s: Settled %+v", name, settled)
		}
		if !strings.Contains(a.Status.Message, "authenticated reconciliation") || a.Status.Reconciliation != nil && a.Status.Reconciliation.EvidenceDigest != "" {
			t.Errorf("Act %s: message %q, reconciliation %+v", name, a.Status.Message, a.Status.Reconciliation)
		}
		h.waitEvent(t, name, controllers.EventDispatcherGone, corev1.EventTypeWarning, a.Status.OperationID)
	}
	// The Permit's act records what a report would have: allowed, its authority, the
	// operation that consumed it.
	if a, err := h.getAct(t, "permit-consumed"); err != nil {
		t.Fatal(err)
	} else if a.Status.Decision != v1alpha1.ActDecisionAllowed || a.Status.AuthorityRef == nil || a.Status.AuthorityRef.Name == "" ||
		a.Status.OperationID != "op-permit" {
		t.Errorf("Act permit-consumed: %+v", a.Status)
	}
	if a, err := h.getAct(t, "permit-recorded"); err != nil {
		t.Fatal(err)
	} else if a.Status.Decision != v1alpha1.ActDecisionAllowed || a.Status.AuthorityRef == nil ||
		a.Status.AuthorityRef.Name != "authz-"+strings.Repeat("7", 64) || a.Status.OperationID != "op-recorded" {
		t.Errorf("Act permit-recorded: %+v", a.Status)
	}
	// Held: no outcome is guessed later, however long it stays.
	h.clock.Step(grace)
	h.poke(t, all...)
	consistently(t, 2*time.Second, states)
	if n := h.rec.count("of-deleted", controllers.EventDispatcherGone); n != 1 {
		t.Errorf("%d DispatcherGone Events for of-deleted, want 1", n)
	}
}
