package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil/rig"
)

// T-A (tool-use-binding §22; §12 INJECTED_EMAIL_SEND): emit email_send to an address not in
// the user turn; expect invoke=false.
func TestTA_InjectedRecipientNotInvoked(t *testing.T) {
	g := newGate(t)
	cs := agent(t, g.Endpoint("tools"))
	for _, prov := range []string{"retrieval", "tool_output", ""} {
		t.Run("provenance "+orUnknown(prov), func(t *testing.T) {
			r := call(t, cs, "email_send", `{"to":"attacker@ex.com","body":"the statement"}`, prov)
			if code(r) != string(ef.EFInstructionProvenanceFailure) {
				t.Fatalf("code %q, want %s", code(r), ef.EFInstructionProvenanceFailure)
			}
			invokedFalse(t, r)
		})
	}
	if n := g.Up.Tools.Count("email_send"); n != 0 {
		t.Fatalf("email_send reached the upstream %d times", n)
	}
	// The rule refuses the provenance, not the tool: the user's own instruction runs.
	if r := call(t, cs, "email_send", `{"to":"bob@example.com","body":"the statement"}`, "user"); r.IsError {
		t.Fatalf("user-instructed email refused: %+v", r.Meta)
	}
	if n := g.Up.Tools.Count("email_send"); n != 1 {
		t.Fatalf("email_send ran %d times, want 1", n)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// T-B (§22; §9, §12 PARALLEL_PAY_AND_SEARCH): two calls in parallel, search and payout; the
// search runs, the payout escalates (and one above the policy's envelope is denied); one
// allow never covers a sibling.
func TestTB_ParallelSearchAndPayout(t *testing.T) {
	g := newGate(t)
	tools := agent(t, g.Endpoint("tools"))
	pay := agent(t, g.Endpoint("pay"))
	var search, payout, over *mcp.CallToolResult
	parallel(
		func() { search = call(t, tools, "search", `{"q":"invoice 42"}`, "user") },
		func() { payout = call(t, pay, "payout_create", `{"to":"acme","amount":2500}`, "user") },
		func() { over = call(t, pay, "payout_create", `{"to":"acme","amount":250000}`, "user") },
	)
	if search.IsError || g.Up.Tools.Count("search") != 1 {
		t.Fatalf("search: %+v (ran %d)", search.Meta, g.Up.Tools.Count("search"))
	}
	if code(payout) != string(ef.EFEscalationRequired) || payout.Meta[mcpproxy.MetaMomentID] == nil {
		t.Fatalf("payout: %+v", payout.Meta)
	}
	invokedFalse(t, payout)
	if code(over) != string(ef.EFPolicyDenied) {
		t.Fatalf("payout above the cap: %+v", over.Meta)
	}
	invokedFalse(t, over)
	if n := g.Up.Pay.Count("payout_create"); n != 0 {
		t.Fatalf("payout_create ran %d times", n)
	}
}

// T-C (§22; §16 MUST 4, §9): replay the same authority on a second invoke; expect deny. The
// authorised payout is sent five times at once, again in its session and again from another:
// the upstream runs it once.
func TestTC_AuthorityIsSingleUse(t *testing.T) {
	g := newGate(t)
	pay, replays := rig.AgentReplays(t, "conformance-agent", g.Endpoint("pay"))
	args := `{"to":"acme","amount":2500}`
	g.resolveOption(call(t, pay, "payout_create", args, "user"), 0)

	results := make([]*mcp.CallToolResult, 5)
	var fns []func()
	for i := range results {
		fns = append(fns, func() { results[i] = call(t, pay, "payout_create", args, "user") })
	}
	parallel(fns...)
	if n := g.Up.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("the authorised payout ran %d times, want exactly 1", n)
	}
	ran := 0
	var first *mcp.CallToolResult
	for _, r := range results {
		switch {
		case !r.IsError:
			ran++ // the one that ran, or a retry answered with its recorded result
			if first == nil {
				first = r
			} else if err := rig.SameResult(first, r); err != nil {
				t.Errorf("two answers of the one payout: %v", err)
			}
		case code(r) == string(ef.EFIndeterminate):
			invokedFalse(t, r) // refused while the one dispatch was in flight
		default:
			t.Errorf("unexpected result %+v", r.Meta)
		}
	}
	if ran == 0 {
		t.Error("no call returned the payout's result")
	}
	// Once more in the session: the recorded result, not a second invoke.
	r, replayed := rig.Replayed(t, pay, replays, "payout_create", args, "user")
	if !replayed || r.IsError {
		t.Errorf("retry in the session: replay marked %v, %+v", replayed, r.Meta)
	}
	if err := rig.SameResult(first, r); first != nil && err != nil {
		t.Errorf("retry in the session: %v", err)
	}
	// From another session the authority is spent: a new binding moment is needed.
	r = call(t, agent(t, g.Endpoint("pay")), "payout_create", args, "user")
	if code(r) != string(ef.EFEscalationRequired) {
		t.Errorf("replay from another session: %+v", r.Meta)
	}
	invokedFalse(t, r)
	if n := g.Up.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("payout ran %d times after the replays, want 1", n)
	}
}

// T-D (§22; §8, §12 MCP_SERVER_SWAP): an MCP call whose server URL was swapped; expect a
// destination deny, before and after a human authorised the call at the real server.
func TestTD_SwappedServer(t *testing.T) {
	g := newGate(t)
	attacker := startUpstream(t, "attacker", "payout_create", "search")
	swappedPay := agent(t, g.Swapped("pay", attacker.URL))
	swappedTools := agent(t, g.Swapped("tools", attacker.URL))
	args := `{"to":"acme","amount":2500}`

	// A hot-path read sent to a swapped server is refused too: destination is checked first.
	if r := call(t, swappedTools, "search", `{"q":"x"}`, "user"); code(r) != string(ef.EFDestinationMismatch) {
		t.Fatalf("search to a swapped server: %+v", r.Meta)
	}
	if r := call(t, swappedPay, "payout_create", args, "user"); code(r) != string(ef.EFDestinationMismatch) {
		t.Fatalf("payout to a swapped server: %+v", r.Meta)
	}
	// Authorised at the real server, the same call sent to the swapped one is still refused.
	pay := agent(t, g.Endpoint("pay"))
	g.resolveOption(call(t, pay, "payout_create", args, "user"), 0)
	r := call(t, swappedPay, "payout_create", args, "user")
	if code(r) != string(ef.EFDestinationMismatch) {
		t.Fatalf("authorised payout to a swapped server: %+v", r.Meta)
	}
	invokedFalse(t, r)
	if n := attacker.Count(""); n != 0 {
		t.Fatalf("the swapped server was called %d times", n)
	}
	// The authority was not spent by the refused attempt.
	if r := call(t, pay, "payout_create", args, "user"); r.IsError {
		t.Fatalf("the authorised payout at the real server: %+v", r.Meta)
	}
	if n := g.Up.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("real server ran the payout %d times, want 1", n)
	}
	// The proxy presented the upstream's credential to the real server only.
	for _, a := range attacker.Authorizations() {
		if strings.Contains(a, payToken) {
			t.Fatal("the upstream credential was presented to the swapped server")
		}
	}
}

// T-E (§22; §12 COMPUTER_USE_ORIGIN_CHANGE; latest draft: "Origin change MUST invalidate prior
// authority"): a computer-use submit authorised on one origin is refused after the origin
// changes.
func TestTE_OriginChange(t *testing.T) {
	g := newGate(t)
	evil := startUpstream(t, "evil-checkout", "computer_submit")
	browser := agent(t, g.Endpoint("browser"))
	args := `{"form":"checkout","fields":{"card":"tok_visa"},"submit":true}`
	g.resolveOption(call(t, browser, "computer_submit", args, "user"), 0)

	for name, endpoint := range map[string]string{
		"another origin": g.Swapped("browser", evil.URL),
		// The same server reached under another spelling is another origin: origins are not
		// folded (no DNS), so the authority does not follow it.
		"another spelling": g.Swapped("browser", strings.Replace(g.Up.Browser.URL, "127.0.0.1", "localhost", 1)),
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, agent(t, endpoint), "computer_submit", args, "user")
			if code(r) != string(ef.EFDestinationMismatch) {
				t.Fatalf("submit after the origin changed: %+v", r.Meta)
			}
			invokedFalse(t, r)
		})
	}
	if evil.Count("") != 0 || g.Up.Browser.Count("") != 0 {
		t.Fatalf("submits ran: evil %d, original %d", evil.Count(""), g.Up.Browser.Count(""))
	}
	if r := call(t, browser, "computer_submit", args, "user"); r.IsError {
		t.Fatalf("the submit on the authorised origin: %+v", r.Meta)
	}
	if n := g.Up.Browser.Count("computer_submit"); n != 1 {
		t.Fatalf("submit ran %d times, want 1", n)
	}
}

// TestPassThrough: discovery and every method other than tools/call reach the upstream
// unchanged; tools/list gains only the virtual tool and the advisory annotation, and never
// issues authority (§8).
func TestPassThrough(t *testing.T) {
	g := newGate(t)
	ctx := context.Background()
	gated := agent(t, g.Endpoint("pay"))
	direct := agent(t, g.Up.Pay.URL)
	for _, tc := range []struct {
		name string
		run  func(*mcp.ClientSession) (any, error)
	}{
		{"resources/list", func(cs *mcp.ClientSession) (any, error) { return cs.ListResources(ctx, nil) }},
		{"resources/read", func(cs *mcp.ClientSession) (any, error) {
			return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcptest://readme"})
		}},
		{"prompts/list", func(cs *mcp.ClientSession) (any, error) { return cs.ListPrompts(ctx, nil) }},
		{"prompts/get", func(cs *mcp.ClientSession) (any, error) {
			return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "the principal"}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.run(direct)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.run(gated)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(got, want) {
				t.Fatalf("through the gate %s, directly %s", js(got), js(want))
			}
		})
	}
	t.Run("tools/list", func(t *testing.T) {
		want, err := direct.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gated.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range got.Tools {
			flag, _ := tl.Meta[mcpproxy.AnnotationEmitsBindingMoment].(bool)
			names = append(names, fmt.Sprintf("%s:%v", tl.Name, flag))
		}
		if len(want.Tools) != 1 || fmt.Sprint(names) != "[payout_create:true "+sink.RequestBindingMomentTool+":true]" {
			t.Fatalf("tools %v", names)
		}
	})
	if n := g.Up.Pay.Count(""); n != 0 {
		t.Fatalf("discovery invoked %d tools", n)
	}
	if ms, err := g.Sink.Moments(ctx, sink.MomentFilter{}); err != nil || len(ms) != 0 {
		t.Fatalf("discovery registered moments: %v %v", ms, err)
	}
}

func sameJSON(a, b any) bool {
	var x, y any
	_ = json.Unmarshal([]byte(js(a)), &x)
	_ = json.Unmarshal([]byte(js(b)), &y)
	return reflect.DeepEqual(x, y)
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
