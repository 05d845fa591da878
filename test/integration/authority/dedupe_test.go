package authority

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// moments lists the BindingMoments of the rig's namespace as the admin.
func (r *rig) moments(t testing.TB) []v1alpha1.BindingMoment {
	t.Helper()
	var list v1alpha1.BindingMomentList
	if err := r.env.Client.List(context.Background(), &list, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestEscalationOneMomentPerAgent: an agent retrying an escalated call from a new session each
// time raises one pending moment, whose grant runs one call; another pod's same call has its
// own moment.
func TestEscalationOneMomentPerAgent(t *testing.T) {
	r := newRig(t, rigOptions{})
	aliceC := r.principal(t, alice)

	// Three sessions of one pod escalate the same action: one BindingMoment.
	_, first := r.escalateOnce(t, "s-1")
	name := first.Escalation.BindingMoments[0]
	for _, session := range []string{"s-2", "s-3"} {
		_, resp := r.escalateOnce(t, session)
		if len(resp.Escalation.BindingMoments) != 1 || resp.Escalation.BindingMoments[0] != name ||
			resp.Escalation.EnvelopeDigest != first.Escalation.EnvelopeDigest {
			t.Fatalf("session %s got moments %v, want the pending %s", session, resp.Escalation.BindingMoments, name)
		}
	}
	if ms := r.moments(t); len(ms) != 1 {
		t.Fatalf("%d BindingMoments after three sessions escalated one action, want 1", len(ms))
	}

	// Another pod (the same service account) escalating the same action gets its own moment.
	other := r.pod(t, "agent", "agent-other", map[string]string{"app.kubernetes.io/name": agentLabel})
	otherTk := r.token(t, "agent", other, audience)
	oc := r.call(t, "s-1", "send_payment", paymentArgs)
	oresp := r.doAs(t, otherTk, oc.req)
	expectDeny(t, oresp, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if oresp.Escalation == nil || oresp.Escalation.State != review.EscalationPending || oresp.Escalation.BindingMoments[0] == name {
		t.Fatalf("another pod's escalation: %+v", oresp.Escalation)
	}
	otherName := oresp.Escalation.BindingMoments[0]
	r.waitMoment(t, otherName)
	if ms := r.moments(t); len(ms) != 2 {
		t.Fatalf("%d BindingMoments, want one per pod", len(ms))
	}

	// Alice selects the call: the first retry, from session s-2, gets the one authority.
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	granted := r.call(t, "s-2", "send_payment", paymentArgs)
	resp := r.do(t, granted.req)
	if !resp.Allowed || resp.Authority == nil || resp.Escalation == nil || resp.Escalation.State != review.EscalationGranted {
		t.Fatalf("retry after the resolution: %+v / %+v", resp, resp.Escalation)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	expect := granted.binding(r.ns, 1)
	if got := r.do(t, consumeReq(a.ID, "op-dedupe-1", expect)); !got.Allowed || got.Consumed == nil {
		t.Fatalf("consume: %+v", got)
	}

	// Further retries, from another session and from the session that raised the moment, are
	// not authorised: no authority, no second Lease.
	for _, session := range []string{"s-3", "s-1"} {
		c := r.call(t, session, "send_payment", paymentArgs)
		got := r.do(t, c.req)
		expectDeny(t, got, ef.EFEscalationRequired, review.ReasonBindingMoment)
		if got.Authority != nil {
			t.Fatalf("session %s got a second authority from one resolution", session)
		}
		if got.Escalation != nil && len(got.Escalation.BindingMoments) > 0 && got.Escalation.BindingMoments[0] == name {
			t.Fatalf("session %s was offered the spent moment again", session)
		}
	}
	// The other pod's retry is not granted by alice's resolution of this pod's moment.
	ogot := r.doAs(t, otherTk, r.call(t, "s-9", "send_payment", paymentArgs).req)
	expectDeny(t, ogot, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if ogot.Authority != nil || ogot.Escalation == nil || ogot.Escalation.State != review.EscalationPending || ogot.Escalation.BindingMoments[0] != otherName {
		t.Fatalf("the other pod's retry: %+v", ogot.Escalation)
	}
	if n := len(r.leases(t)); n != 1 {
		t.Fatalf("%d Leases, want the one consumed", n)
	}
	if l := leaseOf(t, r.env, r.ns, a.ID); *l.Spec.HolderIdentity != "op-dedupe-1" {
		t.Fatalf("holder %s", *l.Spec.HolderIdentity)
	}
	expectDeny(t, r.do(t, consumeReq(a.ID, "op-dedupe-2", expect)), ef.EF005, review.ReasonAuthority)
}

// TestEscalationDeclineEndsDedupe: a decline stays with the session that raised the moment; a
// new escalation from another session after it raises a new moment.
func TestEscalationDeclineEndsDedupe(t *testing.T) {
	r := newRig(t, rigOptions{})
	aliceC := r.principal(t, alice)
	_, first := r.escalateOnce(t, "d-1")
	name := first.Escalation.BindingMoments[0]
	if _, joined := r.escalateOnce(t, "d-2"); joined.Escalation.BindingMoments[0] != name {
		t.Fatalf("the second session got %v, want the pending %s", joined.Escalation.BindingMoments, name)
	}
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionDeclined, nil, "", true)
	expectDeny(t, r.do(t, r.call(t, "d-1", "send_payment", paymentArgs).req), ef.EFMomentDeclined, review.ReasonBindingMoment)
	_, next := r.escalateOnce(t, "d-2")
	if next.Escalation.BindingMoments[0] == name {
		t.Fatal("the declined moment was offered again")
	}
	if ms := r.moments(t); len(ms) != 2 {
		t.Fatalf("%d BindingMoments, want the declined one and the new one", len(ms))
	}
}
