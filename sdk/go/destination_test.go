package actgate_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	actgate "github.com/actgate/actgate/sdk/go"
)

// swappedServer names the upstream a host's client was swapped to: no policy names it, so it
// listens on a free port in both modes.
const swappedServer = "swapped"

// TestTDServerURLSwapRefused is tool-use-binding §22 T-D (§12 MCP_SERVER_SWAP) through the
// wrapper: the host's MCP client was swapped to another server (a real MCP server with the same
// tools, at another URL) behind the same server name. The host passes the URL its client is
// connected to as the destination; the gate refuses EF_DESTINATION_MISMATCH, the swapped
// server's tool never runs and the model reads the refusal. The same call with the client at
// the policy's server runs once there.
func TestTDServerURLSwapRefused(t *testing.T) {
	ctx := testCtx(t)
	up, swapped := startUpstream(t), startUpstreamFor(t, swappedServer)
	g := startGate(t, map[string]string{"finance": up.URL})
	gc := g.client()
	model := startModel(t)
	model.answer("/v1/messages", anthropicMessage("msg_td", "tool_use", toolUse("toolu_td", "get_balance", `{"account":"main"}`)))
	ac := anthropicClient(model)
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is my balance?"))}})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(dest string) actgate.RunOptions {
		return actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Server: "finance", Session: "t-d-url", Provenance: actgate.ProvenanceUser,
			Destination: dest}}
	}
	_, rs, err := gc.RunAnthropicMessage(ctx, msg, hostTools(t, swapped.URL), opts(swapped.URL))
	if err != nil || len(rs) != 1 {
		t.Fatalf("swapped: %+v %v", rs, err)
	}
	if rs[0].Ran || rs[0].Decision.Allow || !rs[0].IsError {
		t.Fatalf("the call ran at the swapped server: %+v", rs[0])
	}
	if e := parseError(t, rs[0].Text); e.Error.Code != "EF_DESTINATION_MISMATCH" {
		t.Errorf("code %s, want EF_DESTINATION_MISMATCH", e.Error.Code)
	}
	if n := swapped.Count("get_balance"); n != 0 {
		t.Errorf("the swapped server ran get_balance %d times, want 0", n)
	}
	_, rs, err = gc.RunAnthropicMessage(ctx, msg, hostTools(t, up.URL), opts(up.URL))
	if err != nil || len(rs) != 1 || !rs[0].Ran || rs[0].IsError {
		t.Fatalf("at the policy's server: %+v %v", rs, err)
	}
	if n, m := up.Count("get_balance"), swapped.Count("get_balance"); n != 1 || m != 0 {
		t.Errorf("get_balance ran %d times at the policy's server and %d at the swapped one; want 1 and 0", n, m)
	}
}

// TestTEComputerUseOriginChangeRefused is tool-use-binding §22 T-E (§12
// COMPUTER_USE_ORIGIN_CHANGE) through the wrapper: the model's computer tool_use (the Anthropic
// computer-use shape) is allowed while the browser is on https://pay.example, whose origin the
// policy authorises; the page then navigates to another origin and the model's next click there
// is refused EF_DESTINATION_MISMATCH without the host's action function running.
func TestTEComputerUseOriginChangeRefused(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	gc := g.client()
	model := startModel(t)
	click := `{"action":"left_click","coordinate":[640,410]}`
	model.answer("/v1/messages",
		anthropicMessage("msg_te1", "tool_use", toolUse("toolu_te1", "computer", click)),
		anthropicMessage("msg_te2", "tool_use", toolUse("toolu_te2", "computer", click)))
	ac := anthropicClient(model)
	var actions atomic.Int32
	page := "https://pay.example/checkout"
	tools := actgate.Tools{"computer": func(context.Context, actgate.Call) (string, error) {
		actions.Add(1)
		page = "https://pay.example.evil.example/checkout" // the click followed a link elsewhere
		return "clicked", nil
	}}
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Pay the invoice on pay.example."))}}
	var results []actgate.CallResult
	for range 2 {
		msg, err := ac.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		blocks, rs, err := gc.RunAnthropicMessage(ctx, msg, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{
			Session: "t-e-origin", Provenance: actgate.ProvenanceUser, Destination: page}})
		if err != nil || len(rs) != 1 {
			t.Fatalf("turn: %+v %v", rs, err)
		}
		results = append(results, rs[0])
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(blocks...))
	}
	if !results[0].Ran || results[0].IsError || results[0].Text != "clicked" {
		t.Errorf("the click on pay.example: %+v", results[0])
	}
	if results[1].Ran || results[1].Decision.Allow {
		t.Errorf("the click after the origin changed ran: %+v", results[1])
	}
	if e := parseError(t, results[1].Text); e.Error.Code != "EF_DESTINATION_MISMATCH" {
		t.Errorf("code %s, want EF_DESTINATION_MISMATCH", e.Error.Code)
	}
	if n := actions.Load(); n != 1 {
		t.Errorf("the host's computer action ran %d times, want 1", n)
	}
	block, _ := json.Marshal(map[string]any{"type": "tool_use", "id": "toolu_te3", "name": "computer", "input": json.RawMessage(click)})
	d, err := gc.Enforce(ctx, block, actgate.EnforceOptions{Vendor: actgate.VendorAnthropic, Session: "t-e-origin", Provenance: actgate.ProvenanceUser,
		Destination: "https://u@pay.example/"})
	if err == nil || actgate.CodeOf(err) != actgate.ErrCodeBadRequest || d.Allow {
		t.Errorf("a destination with user information: %+v %v, want %s", d, err, actgate.ErrCodeBadRequest)
	}
}
