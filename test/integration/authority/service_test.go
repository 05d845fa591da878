package authority

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/test/envtest"
)

const paymentArgs = `{"amount":"100.00","to":"acct-9","memo":"invoice 7"}`

// expectDeny fails t unless resp refuses with code.
func expectDeny(t testing.TB, resp *review.Response, code ef.EFCode, reason review.Reason) {
	t.Helper()
	if resp.Allowed || resp.Authority != nil || resp.Code != code || (reason != "" && resp.Reason != reason) {
		t.Fatalf("response allowed=%v code=%s reason=%s authority=%v (%s); want a deny %s/%s",
			resp.Allowed, resp.Code, resp.Reason, resp.Authority != nil, resp.Message, code, reason)
	}
}

// leaseCount counts the authority Leases in the rig's namespace.
func (r *rig) leases(t testing.TB) []coordinationv1.Lease {
	t.Helper()
	var list coordinationv1.LeaseList
	if err := r.env.Client.List(context.Background(), &list, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// counter returns the value of actgate_authority_decisions_total for the label values.
func (r *rig) counter(t testing.TB, labels map[string]string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "actgate_authority_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// TestServiceDecisions: the hot path, a policy deny, an unknown tool and a machine permit with
// its single consume, over real HTTPS with a real TokenReview of a real bound token.
func TestServiceDecisions(t *testing.T) {
	r := newRig(t, rigOptions{})

	t.Run("allow hot path", func(t *testing.T) {
		c := r.call(t, "session-1", "get_balance", `{"account":"acct-secret-123"}`)
		resp := r.do(t, c.req)
		if !resp.Allowed || resp.Decision != v1alpha1.ActDecisionAllowed || resp.Authority != nil || resp.Code != "" {
			t.Fatalf("hot path: %+v", resp)
		}
		id := c.cand.Act.CandidateActID
		a := r.actObject(t, id)
		if resp.Act != id || a.Status.Decision != v1alpha1.ActDecisionAllowed || a.Status.State != v1alpha1.ActStateAuthorized ||
			a.Spec.Agent != r.agent || string(a.Spec.ActionDigest) != c.cand.ActionDigest() || a.Spec.PolicyEpoch != 1 ||
			a.Spec.ConsequenceClass != v1alpha1.ConsequenceInformational || a.Spec.Destination != paymentsURL {
			t.Fatalf("act %+v / %+v", a.Spec, a.Status)
		}
		raw, _ := json.Marshal(a)
		if strings.Contains(string(raw), "acct-secret-123") {
			t.Fatal("the Act carries a raw argument value")
		}
		if len(r.leases(t)) != 0 {
			t.Fatal("the hot path issued a Lease")
		}
	})

	t.Run("deny unknown tool", func(t *testing.T) {
		c := r.call(t, "session-1", "drop_ledger", `{}`)
		resp := r.do(t, c.req)
		expectDeny(t, resp, ef.EFUnknownTool, review.ReasonPolicy)
		a := r.actObject(t, c.cand.Act.CandidateActID)
		if a.Status.Decision != v1alpha1.ActDecisionDenied || a.Status.Code != string(ef.EFUnknownTool) {
			t.Fatalf("act status %+v", a.Status)
		}
	})

	t.Run("deny argument constraint", func(t *testing.T) {
		c := r.call(t, "session-1", "send_payment", `{"amount":"20000.00","to":"acct-9"}`)
		expectDeny(t, r.do(t, c.req), ef.EFPolicyDenied, review.ReasonPolicy)
	})

	t.Run("arguments that are not the act's", func(t *testing.T) {
		c := r.call(t, "session-1", "email_send", `{"to":"a@example.com"}`)
		c.req.Arguments = json.RawMessage(`{"to":"attacker@example.com"}`)
		expectDeny(t, r.do(t, c.req), ef.EFScopeMismatch, review.ReasonBadRequest)
	})

	t.Run("permit, consume once", func(t *testing.T) {
		c := r.call(t, "session-1", "email_send", `{"to":"a@example.com","body":"receipt"}`)
		resp := r.do(t, c.req)
		if !resp.Allowed || resp.Authority == nil || resp.Reason != review.ReasonPolicy {
			t.Fatalf("permit: %+v", resp)
		}
		// Step 4 at the sink: verify against what the sidecar itself expects.
		a, err := resp.Authority.Authority()
		if err != nil {
			t.Fatal(err)
		}
		expect := c.binding(r.ns, 1)
		if err := r.signer.Verifier().Verify(a, expect, r.clock.Now()); err != nil {
			t.Fatalf("the issued authority does not verify at the sink: %v", err)
		}
		// A retried review of the same act returns the same authority, not a second one.
		again := r.do(t, c.req)
		if !again.Allowed || again.Authority == nil || again.Authority.ID != a.ID {
			t.Fatalf("retried review: %+v", again)
		}
		if n := len(r.leases(t)); n != 1 {
			t.Fatalf("%d Leases after two reviews of one act", n)
		}
		// A consume for another destination is refused and spends nothing.
		wrong := expect
		wrong.Destination = "https://evil.example/mcp"
		expectDeny(t, r.do(t, consumeReq(a.ID, "op-evil", wrong)), ef.EFDestinationMismatch, review.ReasonAuthority)

		got := r.do(t, consumeReq(a.ID, "op-1", expect))
		if !got.Allowed || got.Consumed == nil || got.Consumed.OperationID != "op-1" || got.Consumed.AuthorityID != a.ID {
			t.Fatalf("consume: %+v", got)
		}
		// T-C: the replay is denied.
		expectDeny(t, r.do(t, consumeReq(a.ID, "op-2", expect)), ef.EF005, review.ReasonAuthority)
		l := leaseOf(t, r.env, r.ns, a.ID)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "op-1" {
			t.Fatalf("Lease holder %v, want op-1", l.Spec.HolderIdentity)
		}
		act := r.actObject(t, c.cand.Act.CandidateActID)
		if act.Status.State != v1alpha1.ActStateConsumed || act.Status.OperationID != "op-1" || act.Status.AuthorityRef == nil || act.Status.AuthorityRef.Name != a.ID {
			t.Fatalf("act status after consume %+v", act.Status)
		}
		// A review of the consumed act does not hand the authority out again.
		expectDeny(t, r.do(t, c.req), ef.EF005, review.ReasonAuthority)
	})

	t.Run("a live destination the policy does not allow", func(t *testing.T) {
		// A host loop about to contact another server than the policy's (tool-use-binding §12
		// MCP_SERVER_SWAP): the policy decides the act's live destination, refuses it, and no
		// authority is issued for it (§22 T-D).
		before := len(r.leases(t))
		c := r.callAt(t, "session-1", "email_send", `{"to":"c@example.com"}`, "https://payments.attacker.example/mcp")
		expectDeny(t, r.do(t, c.req), ef.EFDestinationMismatch, review.ReasonPolicy)
		a := r.actObject(t, c.cand.Act.CandidateActID)
		if a.Status.Decision != v1alpha1.ActDecisionDenied || a.Spec.Destination != "https://payments.attacker.example/mcp" {
			t.Fatalf("act %+v / %+v", a.Spec, a.Status)
		}
		if n := len(r.leases(t)); n != before {
			t.Fatalf("%d Leases after a refused destination, want %d", n, before)
		}
	})

	t.Run("consume under another epoch", func(t *testing.T) {
		c := r.call(t, "session-1", "email_send", `{"to":"b@example.com"}`)
		resp := r.do(t, c.req)
		if resp.Authority == nil {
			t.Fatalf("permit: %+v", resp)
		}
		envtest.AcceptPolicy(t, r.env.Client, r.policy, 2) // the policy changed
		defer envtest.AcceptPolicy(t, r.env.Client, r.policy, 1)
		expectDeny(t, r.do(t, consumeReq(resp.Authority.ID, "op-e", c.binding(r.ns, 1))), ef.EF002, review.ReasonAuthority)
		expectDeny(t, r.do(t, consumeReq(resp.Authority.ID, "op-e", c.binding(r.ns, 2))), ef.EF002, review.ReasonAuthority)
		if l := leaseOf(t, r.env, r.ns, resp.Authority.ID); l.Spec.HolderIdentity != nil {
			t.Fatal("an authority of an old epoch was consumed")
		}
	})

	t.Run("metrics", func(t *testing.T) {
		if n := r.counter(t, map[string]string{"operation": "Review", "decision": "Allowed", "class": "INFORMATIONAL"}); n != 1 {
			t.Errorf("allowed INFORMATIONAL reviews counted %v, want 1", n)
		}
		if n := r.counter(t, map[string]string{"operation": "Consume", "code": "EF_005"}); n != 1 {
			t.Errorf("EF_005 consumes counted %v, want 1", n)
		}
		mfs, _ := r.reg.Gather()
		found := false
		for _, mf := range mfs {
			if mf.GetName() == "actgate_authority_review_duration_seconds" {
				for _, m := range mf.GetMetric() {
					found = found || m.GetHistogram().GetSampleCount() > 0
				}
			}
		}
		if !found {
			t.Error("no review latency observed")
		}
	})
}

// principal returns a client of a principal, who may read and write BindingMoments in the
// rig's namespace (config/rbac's principal role).
func (r *rig) principal(t testing.TB, name string) client.Client {
	t.Helper()
	ctx := context.Background()
	u, err := r.env.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	role := "principal-" + shortHash(name)
	if err := r.env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: r.ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"actgate.io"}, Resources: []string{"bindingmoments"}, Verbs: []string{"get", "list", "update", "patch"}},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := r.env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: r.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}); err != nil {
		t.Fatal(err)
	}
	return u.Client
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// resolve writes a resolution the way the principal does (spec.resolution, as that user) and,
// when record is true, the status the BindingMoment controller writes after admission.
func (r *rig) resolve(t testing.TB, as client.Client, moment, principal string, kind v1alpha1.ResolutionKind, idx *int32, answer string, record bool) {
	t.Helper()
	ctx := context.Background()
	m := &v1alpha1.BindingMoment{}
	if err := as.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: moment}, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Principal != principal {
		t.Fatalf("moment %s is addressed to %s, not %s", moment, m.Spec.Principal, principal)
	}
	m.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: kind, OptionIdx: idx, Answer: answer, EnvelopeDigest: m.Spec.EnvelopeDigest}
	if err := as.Update(ctx, m); err != nil {
		t.Fatalf("principal %s resolving %s: %v", principal, moment, err)
	}
	if !record {
		r.waitMoment(t, moment)
		return
	}
	m.Status.State = v1alpha1.BindingMomentResolved
	m.Status.ResolvedBy = principal
	m.Status.ResolvedAt = &metav1.Time{Time: r.clock.Now()}
	if err := r.env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	r.waitMoment(t, moment)
}

// escalateOnce reviews a payment in session and expects a fresh escalation; it returns the
// BindingMoment names.
// racingCalls escalates the payment call in session, has principal c (alice) choose its first
// option, and returns the escalated call and n more calls of the granted action, which race
// for the one grant.
func (r *rig) racingCalls(t testing.TB, c client.Client, session string, n int) (sidecarCall, []sidecarCall) {
	t.Helper()
	escalated, esc := r.escalateOnce(t, session)
	r.resolve(t, c, esc.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	calls := make([]sidecarCall, n)
	for i := range calls {
		calls[i] = r.call(t, session, "send_payment", paymentArgs)
	}
	return escalated, calls
}

func (r *rig) escalateOnce(t testing.TB, session string) (sidecarCall, *review.Response) {
	t.Helper()
	c := r.call(t, session, "send_payment", paymentArgs)
	resp := r.do(t, c.req)
	expectDeny(t, resp, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if resp.Decision != v1alpha1.ActDecisionEscalated || resp.Escalation == nil || resp.Escalation.State != review.EscalationPending || len(resp.Escalation.BindingMoments) == 0 {
		t.Fatalf("escalation: %+v / %+v", resp, resp.Escalation)
	}
	for _, n := range resp.Escalation.BindingMoments {
		r.waitMoment(t, n)
	}
	return c, resp
}

// TestServiceEscalation: escalate → BindingMoment created → the principal resolves → review
// again → Lease issued → consume once → second consume denied; and the resolution authorises
// one call only.
func TestServiceEscalation(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := context.Background()
	aliceC := r.principal(t, alice)
	const session = "mcp-session-7"

	first, resp := r.escalateOnce(t, session)
	esc := resp.Escalation
	if len(esc.BindingMoments) != 1 || esc.ExpiresAt == nil {
		t.Fatalf("escalation %+v", esc)
	}
	name := esc.BindingMoments[0]
	m := &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	// The BindingMoment: the envelope exactly as emitted (its digest reproduces), the principal,
	// the act, the expiry.
	sum := sha256.Sum256([]byte(m.Spec.Envelope))
	if string(m.Spec.EnvelopeDigest) != "sha256:"+hex.EncodeToString(sum[:]) || m.Spec.Envelope != esc.Envelope || string(m.Spec.EnvelopeDigest) != esc.EnvelopeDigest {
		t.Fatal("the BindingMoment's envelope is not the one emitted")
	}
	if m.Spec.Principal != alice || m.Spec.ActRef.Name != first.cand.Act.CandidateActID || !m.Spec.ExpiresAt.Equal(esc.ExpiresAt) {
		t.Fatalf("moment spec %+v", m.Spec)
	}
	env, err := envelope.Parse([]byte(m.Spec.Envelope))
	if err != nil {
		t.Fatal(err)
	}
	if env.NumOptions() != 2 {
		t.Fatalf("%d options, want the requested call and the dry run", env.NumOptions())
	}
	if o, _ := env.Option(0); o.ActionDigest != first.cand.ActionDigest() {
		t.Fatal("option 0 is not the requested call")
	}
	if strings.Contains(m.Spec.Envelope, "acct-9") || strings.Contains(m.Spec.Envelope, "invoice 7") {
		t.Fatal("the gate-authored briefing repeats argument values")
	}
	escalated := r.actObject(t, first.cand.Act.CandidateActID)
	if escalated.Status.Decision != v1alpha1.ActDecisionEscalated || len(escalated.Status.BindingMomentRefs) != 1 {
		t.Fatalf("escalated act status %+v", escalated.Status)
	}

	// Calling again while it is pending: the same moment, nothing new.
	second := r.call(t, session, "send_payment", paymentArgs)
	again := r.do(t, second.req)
	expectDeny(t, again, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if again.Escalation == nil || len(again.Escalation.BindingMoments) != 1 || again.Escalation.BindingMoments[0] != name {
		t.Fatalf("pending re-review: %+v", again.Escalation)
	}

	// The agent's own service account cannot resolve it: no RBAC on BindingMoments.
	agentUser, err := r.env.AddUser(r.agent)
	if err != nil {
		t.Fatal(err)
	}
	mm := m.DeepCopy()
	mm.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](0), EnvelopeDigest: m.Spec.EnvelopeDigest}
	if err := agentUser.Client.Update(ctx, mm); err == nil {
		t.Fatal("the agent's service account resolved its own escalation")
	}

	// Alice selects the requested call. Until the controller records it, nothing is granted.
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", false)
	third := r.call(t, session, "send_payment", paymentArgs)
	expectDeny(t, r.do(t, third.req), ef.EFEscalationRequired, review.ReasonBindingMoment)
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("%d Leases before the resolution was recorded", n)
	}
	// A resolution that does not name its principal as resolver does not count either.
	m = &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	m.Status.State, m.Status.ResolvedBy = v1alpha1.BindingMomentResolved, "mallory@example.com"
	m.Status.ResolvedAt = &metav1.Time{Time: r.clock.Now()}
	if err := r.env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	r.waitMoment(t, name)
	expectDeny(t, r.do(t, third.req), ef.EFEscalationRequired, review.ReasonBindingMoment)
	m.Status.ResolvedBy = alice
	if err := r.env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	r.waitMoment(t, name)

	// A call of another action (the dry run, which alice did not choose) is not authorised.
	dry := r.call(t, session, "send_payment", `{"amount":"100.00","dry_run":true,"memo":"invoice 7","to":"acct-9"}`)
	expectDeny(t, r.do(t, dry.req), ef.EFEscalationRequired, review.ReasonBindingMoment)

	// Review again: authority for exactly this call.
	granted := r.call(t, session, "send_payment", paymentArgs)
	resp = r.do(t, granted.req)
	if !resp.Allowed || resp.Authority == nil || resp.Reason != review.ReasonBindingMoment || resp.Escalation == nil ||
		resp.Escalation.State != review.EscalationGranted || resp.Escalation.Resolution == nil || resp.Escalation.Resolution.ResolvedBy[0] != alice {
		t.Fatalf("granted review: %+v / %+v", resp, resp.Escalation)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	expect := granted.binding(r.ns, 1)
	if err := r.signer.Verifier().Verify(a, expect, r.clock.Now()); err != nil {
		t.Fatalf("granted authority: %v", err)
	}
	if len(r.leases(t)) != 1 {
		t.Fatal("not exactly one Lease issued")
	}
	// The grant is spent on that call: a further call of the same action escalates anew.
	later := r.call(t, session, "send_payment", paymentArgs)
	lresp := r.do(t, later.req)
	expectDeny(t, lresp, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if lresp.Escalation == nil || lresp.Escalation.BindingMoments[0] == name {
		t.Fatalf("a spent grant did not lead to a new binding moment: %+v", lresp.Escalation)
	}
	// The granted call's retried review still gets its authority.
	if rr := r.do(t, granted.req); !rr.Allowed || rr.Authority == nil || rr.Authority.ID != a.ID {
		t.Fatalf("retried granted review: %+v", rr)
	}

	// Consume once; the second consume is denied.
	if got := r.do(t, consumeReq(a.ID, "op-pay-1", expect)); !got.Allowed || got.Consumed == nil {
		t.Fatalf("consume: %+v", got)
	}
	expectDeny(t, r.do(t, consumeReq(a.ID, "op-pay-2", expect)), ef.EF005, review.ReasonAuthority)
	l := leaseOf(t, r.env, r.ns, a.ID)
	if *l.Spec.HolderIdentity != "op-pay-1" {
		t.Fatalf("holder %s", *l.Spec.HolderIdentity)
	}
	if n := len(r.leases(t)); n != 1 {
		t.Fatalf("%d Leases, want 1", n)
	}
}

// TestServiceGrantRace: several calls of the granted action racing (as retries from two
// sidecar replicas would): exactly one receives the authority.
func TestServiceGrantRace(t *testing.T) {
	r := newRig(t, rigOptions{})
	_, calls := r.racingCalls(t, r.principal(t, alice), "race-session", 8)
	results := make([]*review.Response, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { results[i] = r.do(t, calls[i].req) })
	}
	wg.Wait()
	granted := 0
	for _, res := range results {
		if res.Allowed {
			granted++
		} else if res.Code != ef.EFEscalationRequired && res.Code != ef.EF060 {
			t.Errorf("unexpected refusal %s (%s)", res.Code, res.Message)
		}
	}
	if granted != 1 {
		t.Fatalf("%d calls were granted one resolution's authority, want exactly 1", granted)
	}
	if n := len(r.leases(t)); n != 1 {
		t.Fatalf("%d Leases, want 1", n)
	}
}

// asNewPod makes the rig's agent a new pod of the agent service account: one agent per
// subtest, so one subtest's pending moment is not another's (the same action from any session
// of one agent shares its pending moment).
func (r *rig) asNewPod(t testing.TB, name string) {
	t.Helper()
	r.agentTk = r.token(t, "agent", r.pod(t, "agent", name, map[string]string{"app.kubernetes.io/name": agentLabel}), audience)
}

// TestServiceResolutions: resolutions that authorise nothing.
func TestServiceResolutions(t *testing.T) {
	r := newRig(t, rigOptions{})
	aliceC := r.principal(t, alice)

	t.Run("declined", func(t *testing.T) {
		r.asNewPod(t, "agent-declined")
		_, resp := r.escalateOnce(t, "s-declined")
		r.resolve(t, aliceC, resp.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionDeclined, nil, "", true)
		for range 2 { // and it stays declined in the session
			c := r.call(t, "s-declined", "send_payment", paymentArgs)
			got := r.do(t, c.req)
			expectDeny(t, got, ef.EFMomentDeclined, review.ReasonBindingMoment)
			if got.Escalation == nil || got.Escalation.State != review.EscalationDeclined {
				t.Fatalf("declined: %+v", got.Escalation)
			}
			if a := r.actObject(t, c.cand.Act.CandidateActID); a.Status.Decision != v1alpha1.ActDecisionDenied || a.Status.Code != string(ef.EFMomentDeclined) {
				t.Fatalf("act %+v", a.Status)
			}
		}
		// Another session is not affected.
		r.escalateOnce(t, "s-other")
	})

	t.Run("question reopens", func(t *testing.T) {
		r.asNewPod(t, "agent-question")
		_, resp := r.escalateOnce(t, "s-question")
		r.resolve(t, aliceC, resp.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionQuestion, nil, "", true)
		for range 2 {
			got := r.do(t, r.call(t, "s-question", "send_payment", paymentArgs).req)
			expectDeny(t, got, ef.EFEscalationRequired, review.ReasonBindingMoment)
			if got.Escalation == nil || got.Escalation.State != review.EscalationReopened || got.Escalation.Resolution.Kind != "question" {
				t.Fatalf("question: %+v", got.Escalation)
			}
		}
	})

	t.Run("answer is delivered once", func(t *testing.T) {
		r.asNewPod(t, "agent-answer")
		_, resp := r.escalateOnce(t, "s-answer")
		r.resolve(t, aliceC, resp.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionAnswer, nil, "Pay only half.", true)
		got := r.do(t, r.call(t, "s-answer", "send_payment", paymentArgs).req)
		expectDeny(t, got, ef.EFEscalationRequired, review.ReasonBindingMoment)
		if got.Escalation == nil || got.Escalation.State != review.EscalationAnswered || got.Escalation.Resolution.Answer != "Pay only half." {
			t.Fatalf("answer: %+v", got.Escalation)
		}
		// The next call escalates anew.
		_, next := r.escalateOnce(t, "s-answer")
		if next.Escalation.BindingMoments[0] == resp.Escalation.BindingMoments[0] {
			t.Fatal("the answered moment was offered again")
		}
	})

	t.Run("expired moment denies", func(t *testing.T) {
		r.asNewPod(t, "agent-expiry")
		first, resp := r.escalateOnce(t, "s-expiry")
		r.clock.Advance(11 * time.Minute) // past the 10-minute moment TTL
		c := r.call(t, "s-expiry", "send_payment", paymentArgs)
		got := r.do(t, c.req)
		expectDeny(t, got, ef.EF002, review.ReasonBindingMoment)
		if got.Escalation == nil || got.Escalation.State != review.EscalationExpired {
			t.Fatalf("expired: %+v", got.Escalation)
		}
		if a := r.actObject(t, first.cand.Act.CandidateActID); a.Status.Decision != v1alpha1.ActDecisionDenied || a.Status.Code != string(ef.EF002) {
			t.Fatalf("the escalated act after expiry: %+v", a.Status)
		}
		// A resolution arriving after expiry authorises nothing.
		r.resolve(t, aliceC, resp.Escalation.BindingMoments[0], alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
		_, next := r.escalateOnce(t, "s-expiry")
		if next.Escalation.BindingMoments[0] == resp.Escalation.BindingMoments[0] {
			t.Fatal("the expired moment was offered again")
		}
	})

	t.Run("arguments outside the strict profile cannot be escalated", func(t *testing.T) {
		c := r.call(t, "s-float", "send_payment", `{"amount":100.5,"to":"acct-9"}`)
		expectDeny(t, r.do(t, c.req), ef.EFArgumentsOutOfProfile, review.ReasonPolicy)
	})
}

// TestServiceTwoPrincipals: minPrincipals 2 needs both moments resolved with the option.
func TestServiceTwoPrincipals(t *testing.T) {
	r := newRig(t, rigOptions{principals: []string{alice, bob}, minPrincipals: 2})
	aliceC, bobC := r.principal(t, alice), r.principal(t, bob)
	_, resp := r.escalateOnce(t, "s-two")
	if len(resp.Escalation.BindingMoments) != 2 {
		t.Fatalf("%d moments, want one per principal", len(resp.Escalation.BindingMoments))
	}
	byPrincipal := map[string]string{}
	for _, n := range resp.Escalation.BindingMoments {
		m := &v1alpha1.BindingMoment{}
		if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: n}, m); err != nil {
			t.Fatal(err)
		}
		byPrincipal[m.Spec.Principal] = n
	}
	r.resolve(t, aliceC, byPrincipal[alice], alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	got := r.do(t, r.call(t, "s-two", "send_payment", paymentArgs).req)
	expectDeny(t, got, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if got.Escalation.State != review.EscalationPending {
		t.Fatalf("one of two: %+v", got.Escalation)
	}
	r.resolve(t, bobC, byPrincipal[bob], bob, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	got = r.do(t, r.call(t, "s-two", "send_payment", paymentArgs).req)
	if !got.Allowed || got.Authority == nil || len(got.Escalation.Resolution.ResolvedBy) != 2 {
		t.Fatalf("two of two: %+v", got)
	}
}

// TestServiceCallers: who may call, and what everyone else gets.
func TestServiceCallers(t *testing.T) {
	r := newRig(t, rigOptions{})
	c := r.call(t, "s-callers", "get_balance", `{"account":"a"}`)

	t.Run("pod no ToolPolicy governs", func(t *testing.T) {
		pod := r.pod(t, "other", "other-0", map[string]string{"app.kubernetes.io/name": "reporting-agent"})
		expectDeny(t, r.doAs(t, r.token(t, "other", pod, audience), c.req), ef.EFPolicyDenied, review.ReasonNotGoverned)
	})
	t.Run("bad token", func(t *testing.T) {
		expectDeny(t, r.doAs(t, "not-a-token", c.req), ef.EFPolicyDenied, review.ReasonUnauthenticated)
	})
	t.Run("token for another audience", func(t *testing.T) {
		p := r.podNamed(t, "agent-0")
		expectDeny(t, r.doAs(t, r.token(t, "agent", p, "https://kubernetes.default.svc"), c.req), ef.EFPolicyDenied, review.ReasonUnauthenticated)
	})
	t.Run("no token", func(t *testing.T) {
		cl := r.client("")
		cl.Token = func() (string, error) { return " ", nil }
		resp, err := cl.Do(context.Background(), c.req)
		if err != nil {
			t.Fatal(err)
		}
		expectDeny(t, resp, ef.EFPolicyDenied, review.ReasonUnauthenticated)
	})
	t.Run("token of a deleted pod", func(t *testing.T) {
		p := r.pod(t, "agent", "agent-gone", map[string]string{"app.kubernetes.io/name": agentLabel})
		tok := r.token(t, "agent", p, audience)
		if err := r.env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		waitGone(t, r, p.Name)
		expectDeny(t, r.doAs(t, tok, c.req), ef.EFPolicyDenied, review.ReasonUnauthenticated)
	})
	t.Run("unbound token of a governed service account", func(t *testing.T) {
		expectDeny(t, r.doAs(t, r.token(t, "agent", nil, audience), r.call(t, "s-callers", "get_balance", `{"account":"b"}`).req),
			ef.EFPolicyDenied, review.ReasonUnboundToken)
	})
	t.Run("ambiguous policies", func(t *testing.T) {
		second := paymentsPolicy(r.ns, []string{alice}, 1)
		second.Name = "payments-too"
		if err := r.env.Client.Create(context.Background(), second); err != nil {
			t.Fatal(err)
		}
		envtest.AcceptPolicy(t, r.env.Client, second, 1)
		defer func() {
			if err := r.env.Client.Delete(context.Background(), second); err != nil {
				t.Error(err)
			}
			envtest.WaitCached(t, r.env.Client, r.ns, second.Name, "")
		}()
		resp := r.do(t, r.call(t, "s-callers", "get_balance", `{"account":"c"}`).req)
		expectDeny(t, resp, ef.EFPolicyDenied, review.ReasonAmbiguousPolicy)
		if !strings.Contains(resp.Message, "payments-too") {
			t.Fatalf("message %q does not name the policies", resp.Message)
		}
	})
	t.Run("policy not accepted", func(t *testing.T) {
		p := &v1alpha1.ToolPolicy{}
		if err := r.env.Client.Get(context.Background(), client.ObjectKeyFromObject(r.policy), p); err != nil {
			t.Fatal(err)
		}
		p.Spec.AuthorityTTL = &metav1.Duration{Duration: 2 * time.Minute} // a new generation the controller has not seen
		if err := r.env.Client.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		envtest.WaitCached(t, r.env.Client, r.ns, p.Name, p.ResourceVersion)
		expectDeny(t, r.do(t, r.call(t, "s-callers", "get_balance", `{"account":"d"}`).req), ef.EFPolicyDenied, review.ReasonPolicyNotReady)
		envtest.AcceptPolicy(t, r.env.Client, r.policy, 1)
		if resp := r.do(t, r.call(t, "s-callers", "get_balance", `{"account":"e"}`).req); !resp.Allowed {
			t.Fatalf("after acceptance: %+v", resp)
		}
	})
	t.Run("malformed review", func(t *testing.T) {
		bad := c.req
		bad.Act = json.RawMessage(`{"version":"1.0"}`)
		expectDeny(t, r.do(t, bad), ef.EFActInvalid, review.ReasonBadRequest)
		hc := r.client(r.agentTk).HTTP
		req, _ := http.NewRequest(http.MethodPost, r.url+review.Path, strings.NewReader(`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u1","operation":"Invoke"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+r.agentTk)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		got, err := review.DecodeResponse(mustRead(t, res), types.UID("u1"))
		if err != nil || res.StatusCode != http.StatusBadRequest || got.Allowed || got.Reason != review.ReasonBadRequest {
			t.Fatalf("HTTP %d: %+v, %v", res.StatusCode, got, err)
		}
	})
}

func (r *rig) podNamed(t testing.TB, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitGone(t testing.TB, r *rig, name string) {
	t.Helper()
	for range 100 {
		if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, &corev1.Pod{}); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod %s not deleted", name)
}

// TestServiceAPIServerSlowOrUnreachable: the service behind a proxy that makes the API server
// slow, then unreachable. Every review is denied with the timeout code, never allowed.
func TestServiceAPIServerSlowOrUnreachable(t *testing.T) {
	var proxy *slowProxy
	r := newRig(t, rigOptions{reviewTimeout: 700 * time.Millisecond, apiConfig: func(cfg *rest.Config) *rest.Config {
		var c *rest.Config
		proxy, c = newSlowProxy(t, cfg)
		return c
	}})
	c := r.call(t, "s-slow", "email_send", `{"to":"a@example.com"}`)
	resp := r.do(t, c.req)
	if !resp.Allowed || resp.Authority == nil {
		t.Fatalf("before the slowdown: %+v", resp)
	}
	expect := c.binding(r.ns, 1)

	proxy.SetDelay(2 * time.Second)
	for _, req := range []review.Request{
		r.call(t, "s-slow", "get_balance", `{"account":"a"}`).req,
		consumeReq(resp.Authority.ID, "op-slow", expect),
	} {
		got := r.do(t, req)
		expectDeny(t, got, ef.EF060, review.ReasonTimeout)
		if !got.Retryable {
			t.Fatal("EF_060 not marked retryable")
		}
	}
	proxy.SetDelay(0)
	proxy.close() // now unreachable: connections are refused
	got := r.do(t, consumeReq(resp.Authority.ID, "op-down", expect))
	expectDeny(t, got, ef.EF060, review.ReasonTimeout)
	if l := leaseOf(t, r.env, r.ns, resp.Authority.ID); l.Spec.HolderIdentity != nil {
		t.Fatalf("the authority was consumed by %s while the service said deny", *l.Spec.HolderIdentity)
	}
	if n := r.counter(t, map[string]string{"code": "EF_060"}); n < 3 {
		t.Errorf("EF_060 decisions counted %v, want 3", n)
	}
}

func mustRead(t testing.TB, res *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reportReq(id, op string, state v1alpha1.ActState, evidence string) review.Request {
	return review.Request{Operation: review.OperationReport, Report: &review.ReportRequest{AuthorityID: id, OperationID: op, State: state, EvidenceDigest: evidence}}
}

// TestServiceReport: the sidecar's Report moves the Act from CONSUMED to the outcome it
// journaled, through the API server and the Act CRD's transition rules; a report for another
// operation, or from a pod of another namespace, touches nothing.
func TestServiceReport(t *testing.T) {
	r := newRig(t, rigOptions{})
	other := newRig(t, rigOptions{}) // an agent governed in another namespace, on the same API server
	evidence := digestOf(`{"sent":true}`)

	permitConsume := func(t *testing.T, to, op string) (sidecarCall, string) {
		t.Helper()
		c := r.call(t, "s-report", "email_send", `{"to":"`+to+`"}`)
		resp := r.do(t, c.req)
		if !resp.Allowed || resp.Authority == nil {
			t.Fatalf("permit: %+v", resp)
		}
		if got := r.do(t, consumeReq(resp.Authority.ID, op, c.binding(r.ns, 1))); !got.Allowed || got.Consumed == nil {
			t.Fatalf("consume: %+v", got)
		}
		return c, resp.Authority.ID
	}
	state := func(t *testing.T, c sidecarCall) v1alpha1.ActState {
		t.Helper()
		return r.actObject(t, c.cand.Act.CandidateActID).Status.State
	}

	t.Run("EXECUTED", func(t *testing.T) {
		c, id := permitConsume(t, "a@example.com", "op-x1")
		// Refused before the right report: another operation, and another namespace's caller.
		expectDeny(t, r.do(t, reportReq(id, "op-someone-else", v1alpha1.ActStateExecuted, evidence)), ef.EF002, review.ReasonAuthority)
		expectDeny(t, r.doAs(t, other.agentTk, reportReq(id, "op-x1", v1alpha1.ActStateExecuted, evidence)), ef.EF002, review.ReasonAuthority)
		if s := state(t, c); s != v1alpha1.ActStateConsumed {
			t.Fatalf("a refused report moved the act to %s", s)
		}

		got := r.do(t, reportReq(id, "op-x1", v1alpha1.ActStateExecuted, evidence))
		if !got.Allowed || got.Reported == nil || got.Reported.State != v1alpha1.ActStateExecuted || got.Act != c.cand.Act.CandidateActID {
			t.Fatalf("report: %+v", got)
		}
		a := r.actObject(t, c.cand.Act.CandidateActID)
		settled := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ActSettledCondition)
		if a.Status.State != v1alpha1.ActStateExecuted || a.Status.OperationID != "op-x1" || settled == nil ||
			settled.Status != metav1.ConditionTrue || settled.Reason != v1alpha1.ActExecutedReason || !strings.Contains(a.Status.Message, evidence) {
			t.Fatalf("act status after report %+v", a.Status)
		}
		// Idempotent: the same report again is answered as recorded.
		if again := r.do(t, reportReq(id, "op-x1", v1alpha1.ActStateExecuted, evidence)); !again.Allowed || again.Reported == nil {
			t.Fatalf("repeated report: %+v", again)
		}
		// A terminal state is final: another outcome is refused and changes nothing.
		expectDeny(t, r.do(t, reportReq(id, "op-x1", v1alpha1.ActStateFailed, evidence)), ef.EFActInvalid, review.ReasonAuthority)
		if s := state(t, c); s != v1alpha1.ActStateExecuted {
			t.Fatalf("a refused report moved the act to %s", s)
		}
	})

	t.Run("INDETERMINATE stays until reconciliation", func(t *testing.T) {
		c, id := permitConsume(t, "b@example.com", "op-x2")
		if got := r.do(t, reportReq(id, "op-x2", v1alpha1.ActStateIndeterminate, "")); !got.Allowed {
			t.Fatalf("report INDETERMINATE: %+v", got)
		}
		a := r.actObject(t, c.cand.Act.CandidateActID)
		if settled := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ActSettledCondition); a.Status.State != v1alpha1.ActStateIndeterminate ||
			settled == nil || settled.Status != metav1.ConditionFalse || settled.Reason != v1alpha1.ActIndeterminateReason {
			t.Fatalf("act status %+v", a.Status)
		}
		expectDeny(t, r.do(t, reportReq(id, "op-x2", v1alpha1.ActStateExecuted, evidence)), ef.EFActInvalid, review.ReasonAuthority)
		if s := state(t, c); s != v1alpha1.ActStateIndeterminate {
			t.Fatalf("a sidecar's report moved an INDETERMINATE act to %s", s)
		}
	})

	t.Run("not consumed", func(t *testing.T) {
		c := r.call(t, "s-report", "email_send", `{"to":"c@example.com"}`)
		resp := r.do(t, c.req)
		if resp.Authority == nil {
			t.Fatalf("permit: %+v", resp)
		}
		expectDeny(t, r.do(t, reportReq(resp.Authority.ID, "op-x3", v1alpha1.ActStateExecuted, evidence)), ef.EF002, review.ReasonAuthority)
		if s := state(t, c); s != v1alpha1.ActStateAuthorized {
			t.Fatalf("a report before consume moved the act to %s", s)
		}
	})

	t.Run("FAILED", func(t *testing.T) {
		c, id := permitConsume(t, "d@example.com", "op-x4")
		if got := r.do(t, reportReq(id, "op-x4", v1alpha1.ActStateFailed, evidence)); !got.Allowed {
			t.Fatalf("report FAILED: %+v", got)
		}
		if s := state(t, c); s != v1alpha1.ActStateFailed {
			t.Fatalf("act %s, want FAILED", s)
		}
	})
}
