package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/budget/kubeledger"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/internal/sink"
)

// budgetLimit is the daily budget of the email_send rule in these tests.
const budgetLimit = 20

// withBudget gives the rig's policy-permitted rule (email_send) a daily budget of
// budgetLimit calls per agent, and adds a rule without one (notify_*) for comparison.
func withBudget(p *v1alpha1.ToolPolicy) {
	for i := range p.Spec.Rules {
		if p.Spec.Rules[i].Name == "receipts-by-email" {
			p.Spec.Rules[i].Budgets = []v1alpha1.Budget{{Name: "daily", MaxCalls: ptr.To[int64](budgetLimit),
				Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay, TimeZone: "Europe/Berlin"}}}
		}
	}
	p.Spec.Rules = append(p.Spec.Rules, v1alpha1.ToolRule{Name: "notify", Tools: []string{"notify_*"}, ConsequenceClass: v1alpha1.ConsequenceCommunication,
		Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}})
}

// ledgers lists the rig namespace's BudgetLedgers as the admin.
func (r *rig) ledgers(t testing.TB) []v1alpha1.BudgetLedger {
	t.Helper()
	l := &v1alpha1.BudgetLedgerList{}
	if err := r.env.Client.List(context.Background(), l, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestBudgetHoldsUnderConcurrentPermits: 64 sidecar requests race through the real authority
// service (HTTPS, TokenReview, its own policy, a user holding exactly the service's RBAC) for
// one daily budget of 20 calls: exactly 20 Permits get an authority consumed by their
// operation (20 Acts carry a permit record), the other 44 are refused EF_BUDGET_EXCEEDED and
// leave no permit record, and the BudgetLedger says 20 calls. A FAILED outcome gives its call
// back (one more Permit fits), EXECUTED and INDETERMINATE keep theirs; the Review path checks
// the budget before issuing a Lease, and a Lease consumed by Consume is charged before its
// compare-and-swap.
func TestBudgetHoldsUnderConcurrentPermits(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.updatePolicy(t, 2, withBudget)
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "notify_ops", 2)

	type result struct {
		op   string
		act  string
		resp *review.Response
		err  error
	}
	calls := make([]sidecarCall, 64)
	for i := range calls {
		calls[i] = r.call(t, fmt.Sprintf("s-race-%02d", i), "email_send", fmt.Sprintf(`{"to":"ops@example.com","body":"receipt %d"}`, i))
	}
	results := make([]result, len(calls))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			op := fmt.Sprintf("op-race-%02d", i)
			resp, err := r.client(r.agentTk).Do(context.Background(), permitReq(t, c, 2, op))
			results[i] = result{op: op, act: c.cand.Act.CandidateActID, resp: resp, err: err}
		}()
	}
	close(start)
	wg.Wait()
	var admitted []result
	for _, res := range results {
		switch {
		case res.err != nil:
			t.Fatalf("%s: %v", res.op, res.err)
		case res.resp.Allowed && res.resp.Consumed != nil && res.resp.Consumed.OperationID == res.op:
			admitted = append(admitted, res)
		default:
			expectDeny(t, res.resp, ef.EFBudgetExceeded, review.ReasonPolicy)
		}
	}
	if len(admitted) != budgetLimit {
		for _, res := range results[:3] {
			t.Logf("%s: %+v", res.op, res.resp)
		}
		for _, l := range r.ledgers(t) {
			t.Logf("ledger %s: %+v", l.Name, l.Status)
		}
		t.Fatalf("%d of 64 concurrent Permits admitted; the budget is %d", len(admitted), budgetLimit)
	}
	// The state of the world: exactly 20 Acts record an authority consumed by their operation.
	acts := &v1alpha1.ActList{}
	if err := r.env.Client.List(context.Background(), acts, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	consumed := 0
	for _, a := range acts.Items {
		if a.Spec.Tool == "email_send" && a.Annotations[v1alpha1.AnnotationActPermitOperation] != "" {
			consumed++
			if a.Annotations[kubeledger.AnnotationCharges] == "" {
				t.Errorf("act %s consumed without its budget charges recorded", a.Name)
			}
		}
	}
	if consumed != budgetLimit {
		t.Fatalf("%d Acts record a consumed authority; want %d", consumed, budgetLimit)
	}
	ls := r.ledgers(t)
	if len(ls) != 1 || ls[0].Status.Spent != "20 calls" || ls[0].Status.Remaining != "0 calls" || len(ls[0].Status.Ops) != budgetLimit {
		t.Fatalf("ledgers: %+v", ls)
	}

	// Outcomes: FAILED gives back, EXECUTED and INDETERMINATE keep.
	reportOf := func(res result, st v1alpha1.ActState) {
		t.Helper()
		resp := r.do(t, report(res.act, res.resp.Authority.ID, res.op, st))
		if !resp.Allowed || resp.Reported == nil {
			t.Fatalf("report %s %s: %+v", res.op, st, resp)
		}
	}
	reportOf(admitted[0], v1alpha1.ActStateExecuted)
	reportOf(admitted[1], v1alpha1.ActStateIndeterminate)
	reportOf(admitted[2], v1alpha1.ActStateFailed)
	reportOf(admitted[2], v1alpha1.ActStateFailed) // repeated: gives back nothing more
	if ls := r.ledgers(t); ls[0].Status.Spent != "19 calls" {
		t.Fatalf("after one FAILED outcome: %q", ls[0].Status.Spent)
	}
	extra := r.call(t, "s-extra", "email_send", `{"to":"ops@example.com","body":"one more"}`)
	if resp := r.do(t, permitReq(t, extra, 2, "op-extra")); !resp.Allowed || resp.Consumed == nil {
		t.Fatalf("the call a FAILED outcome gave back: %+v", resp)
	}
	late := r.call(t, "s-late", "email_send", `{"to":"ops@example.com","body":"too many"}`)
	expectDeny(t, r.do(t, permitReq(t, late, 2, "op-late")), ef.EFBudgetExceeded, review.ReasonPolicy)

	// The Review path: over budget, no Lease is issued and the Act records the refusal.
	rev := r.call(t, "s-review", "email_send", `{"to":"ops@example.com","body":"by review"}`)
	expectDeny(t, r.do(t, rev.req), ef.EFBudgetExceeded, review.ReasonPolicy)
	if st := r.actObject(t, rev.cand.Act.CandidateActID).Status; st.Code != string(ef.EFBudgetExceeded) {
		t.Fatalf("the refused review's Act: %+v", st)
	}
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("%d Leases issued over budget", n)
	}
	// A FAILED outcome makes room; the Review issues a Lease, and its Consume charges before
	// the Lease's compare-and-swap: a second Consume of another operation is refused and
	// gives its charge back.
	reportOf(admitted[3], v1alpha1.ActStateFailed)
	rev2 := r.call(t, "s-review-2", "email_send", `{"to":"ops@example.com","body":"by review, again"}`)
	resp := r.do(t, rev2.req)
	if !resp.Allowed || resp.Authority == nil {
		t.Fatalf("review with room in the budget: %+v", resp)
	}
	if got := r.do(t, consumeReq(resp.Authority.ID, "op-consume", rev2.binding(r.ns, 2))); !got.Allowed || got.Consumed == nil {
		t.Fatalf("consume: %+v", got)
	}
	reportOf(admitted[4], v1alpha1.ActStateFailed)
	expectDeny(t, r.do(t, consumeReq(resp.Authority.ID, "op-consume-2", rev2.binding(r.ns, 2))), ef.EF005, review.ReasonAuthority)
	ls = r.ledgers(t)
	if ls[0].Status.Spent != "19 calls" || slices.ContainsFunc(ls[0].Status.Ops, func(o v1alpha1.LedgerOp) bool { return o.ID == "op-consume-2" }) {
		t.Fatalf("after a refused second consume: %q, ops %+v", ls[0].Status.Spent, ls[0].Status.Ops)
	}
}

// TestBudgetCostPerCall measures what a budget adds to a permitted call: the service's API
// requests and writes per Permit, and the latency of a Permit with and without a budget,
// in interleaved rounds against the same API server (docs/performance.md "Budgets in Kubernetes").
func TestBudgetCostPerCall(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.updatePolicy(t, 2, func(p *v1alpha1.ToolPolicy) {
		withBudget(p)
		for i := range p.Spec.Rules {
			if p.Spec.Rules[i].Name == "receipts-by-email" {
				p.Spec.Rules[i].Budgets[0].MaxCalls = ptr.To[int64](1_000_000)
			}
		}
	})
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "notify_ops", 2)
	const rounds = 100
	var with, without []time.Duration
	var reqWith, reqWithout, writesWith, writesWithout int
	permit := func(tool string, i int) (time.Duration, int, int) {
		c := r.call(t, fmt.Sprintf("s-%s-%d", tool, i), tool, fmt.Sprintf(`{"to":"ops@example.com","n":%d}`, i))
		req := permitReq(t, c, 2, fmt.Sprintf("op-%s-%d", tool, i))
		counter.reset()
		t0 := time.Now()
		resp := r.do(t, req)
		d := time.Since(t0)
		if !resp.Allowed || resp.Consumed == nil {
			t.Fatalf("%s %d: %+v", tool, i, resp)
		}
		n := 0
		for _, v := range counter.snapshot() {
			n += v
		}
		return d, n, counter.writes()
	}
	for i := range rounds + 5 {
		// Interleaved, and alternating which goes first, so drift hits both alike.
		order := []string{"email_send", "notify_ops"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, tool := range order {
			d, n, w := permit(tool, i)
			if i < 5 {
				continue // warm-up: the ledger's create, connections
			}
			if tool == "email_send" {
				with, reqWith, writesWith = append(with, d), reqWith+n, writesWith+w
			} else {
				without, reqWithout, writesWithout = append(without, d), reqWithout+n, writesWithout+w
			}
		}
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	t.Logf("Permit without budget: %.2f API requests, %.2f writes per call; p50 %v p99 %v",
		float64(reqWithout)/rounds, float64(writesWithout)/rounds, pct(without, 0.5), pct(without, 0.99))
	t.Logf("Permit with a budget:  %.2f API requests, %.2f writes per call; p50 %v p99 %v",
		float64(reqWith)/rounds, float64(writesWith)/rounds, pct(with, 0.5), pct(with, 0.99))
	// The budget adds one write (the ledger's compare-and-swap) and, uncontended, no read (the
	// background sweep of the namespace's ledgers may add a list).
	if writesWith-writesWithout != rounds || reqWith-reqWithout < rounds || reqWith-reqWithout > rounds+2 {
		t.Fatalf("a budget added %d requests and %d writes over %d calls; want one write each", reqWith-reqWithout, writesWith-writesWithout, rounds)
	}
}

// TestBudgetEscalates: a call over an Escalate budget is not refused but escalated to the
// rule's principals, with a binding moment whose envelope states the budget, what was spent,
// the limit, the window's end and what the call adds; the principal's approval charges the
// call past the limit (recorded unenforced), and a later call over the budget escalates again.
func TestBudgetEscalates(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.updatePolicy(t, 2, func(p *v1alpha1.ToolPolicy) {
		for i := range p.Spec.Rules {
			if p.Spec.Rules[i].Name == "receipts-by-email" {
				p.Spec.Rules[i].Budgets = []v1alpha1.Budget{{Name: "daily", MaxCalls: ptr.To[int64](1), OnExceed: v1alpha1.BudgetOnExceedEscalate,
					Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay}}}
				p.Spec.Rules[i].Evidence.Principals = []string{alice}
				p.Spec.Rules[i].Alternatives = []v1alpha1.Alternative{{Label: "Send it tomorrow", Reasoning: "Keeps within today's budget.",
					Args: runtime.RawExtension{Raw: []byte(`{"body":"deferred"}`)}}}
			}
		}
	})
	aliceC := r.principal(t, alice)
	first := r.call(t, "s-esc", "email_send", `{"to":"ops@example.com","body":"one"}`)
	if resp := r.do(t, permitReq(t, first, 2, "op-first")); !resp.Allowed {
		t.Fatalf("the first call fits: %+v", resp)
	}
	over := r.call(t, "s-esc", "email_send", `{"to":"ops@example.com","body":"two"}`)
	resp := r.do(t, over.req)
	expectDeny(t, resp, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if resp.Escalation == nil || len(resp.Escalation.BindingMoments) != 1 {
		t.Fatalf("escalation: %+v / %+v", resp, resp.Escalation)
	}
	name := resp.Escalation.BindingMoments[0]
	r.waitMoment(t, name)
	m := &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	var env struct {
		Findings []string `json:"findings"`
	}
	if err := json.Unmarshal([]byte(m.Spec.Envelope), &env); err != nil {
		t.Fatal(err)
	}
	want := "Budget daily of rule receipts-by-email (key " + r.agent + "): 1 of 1 calls spent in the window ending "
	if !slices.ContainsFunc(env.Findings, func(f string) bool { return strings.HasPrefix(f, want) }) {
		t.Fatalf("the moment's findings %q lack %q", env.Findings, want)
	}
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	// The escalated act was answered already: its grant is a Lease, charged when consumed.
	granted := r.do(t, over.req)
	if !granted.Allowed || granted.Authority == nil {
		t.Fatalf("the approved call: %+v", granted)
	}
	if got := r.do(t, consumeReq(granted.Authority.ID, "op-over", over.binding(r.ns, 2))); !got.Allowed || got.Consumed == nil {
		t.Fatalf("consume of the approved call: %+v", got)
	}
	ls := r.ledgers(t)
	if len(ls) != 1 || ls[0].Status.Spent != "2 calls" || len(ls[0].Status.Ops) != 2 || ls[0].Status.Ops[1].ID != "op-over" || ls[0].Status.Ops[1].Enforced {
		t.Fatalf("ledger after the approval: %+v", ls)
	}
	third := r.call(t, "s-esc-2", "email_send", `{"to":"ops@example.com","body":"three"}`)
	expectDeny(t, r.do(t, third.req), ef.EFEscalationRequired, review.ReasonBindingMoment)
}

// TestBudgetThroughSidecars: 64 concurrent calls through two of the pod's sidecars (sidecar.New
// and Serve in this process, as `actgate sidecar` runs) against the real authority service and
// a real MCP upstream, one daily budget of 20 calls: the upstream receives exactly 20 calls, its
// own count; every other call is refused EF_BUDGET_EXCEEDED and never sent.
func TestBudgetThroughSidecars(t *testing.T) {
	r := newRig(t, rigOptions{})
	cachedService(t, r, 0)
	up, err := mcptest.Start([]mcptest.Tool{
		{Name: "email_send", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return mcptest.Text("sent"), nil }},
	}, mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	r.updatePolicy(t, 2, func(p *v1alpha1.ToolPolicy) {
		withBudget(p)
		p.Spec.Servers = []v1alpha1.ToolServer{{Name: "payments", URL: up.URL, Protocol: v1alpha1.ServerProtocolMCP}}
	})
	upstreams := map[string]*mcptest.Server{"payments": up}
	gates := []*sidecar.Gate{startSidecar(t, r, upstreams), startSidecar(t, r, upstreams)}

	results := make([]sink.Result, 64)
	errs := make([]error, 64)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			args := fmt.Sprintf(`{"to":"ops@example.com","body":"receipt %d"}`, i)
			c := sink.Call{Session: fmt.Sprintf("s-sidecar-%02d", i), Agent: r.agent, Server: "payments", Destination: up.URL, Tool: "email_send",
				Args: json.RawMessage(args), Provenance: string(act.SourceUser)}
			results[i], errs[i] = gates[i%2].Handle(context.Background(), c, invokeOn(t, up, "email_send", args))
		}()
	}
	close(start)
	wg.Wait()
	invoked := 0
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("call %d: %v", i, errs[i])
		case res.Allowed && res.Invoked:
			invoked++
		case res.Code != ef.EFBudgetExceeded || res.Invoked:
			t.Fatalf("call %d: %+v, want EF_BUDGET_EXCEEDED and not sent", i, res)
		}
	}
	if got := len(up.Calls()); got != budgetLimit || invoked != budgetLimit {
		t.Fatalf("the upstream received %d calls (%d reported invoked); the budget is %d", got, invoked, budgetLimit)
	}
	if ls := r.ledgers(t); len(ls) != 1 || ls[0].Status.Spent != "20 calls" {
		t.Fatalf("ledgers: %+v", ls)
	}
}

// TestBudgetEscalatesThroughSidecar: a machine-permit rule with an Escalate budget of one call,
// through the pod's sidecar. The first call fits and runs; the second would pass the budget, so
// the service puts it to the rule's principal (a binding moment stating the budget) and the
// upstream is not called; once alice approves, the same call runs once, charged over the limit,
// and a retry does not run it again.
func TestBudgetEscalatesThroughSidecar(t *testing.T) {
	r := newRig(t, rigOptions{})
	up, err := mcptest.Start([]mcptest.Tool{
		{Name: "email_send", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return mcptest.Text("sent"), nil }},
	}, mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	r.updatePolicy(t, 2, func(p *v1alpha1.ToolPolicy) {
		for i := range p.Spec.Rules {
			if p.Spec.Rules[i].Name == "receipts-by-email" {
				p.Spec.Rules[i].Budgets = []v1alpha1.Budget{{Name: "daily", MaxCalls: ptr.To[int64](1), OnExceed: v1alpha1.BudgetOnExceedEscalate,
					Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay}}}
				p.Spec.Rules[i].Evidence.Principals = []string{alice}
				p.Spec.Rules[i].Alternatives = []v1alpha1.Alternative{{Label: "Send it tomorrow", Reasoning: "Keeps within today's budget.",
					Args: runtime.RawExtension{Raw: []byte(`{"body":"deferred"}`)}}}
			}
		}
		p.Spec.Servers = []v1alpha1.ToolServer{{Name: "payments", URL: up.URL, Protocol: v1alpha1.ServerProtocolMCP}}
	})
	aliceC := r.principal(t, alice)
	g := startSidecar(t, r, map[string]*mcptest.Server{"payments": up})
	handle := func(session, args string) sink.Result {
		t.Helper()
		c := sink.Call{Session: session, Agent: r.agent, Server: "payments", Destination: up.URL, Tool: "email_send",
			Args: json.RawMessage(args), Provenance: string(act.SourceUser)}
		res, err := g.Handle(context.Background(), c, invokeOn(t, up, "email_send", args))
		if err != nil {
			t.Fatalf("call %s: %v", args, err)
		}
		return res
	}
	if res := handle("s-one", `{"to":"ops@example.com","body":"one"}`); !res.Allowed || !res.Invoked || len(up.Calls()) != 1 {
		t.Fatalf("the first call fits the budget: %+v (upstream %d)", res, len(up.Calls()))
	}
	over := `{"to":"ops@example.com","body":"two"}`
	res := handle("s-two", over)
	if res.Allowed || res.Invoked || res.Code != ef.EFEscalationRequired || res.Moment == nil || len(up.Calls()) != 1 {
		t.Fatalf("the call over the Escalate budget: %+v (upstream %d), want EF_ESCALATION_REQUIRED with a moment, not sent", res, len(up.Calls()))
	}
	name := res.Moment.ID
	r.waitMoment(t, name)
	m := &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Spec.Envelope, "Budget daily of rule receipts-by-email") {
		t.Fatalf("the moment does not state the budget: %s", m.Spec.Envelope)
	}
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)
	if res := handle("s-two", over); !res.Allowed || !res.Invoked || len(up.Calls()) != 2 {
		t.Fatalf("the approved call: %+v (upstream %d), want it run once", res, len(up.Calls()))
	}
	if res := handle("s-two", over); res.Invoked || len(up.Calls()) != 2 {
		t.Fatalf("a retry of the approved call: %+v (upstream %d), want it not run again", res, len(up.Calls()))
	}
	if ls := r.ledgers(t); len(ls) != 1 || ls[0].Status.Spent != "2 calls" {
		t.Fatalf("ledgers after the approval: %+v", ls)
	}
}
