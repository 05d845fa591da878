package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// writes is the number of requests in c that write to etcd (every POST, PUT, PATCH and
// DELETE, except TokenReviews, which the API server answers without storing anything).
func (c *apiCounter) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		method, resource, _ := strings.Cut(k, " ")
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if resource != "tokenreviews" {
				n += v
			}
		}
	}
	return n
}

// snapshot is a copy of the counts.
func (c *apiCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// report is the outcome Report of a dispatch, as the sidecar's outbox sends it.
func report(actID, authorityID, op string, state v1alpha1.ActState) review.Request {
	return review.Request{Operation: review.OperationReport, Report: &review.ReportRequest{
		ActID: actID, AuthorityID: authorityID, OperationID: op, State: state, EvidenceDigest: sink.EvidenceDigest([]byte(`{"ok":true}`)),
	}}
}

// TestPermitOneRequest: a pod's machine Permit is one request to the service, which evaluates
// its own policy for the act and creates the Act carrying the authority consumed by the
// operation (the create is the compare-and-swap: no Lease is stored), and the outcome Report
// completes the Act: the whole call costs two writes to the API server, counted at the
// service's transport and the Lease store's. The service never permits what its policy does
// not, nor under another epoch, nor twice: a second Permit of the act is refused whatever its
// operation, except the same operation's retry, which gets the same authority again; a
// Review of a permitted act issues nothing; a report for another operation is refused.
func TestPermitOneRequest(t *testing.T) {
	r := newRig(t, rigOptions{})
	// The Lease store's requests are counted too: a permit must need none.
	leaseCounter := countedLeaseStore(t, r)
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "email_send", 1)

	c := r.call(t, "s-permit", "email_send", `{"to":"ops@example.com","body":"receipt"}`)
	actID := c.cand.Act.CandidateActID
	counter.reset()
	leaseCounter.reset()
	resp := r.do(t, permitReq(t, c, 1, "op-permit-1"))
	if !resp.Allowed || resp.Authority == nil || resp.Consumed == nil || resp.Consumed.OperationID != "op-permit-1" ||
		resp.Consumed.AuthorityID != resp.Authority.ID {
		t.Fatalf("permit: %+v", resp)
	}
	permitWrites := counter.writes() + leaseCounter.writes()
	t.Logf("one Permit: API requests %v, Lease store %v", counter.snapshot(), leaseCounter.snapshot())
	if n := len(counter.snapshot()); n != 1 || counter.get("POST acts") != 1 {
		t.Fatalf("a Permit made the API requests %v; want the Act's create only (token, pod, policy and moments from caches)", counter.snapshot())
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.signer.Verifier().Verify(a, c.binding(r.ns, 1), r.clock.Now()); err != nil {
		t.Fatalf("the authority is not bound to the sidecar's call: %v", err)
	}
	obj := r.actObject(t, actID)
	if obj.Annotations[v1alpha1.AnnotationActPermitAuthority] != a.ID || obj.Annotations[v1alpha1.AnnotationActPermitOperation] != "op-permit-1" {
		t.Fatalf("the Act does not record the authority consumed by the operation: %v", obj.Annotations)
	}
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("a permit stored %d Leases", n)
	}

	// A retried request of the same operation gets the same authority; the Act is unchanged
	// (its create is refused as AlreadyExists and it is read back).
	rv := obj.ResourceVersion
	retry := r.do(t, permitReq(t, c, 1, "op-permit-1"))
	if !retry.Allowed || retry.Authority == nil || retry.Authority.ID != a.ID || string(retry.Authority.Signature) != string(a.Signature) ||
		retry.Consumed == nil || retry.Consumed.OperationID != "op-permit-1" || !retry.Consumed.ConsumedAt.Equal(resp.Consumed.ConsumedAt) {
		t.Fatalf("retried permit of the same operation: %+v", retry)
	}

	// Single use: the same act under another operation is refused; the Act is unchanged. A
	// Review of it issues nothing either.
	again := r.do(t, permitReq(t, c, 1, "op-permit-2"))
	expectDeny(t, again, ef.EF005, review.ReasonAuthority)
	expectDeny(t, r.do(t, c.req), ef.EF005, review.ReasonAuthority)
	if after := r.actObject(t, actID); after.ResourceVersion != rv || after.Annotations[v1alpha1.AnnotationActPermitOperation] != "op-permit-1" {
		t.Fatalf("a refused permit changed the Act: rv %s → %s, %v", rv, after.ResourceVersion, after.Annotations)
	}
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("refused permits and reviews stored %d Leases", n)
	}

	// A report for another operation, or naming another authority, is refused.
	expectDeny(t, r.do(t, report(actID, a.ID, "op-permit-2", v1alpha1.ActStateExecuted)), ef.EF002, review.ReasonAuthority)
	expectDeny(t, r.do(t, report(actID, "authz-"+strings.Repeat("0", 64), "op-permit-1", v1alpha1.ActStateExecuted)), ef.EF002, review.ReasonAuthority)
	expectDeny(t, r.do(t, report("", a.ID, "op-permit-1", v1alpha1.ActStateExecuted)), ef.EF002, review.ReasonAuthority)
	if st := r.actObject(t, actID).Status; st.State != "" {
		t.Fatalf("a refused report moved the Act to %s", st.State)
	}

	// The outcome completes the Act: decision, authority, operation and state in one write.
	counter.reset()
	leaseCounter.reset()
	rep := r.do(t, report(actID, a.ID, "op-permit-1", v1alpha1.ActStateExecuted))
	if !rep.Allowed || rep.Reported == nil || rep.Reported.State != v1alpha1.ActStateExecuted {
		t.Fatalf("report: %+v", rep)
	}
	reportWrites := counter.writes() + leaseCounter.writes()
	t.Logf("one permitted call: %d writes (permit %d, report %d); the Report's API requests %v, Lease store %v",
		permitWrites+reportWrites, permitWrites, reportWrites, counter.snapshot(), leaseCounter.snapshot())
	if permitWrites+reportWrites > 2 || counter.get("POST acts") != 0 || leaseCounter.get("POST leases") != 0 {
		t.Fatalf("a permitted call cost %d writes (permit %d, report %d), want at most 2", permitWrites+reportWrites, permitWrites, reportWrites)
	}
	obj = r.actObject(t, actID)
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
	// Idempotent: the same report again is answered as recorded; a Permit after the outcome,
	// even of the same operation, is refused.
	if rep := r.do(t, report(actID, a.ID, "op-permit-1", v1alpha1.ActStateExecuted)); !rep.Allowed {
		t.Fatalf("repeated report: %+v", rep)
	}
	expectDeny(t, r.do(t, permitReq(t, c, 1, "op-permit-1")), ef.EF005, review.ReasonAuthority)

	// Defence in depth: a call the service's policy does not permit is refused whatever the
	// sidecar decided, and nothing is recorded.
	hotC := r.call(t, "s-permit", "get_balance", `{"account":"x"}`)
	expectDeny(t, r.do(t, permitReq(t, hotC, 1, "op-hot")), ef.EFPolicyDenied, review.ReasonPolicy)
	humanC := r.call(t, "s-permit", "send_payment", `{"amount":5,"to":"x"}`)
	expectDeny(t, r.do(t, permitReq(t, humanC, 1, "op-human")), ef.EFPolicyDenied, review.ReasonPolicy)
	staleC := r.call(t, "s-permit", "email_send", `{"to":"x@example.com"}`)
	expectDeny(t, r.do(t, permitReq(t, staleC, 1+1, "op-stale")), ef.EF002, review.ReasonAuthority)
	for _, x := range []sidecarCall{hotC, humanC, staleC} {
		got := &v1alpha1.Act{}
		err := r.env.Client.Get(t.Context(), client.ObjectKey{Namespace: r.ns, Name: x.cand.Act.CandidateActID}, got)
		if !apierrors.IsNotFound(err) {
			t.Fatalf("a refused permit recorded Act %s (%v)", x.cand.Act.CandidateActID, err)
		}
	}
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("refused permits stored %d Leases", n)
	}
}

// TestReportWithoutRead: the outcome Report of a Permit this service just answered is one API
// request, the status patch as a compare-and-swap on the version the Permit created; an Act
// that changed since is read again and the outcome still recorded, and a deleted one is
// refused EF_ACT_INVALID.
func TestReportWithoutRead(t *testing.T) {
	r := newRig(t, rigOptions{})
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "email_send", 1)
	permit := func(t *testing.T, args, op string) (string, string) {
		t.Helper()
		c := r.call(t, "s-report", "email_send", args)
		resp := r.do(t, permitReq(t, c, 1, op))
		if !resp.Allowed || resp.Consumed == nil {
			t.Fatalf("permit: %+v", resp)
		}
		return c.cand.Act.CandidateActID, resp.Consumed.AuthorityID
	}
	executed := func(t *testing.T, actID, authID, op string) {
		t.Helper()
		rep := r.do(t, report(actID, authID, op, v1alpha1.ActStateExecuted))
		if !rep.Allowed || rep.Reported == nil || rep.Reported.State != v1alpha1.ActStateExecuted {
			t.Fatalf("report: %+v", rep)
		}
		if st := r.actObject(t, actID).Status; st.State != v1alpha1.ActStateExecuted || st.OperationID != op || st.AuthorityRef == nil || st.AuthorityRef.Name != authID {
			t.Fatalf("act after the report: %+v", st)
		}
	}

	actID, authID := permit(t, `{"to":"a@example.com"}`, "op-a")
	counter.reset()
	executed(t, actID, authID, "op-a")
	if got := counter.snapshot(); len(got) != 1 || counter.get("PATCH acts/status") != 1 {
		t.Fatalf("the Report made the API requests %v; want the status patch only", got)
	}
	// Reported again (the outbox's retry): read, and answered as recorded.
	counter.reset()
	executed(t, actID, authID, "op-a")
	if counter.get("GET acts") != 1 || counter.writes() != 0 {
		t.Fatalf("a repeated Report made the API requests %v; want one read, no write", counter.snapshot())
	}

	// Changed after the Permit: the compare-and-swap conflicts, the Act is read, the outcome
	// recorded on the version read.
	actID, authID = permit(t, `{"to":"b@example.com"}`, "op-b")
	a := r.actObject(t, actID)
	a.Labels["example.com/touched"] = "yes"
	if err := r.env.Client.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	counter.reset()
	executed(t, actID, authID, "op-b")
	if counter.get("GET acts") != 1 || counter.get("PATCH acts/status") != 2 {
		t.Fatalf("a Report of a changed Act made the API requests %v; want a conflicting patch, a read, a patch", counter.snapshot())
	}
	if r.actObject(t, actID).Labels["example.com/touched"] != "yes" {
		t.Fatal("the Report undid the change made after the Permit")
	}

	// Deleted after the Permit: refused, nothing created.
	actID, authID = permit(t, `{"to":"c@example.com"}`, "op-c")
	if err := r.env.Client.Delete(t.Context(), r.actObject(t, actID)); err != nil {
		t.Fatal(err)
	}
	expectDeny(t, r.do(t, report(actID, authID, "op-c", v1alpha1.ActStateExecuted)), ef.EFActInvalid, review.ReasonAuthority)
	got := &v1alpha1.Act{}
	if err := r.env.Client.Get(t.Context(), client.ObjectKey{Namespace: r.ns, Name: actID}, got); !apierrors.IsNotFound(err) {
		t.Fatalf("the Report of a deleted Act left %v (%v)", got.Status, err)
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

// countedLeaseStore makes r's Lease store one whose API requests the returned counter counts.
func countedLeaseStore(t *testing.T, r *rig) *apiCounter {
	t.Helper()
	c := &apiCounter{counts: map[string]int{}}
	store, err := leasestore.NewForConfig(c.wrap(fastConfig(serviceUser(t, r.env, r.ns))),
		leasestore.Options{Verifier: r.signer.Verifier(), Now: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r.store = store
	return c
}
