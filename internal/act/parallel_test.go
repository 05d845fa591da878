package act

import (
	"testing"
)

// §9/§27.3: N calls in one message are N acts with N ids; a refused sibling leaves the others.
func TestParallelCallsAreSeparateActs(t *testing.T) {
	cases := []struct {
		name      string
		run       func(MappingContext) ([]Item, error)
		wantIDs   []string
		wantTools []string // "" where the item is refused
		wantErr   []Code
	}{
		{
			name: "§12 PARALLEL_PAY_AND_SEARCH chat message",
			run: func(mc MappingContext) ([]Item, error) {
				return MapOpenAIToolCalls([]byte(`{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"weather\"}"}},
					{"id":"call_2","type":"function","function":{"name":"payout_create","arguments":"{\"amount\":\"150.00\",\"currency\":\"EUR\",\"beneficiary\":\"vendor-441\"}"}},
					{"id":"call_3","type":"function","function":{"name":"email_send","arguments":"{\"to\":"}}]}`), mc)
			},
			wantIDs:   []string{"call_1", "call_2", "call_3"},
			wantTools: []string{"search", "payout_create", ""},
			wantErr:   []Code{"", "", CodeArgumentsInvalid},
		},
		{
			name: "chat bare array",
			run: func(mc MappingContext) ([]Item, error) {
				return MapOpenAIToolCalls([]byte(`[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{}"}},
					{"id":"call_2","type":"custom","custom":{"name":"x","input":"y"}}, 7]`), mc)
			},
			wantIDs:   []string{"call_1", "call_2", ""},
			wantTools: []string{"search", "", ""},
			wantErr:   []Code{"", CodeNotToolCall, CodeShapeInvalid},
		},
		{
			name: "anthropic message with text, thinking and two tool_use blocks",
			run: func(mc MappingContext) ([]Item, error) {
				return MapAnthropicMessage([]byte(`{"role":"assistant","model":"claude-family","stop_reason":"tool_use","content":[
					{"type":"thinking","thinking":"..."},
					{"type":"text","text":"Let me check."},
					{"type":"tool_use","id":"toolu_01","name":"search","input":{"q":"x"}},
					{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"y"}},
					{"type":"tool_use","id":"toolu_02","name":"email_send","input":{"to":"alice@example.com"}}]}`), mc)
			},
			wantIDs:   []string{"toolu_01", "toolu_02"},
			wantTools: []string{"search", "email_send"},
			wantErr:   []Code{"", ""},
		},
		{
			name: "anthropic content array, truncated at max_tokens",
			run: func(mc MappingContext) ([]Item, error) {
				return MapAnthropicMessage([]byte(`{"role":"assistant","stop_reason":"max_tokens","content":[
					{"type":"tool_use","id":"toolu_01","name":"search","input":{"q":"x"}},
					{"type":"tool_use","id":"toolu_02","name":"email_send","input":{"to":"al"}}]}`), mc)
			},
			wantIDs:   []string{"toolu_01", "toolu_02"},
			wantTools: []string{"search", ""},
			wantErr:   []Code{"", CodePartialBlock},
		},
		{
			name: "anthropic message still streaming (stop_reason null)",
			run: func(mc MappingContext) ([]Item, error) {
				return MapAnthropicMessage([]byte(`{"role":"assistant","stop_reason":null,"content":[
					{"type":"tool_use","id":"toolu_01","name":"search","input":{"q":"x"}},
					{"type":"text","text":"and"},
					{"type":"tool_use","id":"toolu_02","name":"email_send","input":{}}]}`), mc)
			},
			wantIDs:   []string{"toolu_01", "toolu_02"},
			wantTools: []string{"", ""},
			wantErr:   []Code{CodePartialBlock, CodePartialBlock},
		},
		{
			name: "anthropic duplicate tool_use ids",
			run: func(mc MappingContext) ([]Item, error) {
				return MapAnthropicMessage([]byte(`[
					{"type":"tool_use","id":"toolu_01","name":"search","input":{}},
					{"type":"tool_use","id":"toolu_01","name":"payout_create","input":{}},
					{"type":"tool_use","id":"toolu_02","name":"search","input":{}}]`), mc)
			},
			wantIDs:   []string{"toolu_01", "toolu_01", "toolu_02"},
			wantTools: []string{"", "", "search"},
			wantErr:   []Code{CodeDuplicateVendorID, CodeDuplicateVendorID, ""},
		},
		{
			name: "responses output with reasoning, a call, a vendor-run search and a computer_call",
			run: func(mc MappingContext) ([]Item, error) {
				return MapResponsesOutput([]byte(`{"id":"resp_1","model":"gpt-family","status":"completed","output":[
					{"type":"reasoning","id":"rs_1","summary":[]},
					{"type":"function_call","id":"fc_1","call_id":"call_1","name":"search","arguments":"{}","status":"completed"},
					{"type":"web_search_call","id":"ws_1","status":"completed"},
					{"type":"function_call","id":"fc_2","call_id":"call_2","name":"payout_create","arguments":"{\"amount\":1}"},
					{"type":"computer_call","id":"cu_1","call_id":"call_3","action":{"type":"click","x":1,"y":2}}]}`), mc)
			},
			wantIDs:   []string{"call_1", "call_2", "call_3"},
			wantTools: []string{"search", "payout_create", ""},
			wantErr:   []Code{"", "", CodeNotToolCall},
		},
		{
			name: "incomplete response needs completed items",
			run: func(mc MappingContext) ([]Item, error) {
				return MapResponsesOutput([]byte(`{"status":"incomplete","output":[
					{"type":"function_call","call_id":"call_1","name":"search","arguments":"{}","status":"completed"},
					{"type":"function_call","call_id":"call_2","name":"payout_create","arguments":"{\"amount\":1}"}]}`), mc)
			},
			wantIDs:   []string{"call_1", "call_2"},
			wantTools: []string{"search", ""},
			wantErr:   []Code{"", CodePartialBlock},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, err := tc.run(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != len(tc.wantIDs) {
				t.Fatalf("%d items, want %d", len(items), len(tc.wantIDs))
			}
			actIDs := map[string]bool{}
			for i, it := range items {
				if it.VendorID != tc.wantIDs[i] {
					t.Errorf("item %d vendor id %q, want %q", i, it.VendorID, tc.wantIDs[i])
				}
				if tc.wantErr[i] != "" {
					noCandidateOnError(t, it.Candidate, it.Err)
					wantCode(t, it.Err, tc.wantErr[i])
					continue
				}
				if it.Err != nil {
					t.Fatalf("item %d: %v", i, it.Err)
				}
				checkAccepted(t, it.Candidate)
				if got := it.Candidate.Act.Tool.ToolID; got != tc.wantTools[i] {
					t.Errorf("item %d tool %q, want %q", i, got, tc.wantTools[i])
				}
				if actIDs[it.Candidate.Act.CandidateActID] {
					t.Fatal("two calls share an act id")
				}
				actIDs[it.Candidate.Act.CandidateActID] = true
			}
		})
	}
}

func TestParallelClassesAreIndependent(t *testing.T) {
	// §9: "If one call is FINANCIAL and one is INFORMATIONAL, only the FINANCIAL call escalates."
	items, err := MapOpenAIToolCalls([]byte(`[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{}"}},
		{"id":"call_2","type":"function","function":{"name":"payout_create","arguments":"{}"}}]`), testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Candidate.Act.ConsequenceClass != ClassInformational || items[1].Candidate.Act.ConsequenceClass != ClassFinancial {
		t.Fatalf("classes %s, %s", items[0].Candidate.Act.ConsequenceClass, items[1].Candidate.Act.ConsequenceClass)
	}
}

func TestMessageModelFillsAgentModelID(t *testing.T) {
	items, err := MapAnthropicMessage([]byte(`{"role":"assistant","model":"claude-family","content":[{"type":"tool_use","id":"toolu_1","name":"search","input":{}}]}`), testCtx(t))
	if err != nil || items[0].Err != nil {
		t.Fatal(err, items)
	}
	if got := items[0].Candidate.Act.Agent.ModelID; got != "claude-family" {
		t.Fatalf("model_id %q (§11: model name from the request)", got)
	}
	mc := testCtx(t)
	mc.Agent.ModelID = "pinned-by-host"
	items, _ = MapAnthropicMessage([]byte(`{"role":"assistant","model":"claude-family","content":[{"type":"tool_use","id":"toolu_1","name":"search","input":{}}]}`), mc)
	if got := items[0].Candidate.Act.Agent.ModelID; got != "pinned-by-host" {
		t.Fatalf("host's model_id overridden by the message: %q", got)
	}
}

func TestMessageBadShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(MappingContext) ([]Item, error)
		code Code
	}{
		{"anthropic user message", func(mc MappingContext) ([]Item, error) {
			return MapAnthropicMessage([]byte(`{"role":"user","content":[]}`), mc)
		}, CodeShapeInvalid},
		{"anthropic no content", func(mc MappingContext) ([]Item, error) {
			return MapAnthropicMessage([]byte(`{"role":"assistant"}`), mc)
		}, CodeShapeInvalid},
		{"anthropic content object", func(mc MappingContext) ([]Item, error) {
			return MapAnthropicMessage([]byte(`{"role":"assistant","content":{}}`), mc)
		}, CodeShapeInvalid},
		{"anthropic scalar", func(mc MappingContext) ([]Item, error) {
			return MapAnthropicMessage([]byte(`true`), mc)
		}, CodeShapeInvalid},
		{"chat no tool_calls", func(mc MappingContext) ([]Item, error) {
			return MapOpenAIToolCalls([]byte(`{"role":"assistant","content":"hi"}`), mc)
		}, CodeShapeInvalid},
		{"chat tool role", func(mc MappingContext) ([]Item, error) {
			return MapOpenAIToolCalls([]byte(`{"role":"tool","tool_calls":[]}`), mc)
		}, CodeShapeInvalid},
		{"chat invalid json", func(mc MappingContext) ([]Item, error) {
			return MapOpenAIToolCalls([]byte(`{"tool_calls":[`), mc)
		}, CodeInputInvalid},
		{"responses no output", func(mc MappingContext) ([]Item, error) {
			return MapResponsesOutput([]byte(`{"status":"completed"}`), mc)
		}, CodeShapeInvalid},
		{"responses status number", func(mc MappingContext) ([]Item, error) {
			return MapResponsesOutput([]byte(`{"status":1,"output":[]}`), mc)
		}, CodeShapeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := tc.run(testCtx(t))
			if items != nil {
				t.Fatal("items with a message-level error")
			}
			wantCode(t, err, tc.code)
		})
	}
}
