package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/review"
)

// waitMomentInformer waits until the service reads binding moments from its informer: the
// namespace's informers start when the service's ToolPolicy informer shows its policy, and
// until the moment informer has synced, moments are listed from the API server. Permits of
// tool (a machine-permitted one, under epoch) in a probe session show when it has.
func waitMomentInformer(t *testing.T, r *rig, counter *apiCounter, tool string, epoch int64) {
	t.Helper()
	for i := 0; ; i++ {
		counter.reset()
		c := r.call(t, "probe", tool, fmt.Sprintf(`{"title":"probe %d","to":"probe-%d@example.com"}`, i, i))
		if got := r.do(t, permitReq(t, c, epoch, fmt.Sprintf("op-probe-%d", i))); !got.Allowed {
			t.Fatalf("probe permit: %+v", got)
		}
		if counter.get("GET bindingmoments") == 0 {
			return
		}
		if i == 200 {
			t.Fatal("the service never read binding moments from its informer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMomentsFromInformer: with the service's Cache, a Permit reads its session's binding
// moments from the namespace's BindingMoment informer, not from the API server. A moment the
// service created is seen by the very next review, so the call joins it instead of escalating
// anew; a moment a principal declined refuses a Permit of any action it offers in the session,
// with no request to the API server for the moments, and nothing is recorded for it.
func TestMomentsFromInformer(t *testing.T) {
	r := newRig(t, rigOptions{})
	aliceC := r.principal(t, alice)
	// A machine-permitted tool with no provenance rule, which an agent-authored moment may offer.
	r.updatePolicy(t, 2, func(p *v1alpha1.ToolPolicy) {
		p.Spec.Rules = append(p.Spec.Rules, v1alpha1.ToolRule{Name: "tickets", Tools: []string{"ticket_create"},
			ConsequenceClass: v1alpha1.ConsequenceCommunication, Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}})
	})
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "ticket_create", 2)

	const session = "s-informer"
	ticket := `{"title":"invoice 7"}`
	calls := []review.ProposalCall{
		{Server: "payments", Tool: "send_payment", Arguments: json.RawMessage(paymentArgs)},
		{Server: "payments", Tool: "ticket_create", Arguments: json.RawMessage(ticket)},
	}
	var opts []envelope.DraftOption
	for _, c := range calls {
		opts = append(opts, envelope.DraftOption{Label: "Run " + c.Tool, Reasoning: "Because.", Tool: c.Tool, Args: c.Arguments})
	}
	env, err := envelope.Build(envelope.Draft{Synopsis: "The agent asks whether to pay or to write.", Findings: []string{"An invoice is due."},
		Recommendations: []string{"Pay it."}, Offer: "Ask for detail.", Stem: "Which call may run?", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	resp := r.do(t, review.Request{Operation: review.OperationPropose, Proposal: &review.ProposalRequest{
		Session: session, SinkID: sinkID, Envelope: string(env.Canonical()), Calls: calls}})
	if !resp.Allowed || resp.Escalation == nil || len(resp.Escalation.BindingMoments) != 1 {
		t.Fatalf("proposal: %+v / %+v", resp, resp.Escalation)
	}
	name := resp.Escalation.BindingMoments[0]

	// At once, with no wait on any cache: the option's call awaits the moment just created (an
	// escalation the informer's view would leave pending, or raise anew, is decided again from
	// the API server's watch cache, so a lagging informer costs the agent nothing).
	got := r.do(t, r.call(t, session, "send_payment", paymentArgs).req)
	if got.Escalation == nil || got.Escalation.State != review.EscalationPending || len(got.Escalation.BindingMoments) != 1 ||
		got.Escalation.BindingMoments[0] != name {
		t.Fatalf("the option's call right after the proposal: %+v / %+v", got, got.Escalation)
	}
	var all v1alpha1.BindingMomentList
	if err := r.env.Client.List(context.Background(), &all, client.InNamespace(r.ns)); err != nil || len(all.Items) != 1 {
		t.Fatalf("%d BindingMoments (%v), want the proposal's one", len(all.Items), err)
	}

	// Alice declines. Permits of the other option's call in the session until one is refused
	// show when the service's informer has the decline (one that reaches the service within
	// the informer's lag is decided as it would have been an instant earlier); from then on
	// every Permit of it in the session is refused and records nothing.
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionDeclined, nil, "", true)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		got := r.do(t, permitReq(t, r.call(t, session, "ticket_create", ticket), 2, fmt.Sprintf("op-racing-%d", i)))
		if got.Code == ef.EFMomentDeclined {
			break
		}
		if !got.Allowed || time.Now().After(deadline) {
			t.Fatalf("a permit after the decline: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	counter.reset()
	c := r.call(t, session, "ticket_create", ticket)
	expectDeny(t, r.do(t, permitReq(t, c, 2, "op-after-decline")), ef.EFMomentDeclined, review.ReasonBindingMoment)
	if n := counter.get("GET bindingmoments"); n != 0 {
		t.Fatalf("the permit listed binding moments from the API server %d times; want the informer", n)
	}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: c.cand.Act.CandidateActID}, &v1alpha1.Act{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused permit recorded its Act (%v)", err)
	}
	// Another session is not affected: the same call is permitted there.
	other := r.call(t, "s-informer-other", "ticket_create", ticket)
	if got := r.do(t, permitReq(t, other, 2, "op-other-session")); !got.Allowed {
		t.Fatalf("the call in another session: %+v", got)
	}
}
