package authority

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service"
)

// withOp is c's Review naming op as the operation a grant is consumed by.
func withOp(c sidecarCall, op string) review.Request {
	req := c.req
	req.Permit = &review.PermitRequest{OperationID: op}
	return req
}

// consumptions are the authorities the namespace records consumed, by authority id: a Lease
// held by an operation, or an Act's permit record.
func (r *rig) consumptions(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range r.leases(t) {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			out[l.Name] = *l.Spec.HolderIdentity
		}
	}
	var acts v1alpha1.ActList
	if err := r.env.Client.List(t.Context(), &acts); err != nil {
		t.Fatal(err)
	}
	for _, a := range acts.Items {
		if a.Namespace != r.ns {
			continue
		}
		if id, op := a.Annotations[v1alpha1.AnnotationActPermitAuthority], a.Annotations[v1alpha1.AnnotationActPermitOperation]; id != "" && op != "" {
			out[id] = op
		}
	}
	return out
}

// TestGrantConsumedInReview: a Review that names its dispatch's operation gets a grant for
// exactly its call already consumed by that operation, in the one request: the grant's
// compare-and-swap on the escalated Act, then the permit record on the call's Act by
// compare-and-swap; no Lease, no Consume. The granted call costs four writes in all (its Act,
// the grant, the consumption, the outcome) where a Lease and a Consume cost six. The grant is
// still spent once: of several calls racing for it exactly one gets it, a later call of the
// action escalates anew, the same act under another operation is refused, and only the same
// operation's retry gets the recorded authority again. An Act the service already answered
// (pending) is granted as before, a Lease for a Consume.
func TestGrantConsumedInReview(t *testing.T) {
	r := newRig(t, rigOptions{})
	leaseCounter := countedLeaseStore(t, r)
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "email_send", 1)
	aliceC := r.principal(t, alice)
	const session = "s-grant"

	// Eight calls of the granted action race, each under its own operation: exactly one gets the
	// grant, consumed.
	first, calls := r.racingCalls(t, aliceC, session, 8)
	before := r.consumptions(t) // the informer probe's permits
	results := make([]*review.Response, len(calls))
	var wg sync.WaitGroup
	counter.reset()
	leaseCounter.reset()
	for i := range calls {
		wg.Go(func() { results[i] = r.do(t, withOp(calls[i], "op-race-"+string(rune('a'+i)))) })
	}
	wg.Wait()
	winner := -1
	for i, res := range results {
		switch {
		case res.Allowed && winner >= 0:
			t.Fatalf("calls %d and %d were both granted the one resolution's authority", winner, i)
		case res.Allowed:
			winner = i
		case res.Code != ef.EFEscalationRequired && res.Code != ef.EF060:
			t.Errorf("call %d: unexpected refusal %s (%s)", i, res.Code, res.Message)
		}
	}
	if winner < 0 {
		t.Fatal("no call was granted the resolution's authority")
	}
	granted, resp := calls[winner], results[winner]
	op := "op-race-" + string(rune('a'+winner))
	t.Logf("eight racing Reviews: API requests %v, Lease store %v", counter.snapshot(), leaseCounter.snapshot())
	if resp.Authority == nil || resp.Reason != review.ReasonBindingMoment || resp.Escalation == nil || resp.Escalation.State != review.EscalationGranted ||
		resp.Consumed == nil || resp.Consumed.OperationID != op || resp.Consumed.AuthorityID != resp.Authority.ID {
		t.Fatalf("granted review: %+v / %+v", resp, resp.Escalation)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.signer.Verifier().Verify(a, granted.binding(r.ns, 1), r.clock.Now()); err != nil {
		t.Fatalf("the granted authority is not bound to the call: %v", err)
	}
	if n := len(leaseCounter.snapshot()); n != 0 {
		t.Fatalf("granting consumed made Lease requests %v", leaseCounter.snapshot())
	}
	got := r.consumptions(t)
	for id := range before {
		delete(got, id)
	}
	if len(got) != 1 || got[a.ID] != op {
		t.Fatalf("new consumptions %v, want only %s by %s", got, a.ID, op)
	}
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("%d Leases stored", n)
	}
	obj := r.actObject(t, granted.cand.Act.CandidateActID)
	if obj.Status.State != "" || obj.Status.Decision != "" {
		t.Fatalf("the granted act's status is the Report's to write, got %+v", obj.Status)
	}
	if e := r.actObject(t, first.cand.Act.CandidateActID); e.Annotations[service.AnnotationGrantedAct] != granted.cand.Act.CandidateActID {
		t.Fatalf("the escalated act records the grant for %q", e.Annotations[service.AnnotationGrantedAct])
	}

	// The same operation's retry gets the recorded authority, and nothing is written.
	rv := obj.ResourceVersion
	retry := r.do(t, withOp(granted, op))
	if !retry.Allowed || retry.Authority == nil || retry.Authority.ID != a.ID || string(retry.Authority.Signature) != string(a.Signature) ||
		retry.Consumed == nil || retry.Consumed.OperationID != op || !retry.Consumed.ConsumedAt.Equal(resp.Consumed.ConsumedAt) {
		t.Fatalf("retried review of the same operation: %+v", retry)
	}
	// The same act under another operation, with or without one, is refused.
	expectDeny(t, r.do(t, withOp(granted, "op-other")), ef.EF005, review.ReasonAuthority)
	expectDeny(t, r.do(t, granted.req), ef.EF005, review.ReasonAuthority)
	if after := r.actObject(t, granted.cand.Act.CandidateActID); after.ResourceVersion != rv {
		t.Fatalf("retries changed the granted act: rv %s → %s", rv, after.ResourceVersion)
	}
	// Nothing to consume: the authority exists only consumed.
	expectDeny(t, r.do(t, consumeReq(a.ID, "op-other", granted.binding(r.ns, 1))), ef.EF005, review.ReasonAuthority)

	// The outcome completes the Act in one write.
	counter.reset()
	rep := r.do(t, report(granted.cand.Act.CandidateActID, a.ID, op, v1alpha1.ActStateExecuted))
	if !rep.Allowed || rep.Reported == nil || rep.Reported.State != v1alpha1.ActStateExecuted {
		t.Fatalf("report: %+v", rep)
	}
	if w := counter.writes(); w != 1 {
		t.Fatalf("the Report made %d writes (%v), want 1", w, counter.snapshot())
	}
	obj = r.actObject(t, granted.cand.Act.CandidateActID)
	if obj.Status.State != v1alpha1.ActStateExecuted || obj.Status.AuthorityRef == nil || obj.Status.AuthorityRef.Name != a.ID || obj.Status.OperationID != op {
		t.Fatalf("act after the report: %+v", obj.Status)
	}

	// One granted call alone, counted: its Act, the grant, the consumption; then the outcome.
	r.asNewPod(t, "agent-count")
	_, esc2 := r.escalateOnce(t, "s-count")
	r.resolve(t, aliceC, esc2.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	one := r.call(t, "s-count", "send_payment", paymentArgs)
	counter.reset()
	leaseCounter.reset()
	if one := r.do(t, withOp(one, "op-count")); !one.Allowed || one.Consumed == nil {
		t.Fatalf("granted review: %+v", one)
	}
	writes := counter.writes() + leaseCounter.writes()
	t.Logf("one granted Review: API requests %v, Lease store %v", counter.snapshot(), leaseCounter.snapshot())
	if writes != 3 || counter.get("POST acts") != 1 || counter.get("PUT acts") != 1 || counter.get("PATCH acts") != 1 || len(leaseCounter.snapshot()) != 0 {
		t.Fatalf("a granted Review made %d writes (%v, Lease store %v), want 3: the Act, the grant, the consumption",
			writes, counter.snapshot(), leaseCounter.snapshot())
	}

	// The grant is spent: a further call of the action escalates anew.
	later := r.call(t, "s-count", "send_payment", paymentArgs)
	expectDeny(t, r.do(t, withOp(later, "op-later")), ef.EFEscalationRequired, review.ReasonBindingMoment)

	// An act answered pending before the grant keeps its status: reviewed again once granted,
	// it gets a Lease to consume, not a consumption.
	r.asNewPod(t, "agent-early")
	_, esc3 := r.escalateOnce(t, "s-early")
	pending := r.call(t, "s-early", "send_payment", paymentArgs)
	expectDeny(t, r.do(t, withOp(pending, "op-pending")), ef.EFEscalationRequired, review.ReasonBindingMoment)
	r.resolve(t, aliceC, esc3.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	lease := r.do(t, withOp(pending, "op-pending"))
	if !lease.Allowed || lease.Authority == nil || lease.Consumed != nil {
		t.Fatalf("granted review of an act answered before: %+v", lease)
	}
	la, err := lease.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if c := r.do(t, consumeReq(la.ID, "op-pending", pending.binding(r.ns, 1))); !c.Allowed || c.Consumed == nil {
		t.Fatalf("consume of the issued grant: %+v", c)
	}
	if n := len(r.leases(t)); n != 1 {
		t.Fatalf("%d Leases, want the one issued for a Consume", n)
	}
}

// TestGrantConsumedOnceForOneAct: the same act's Review, sent under eight operations at once
// after its binding moment is resolved, consumes the grant exactly once. All eight find the
// grant naming this act on the escalated Act, so what keeps the consumption single is the
// compare-and-swap of the permit record on the call's Act: one Review writes it, the others
// are refused as already consumed, and the namespace records one consumption, by the winner's
// operation. Three rounds, each a fresh escalation, make an interleaving likely.
func TestGrantConsumedOnceForOneAct(t *testing.T) {
	r := newRig(t, rigOptions{})
	aliceC := r.principal(t, alice)
	const ops = 8
	for round := range 3 {
		r.asNewPod(t, fmt.Sprintf("agent-one-act-%d", round))
		session := fmt.Sprintf("s-one-act-%d", round)
		_, calls := r.racingCalls(t, aliceC, session, 1)
		call := calls[0]
		before := r.consumptions(t)
		results := make([]*review.Response, ops)
		var wg sync.WaitGroup
		for i := range ops {
			wg.Go(func() { results[i] = r.do(t, withOp(call, fmt.Sprintf("op-one-%d-%d", round, i))) })
		}
		wg.Wait()
		winner := -1
		for i, res := range results {
			switch {
			case res.Allowed && winner >= 0:
				t.Fatalf("round %d: operations %d and %d both consumed the one act's grant (%s, %s)", round, winner, i,
					results[winner].Consumed.OperationID, res.Consumed.OperationID)
			case res.Allowed:
				winner = i
			case res.Code != ef.EF005:
				t.Errorf("round %d: operation %d: unexpected refusal %s (%s)", round, i, res.Code, res.Message)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no operation consumed the grant", round)
		}
		op := fmt.Sprintf("op-one-%d-%d", round, winner)
		resp := results[winner]
		if resp.Consumed == nil || resp.Consumed.OperationID != op || resp.Authority == nil {
			t.Fatalf("round %d: granted review %+v", round, resp)
		}
		got := r.consumptions(t)
		for id := range before {
			delete(got, id)
		}
		if len(got) != 1 || got[resp.Consumed.AuthorityID] != op {
			t.Fatalf("round %d: new consumptions %v, want only %s by %s", round, got, resp.Consumed.AuthorityID, op)
		}
		if a := r.actObject(t, call.cand.Act.CandidateActID); a.Annotations[v1alpha1.AnnotationActPermitOperation] != op {
			t.Fatalf("round %d: the act's permit record names %q, want %s", round, a.Annotations[v1alpha1.AnnotationActPermitOperation], op)
		}
	}
}
