package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// permitReq is the Permit of c under epoch for operation op: the act as the sidecar sends it,
// with the epoch its policy decided under.
func permitReq(t testing.TB, c sidecarCall, epoch int64, op string) review.Request {
	t.Helper()
	c.cand.Act.PolicyState.PolicyEpoch = epoch
	body, err := json.Marshal(c.cand.Act)
	if err != nil {
		t.Fatal(err)
	}
	req := c.req
	req.Operation, req.Act, req.Permit = review.OperationPermit, body, &review.PermitRequest{OperationID: op}
	return req
}

// TestPermitOneRequest: a pod's machine Permit is one request to the service, which evaluates
// its own policy for the act, records the Act and creates the Lease already consumed by the
// operation — two writes to the API server, counted at the service's transport — and the
// outcome Report completes the Act in one more. The service never permits what its policy
// does not, nor under another epoch, nor twice.
func TestPermitOneRequest(t *testing.T) {
	r := newRig(t, rigOptions{})
	// The Lease store's requests are counted too: single use rests on its create.
	leaseCounter := &apiCounter{counts: map[string]int{}}
	store, err := leasestore.NewForConfig(leaseCounter.wrap(fastConfig(serviceUser(t, r.env, r.ns))),
		leasestore.Options{Verifier: r.signer.Verifier(), Now: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r.store = store
	counter := cachedService(t, r, 0)
	r.do(t, r.call(t, "warm", "get_balance", `{"account":"w"}`).req)
	time.Sleep(200 * time.Millisecond)

	c := r.call(t, "s-permit", "email_send", `{"to":"ops@example.com","body":"receipt"}`)
	counter.reset()
	leaseCounter.reset()
	resp := r.do(t, permitReq(t, c, 1, "op-permit-1"))
	if !resp.Allowed || resp.Authority == nil || resp.Consumed == nil || resp.Consumed.OperationID != "op-permit-1" ||
		resp.Consumed.AuthorityID != resp.Authority.ID {
		t.Fatalf("permit: %+v", resp)
	}
	writes := counter.get("POST acts") + leaseCounter.get("POST leases") + leaseCounter.get("PUT leases") +
		counter.get("PATCH acts/status") + counter.get("PUT acts/status") + counter.get("PATCH acts") + counter.get("PUT acts")
	t.Logf("one Permit: %d writes (%d Act creates, %d Lease creates), %d TokenReviews, %d BindingMoment reads",
		writes, counter.get("POST acts"), leaseCounter.get("POST leases"), counter.get("POST tokenreviews"), counter.get("GET bindingmoments"))
	if writes > 2 || counter.get("POST acts") != 1 || leaseCounter.get("POST leases") != 1 {
		t.Fatalf("a permit cost %d writes, want the Act and the Lease (2)", writes)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.signer.Verifier().Verify(a, c.binding(r.ns, 1), r.clock.Now()); err != nil {
		t.Fatalf("the authority is not bound to the sidecar's call: %v", err)
	}
	l := leaseOf(t, r.env, r.ns, a.ID)
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "op-permit-1" {
		t.Fatalf("the Lease is not consumed by the operation: %+v", l.Spec)
	}

	// Single use: the same act again (any operation) is refused; the Lease is unchanged.
	again := r.do(t, permitReq(t, c, 1, "op-permit-2"))
	expectDeny(t, again, ef.EF005, review.ReasonAuthority)
	if l := leaseOf(t, r.env, r.ns, a.ID); *l.Spec.HolderIdentity != "op-permit-1" {
		t.Fatalf("a second permit moved the Lease to %s", *l.Spec.HolderIdentity)
	}

	// The outcome completes the Act: decision, authority, operation and state in one write.
	counter.reset()
	rep := r.do(t, review.Request{Operation: review.OperationReport, Report: &review.ReportRequest{
		AuthorityID: a.ID, OperationID: "op-permit-1", State: v1alpha1.ActStateExecuted, EvidenceDigest: sink.EvidenceDigest([]byte(`{"ok":true}`)),
	}})
	if !rep.Allowed || rep.Reported == nil || rep.Reported.State != v1alpha1.ActStateExecuted {
		t.Fatalf("report: %+v", rep)
	}
	obj := r.actObject(t, c.cand.Act.CandidateActID)
	if obj.Status.State != v1alpha1.ActStateExecuted || obj.Status.Decision != v1alpha1.ActDecisionAllowed ||
		obj.Status.AuthorityRef == nil || obj.Status.AuthorityRef.Name != a.ID || obj.Status.OperationID != "op-permit-1" {
		t.Fatalf("act after the report: %+v", obj.Status)
	}
	// The Act names the pod whose sidecar made the call (by UID), which the Act controller
	// checks to hold a dispatch cut off by the pod's end INDETERMINATE.
	pod := &corev1.Pod{}
	if err := r.env.Client.Get(t.Context(), client.ObjectKey{Namespace: r.ns, Name: "agent-0"}, pod); err != nil {
		t.Fatal(err)
	}
	if obj.Labels[v1alpha1.LabelActPodUID] != string(pod.UID) || obj.Annotations[v1alpha1.AnnotationActPod] != "agent-0" {
		t.Fatalf("the Act does not name its pod %s (uid %s): labels %v annotations %v", pod.Name, pod.UID, obj.Labels, obj.Annotations)
	}
	if w := counter.get("PATCH acts/status") + counter.get("PUT acts/status"); w != 1 {
		t.Fatalf("the report cost %d status writes, want 1", w)
	}
	// Idempotent: the same report again is answered as recorded.
	if rep := r.do(t, review.Request{Operation: review.OperationReport, Report: &review.ReportRequest{
		AuthorityID: a.ID, OperationID: "op-permit-1", State: v1alpha1.ActStateExecuted, EvidenceDigest: sink.EvidenceDigest([]byte(`{"ok":true}`)),
	}}); !rep.Allowed {
		t.Fatalf("repeated report: %+v", rep)
	}

	// Defence in depth: a call the service's policy does not permit is refused whatever the
	// sidecar decided, and nothing is issued.
	leases := len(r.leases(t))
	hot := r.do(t, permitReq(t, r.call(t, "s-permit", "get_balance", `{"account":"x"}`), 1, "op-hot"))
	expectDeny(t, hot, ef.EFPolicyDenied, review.ReasonPolicy)
	human := r.do(t, permitReq(t, r.call(t, "s-permit", "send_payment", `{"amount":5,"to":"x"}`), 1, "op-human"))
	expectDeny(t, human, ef.EFPolicyDenied, review.ReasonPolicy)
	stale := r.do(t, permitReq(t, r.call(t, "s-permit", "email_send", `{"to":"x@example.com"}`), 2, "op-stale"))
	expectDeny(t, stale, ef.EF002, review.ReasonAuthority)
	if n := len(r.leases(t)); n != leases {
		t.Fatalf("refused permits created %d Leases", n-leases)
	}
}

// TestRefusalRecorded: a call the pod's policy denied is recorded as an Act, Denied with the
// sidecar's code, in two writes; the record authorises nothing.
func TestRefusalRecorded(t *testing.T) {
	r := newRig(t, rigOptions{})
	counter := cachedService(t, r, 0)
	r.do(t, r.call(t, "warm", "get_balance", `{"account":"w"}`).req)
	time.Sleep(200 * time.Millisecond)
	c := r.call(t, "s-deny", "email_send", `{"to":"x@example.com"}`)
	req := c.req
	req.Operation, req.Refusal = review.OperationRefusal, &review.RefusalRequest{Code: ef.EFPolicyDenied, Message: "Not from retrieved text."}
	counter.reset()
	resp := r.do(t, req)
	expectDeny(t, resp, ef.EFPolicyDenied, review.ReasonPolicy)
	obj := r.actObject(t, c.cand.Act.CandidateActID)
	if obj.Status.Decision != v1alpha1.ActDecisionDenied || obj.Status.Code != string(ef.EFPolicyDenied) || obj.Spec.Tool != "email_send" {
		t.Fatalf("refusal record: %+v %+v", obj.Spec, obj.Status)
	}
	writes := counter.get("POST acts") + counter.get("PATCH acts/status") + counter.get("PUT acts/status")
	t.Logf("one refusal record: %d writes", writes)
	if writes != 2 || len(r.leases(t)) != 0 {
		t.Fatalf("a refusal record cost %d writes and left %d Leases", writes, len(r.leases(t)))
	}
}

// TestProposeMoment: an agent-authored binding moment in a pod (request_binding_moment): the
// service checks each option's digest against its call and each call against its policy,
// creates the BindingMoment for the policy's principal, and, once the principal chose an
// option, a Review of exactly that call in the session is granted. A proposal whose option
// digest is not its call's, or whose call the policy denies, registers nothing.
func TestProposeMoment(t *testing.T) {
	r := newRig(t, rigOptions{})
	aliceC := r.principal(t, alice)
	const session = "s-propose"
	dry := `{"amount":"100.00","dry_run":true,"memo":"invoice 7","to":"acct-9"}`
	build := func(t *testing.T, calls ...review.ProposalCall) string {
		t.Helper()
		var opts []envelope.DraftOption
		for i, c := range calls {
			opts = append(opts, envelope.DraftOption{Label: fmt.Sprintf("Option %d", i), Reasoning: "Because.", Tool: c.Tool, Args: c.Arguments})
		}
		env, err := envelope.Build(envelope.Draft{Synopsis: "The agent asks which payment may run.", Findings: []string{"An invoice is due."},
			Recommendations: []string{"Pay it."}, Offer: "Ask for detail.", Stem: "Which call may run?", Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		return string(env.Canonical())
	}
	propose := func(t *testing.T, env string, calls ...review.ProposalCall) *review.Response {
		t.Helper()
		return r.do(t, review.Request{Operation: review.OperationPropose, Proposal: &review.ProposalRequest{
			Session: session, SinkID: sinkID, Envelope: env, Calls: calls}})
	}
	pay := review.ProposalCall{Server: "payments", Tool: "send_payment", Arguments: json.RawMessage(paymentArgs)}
	dryRun := review.ProposalCall{Server: "payments", Tool: "send_payment", Arguments: json.RawMessage(dry)}

	// Refused: an option whose digest is another call's; a call the policy denies.
	if resp := propose(t, build(t, pay, dryRun), dryRun, pay); resp.Allowed || resp.Code != ef.EFMomentInvalid {
		t.Fatalf("swapped calls: %+v", resp)
	}
	over := review.ProposalCall{Server: "payments", Tool: "send_payment", Arguments: json.RawMessage(`{"amount":"99999.00","to":"acct-9"}`)}
	if resp := propose(t, build(t, pay, over), pay, over); resp.Allowed || resp.Code == "" {
		t.Fatalf("a call over the policy's cap: %+v", resp)
	}
	var none v1alpha1.BindingMomentList
	if err := r.env.Client.List(context.Background(), &none, client.InNamespace(r.ns)); err != nil || len(none.Items) != 0 {
		t.Fatalf("refused proposals left %d BindingMoments (%v)", len(none.Items), err)
	}

	resp := propose(t, build(t, pay, dryRun), pay, dryRun)
	if !resp.Allowed || resp.Escalation == nil || resp.Escalation.State != review.EscalationPending || len(resp.Escalation.BindingMoments) != 1 {
		t.Fatalf("proposal: %+v / %+v", resp, resp.Escalation)
	}
	name := resp.Escalation.BindingMoments[0]
	r.waitMoment(t, name)
	m := &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Principal != alice || len(m.Spec.Calls) != 2 || m.Spec.Calls[1].Tool != "send_payment" || m.Spec.ActRef.Name == "" {
		t.Fatalf("BindingMoment %+v", m.Spec)
	}
	// Before the principal decides, the call awaits this moment (no second one).
	c := r.call(t, session, "send_payment", dry)
	if got := r.do(t, c.req); got.Escalation == nil || got.Escalation.State != review.EscalationPending || got.Escalation.BindingMoments[0] != name {
		t.Fatalf("the option's call before the decision: %+v / %+v", got, got.Escalation)
	}
	// Alice chooses the dry run: exactly that call is granted, once.
	idx := int32(1)
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, &idx, "", true)
	c = r.call(t, session, "send_payment", dry)
	got := r.do(t, c.req)
	if !got.Allowed || got.Authority == nil || got.Escalation == nil || got.Escalation.State != review.EscalationGranted {
		t.Fatalf("the chosen option's call: %+v / %+v", got, got.Escalation)
	}
	if got := r.do(t, r.call(t, session, "send_payment", paymentArgs).req); got.Allowed {
		t.Fatalf("the option alice did not choose was granted: %+v", got)
	}
}
