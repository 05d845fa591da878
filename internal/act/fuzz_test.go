package act

import (
	"testing"
)

// The fuzz targets check the invariants of every parser of untrusted bytes here: no panic; an
// error never comes with an act and always carries a code; an accepted act validates, survives
// a round trip, and its arguments digest equals the recomputation from its own canonical
// arguments (checkAccepted).

func fuzzSingle(f *testing.F, seeds []string, mapIt func([]byte, MappingContext) (*Candidate, error), mc func(testing.TB) MappingContext) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := mapIt(in, mc(t))
		noCandidateOnError(t, c, err)
		if err == nil {
			checkAccepted(t, c)
		}
	})
}

func fuzzItems(t *testing.T, items []Item, err error) {
	if err != nil {
		if items != nil {
			t.Fatal("items with an error")
		}
		noCandidateOnError(t, nil, err)
		return
	}
	ids := map[string]bool{}
	for _, it := range items {
		if (it.Candidate == nil) == (it.Err == nil) {
			t.Fatal("item must hold exactly one of candidate and error")
		}
		noCandidateOnError(t, it.Candidate, it.Err)
		if it.Candidate != nil {
			checkAccepted(t, it.Candidate)
			if ids[it.Candidate.Act.CandidateActID] {
				t.Fatal("two items share an act id")
			}
			ids[it.Candidate.Act.CandidateActID] = true
			if it.Candidate.VendorID != it.VendorID {
				t.Fatal("item vendor id differs from its candidate's")
			}
		}
	}
}

func FuzzAnthropicToolUse(f *testing.F) {
	fuzzSingle(f, []string{
		`{"type":"tool_use","id":"toolu_01A","name":"email_send","input":{"to":"alice@example.com","subject":"Invoice","body":"..."}}`,
		`{"type":"tool_use","id":"toolu_02","name":"computer","input":{"action":"left_click","coordinate":[640,400]}}`,
		`{"type":"tool_use","id":"toolu_03","name":"ledger.post","input":{"amount":0,"rate":1.5,"count":-7}}`,
		`{"type":"tool_use","id":"toolu_1","name":"search","name":"payout","input":{}}`,
		`{"type":"tool_use","id":"toolu_1","name":"search","input":"{\"q\":"}`,
		`{"type":"text","text":"hi"}`,
		`[]`, `{`, ``,
	}, MapAnthropicToolUse, testCtx)
}

func FuzzAnthropicMessage(f *testing.F) {
	for _, s := range []string{
		`{"role":"assistant","model":"claude-family","stop_reason":"tool_use","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"toolu_01","name":"search","input":{"q":"x"}},{"type":"tool_use","id":"toolu_02","name":"email_send","input":{"to":"a"}}]}`,
		`{"role":"assistant","stop_reason":"max_tokens","content":[{"type":"tool_use","id":"toolu_01","name":"search","input":{}}]}`,
		`[{"type":"tool_use","id":"toolu_01","name":"search","input":{}},{"type":"tool_use","id":"toolu_01","name":"pay","input":{}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		items, err := MapAnthropicMessage(in, testCtx(t))
		fuzzItems(t, items, err)
	})
}

func FuzzOpenAIToolCalls(f *testing.F) {
	for _, s := range []string{
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"weather\"}"}},{"id":"call_2","type":"function","function":{"name":"payout_create","arguments":"{\"amount\":\"150.00\",\"currency\":\"EUR\",\"beneficiary\":\"vendor-441\"}"}}]}`,
		`[{"id":"call_8f3","type":"function","function":{"name":"payout_create","arguments":"{\"amount\":\"150.00\",\"curr"}}]`,
		`[{"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"n\":1e400}"}},{"id":"call_1","type":"custom","custom":{}}]`,
		`[{"id":"call_1","function":{"name":"a","arguments":"{\"b\":[1,2,{\"c\":null}]}"}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		items, err := MapOpenAIToolCalls(in, testCtx(t))
		fuzzItems(t, items, err)
		// The single-call adapter must hold the same invariants on the same bytes.
		c, err := MapOpenAIToolCall(in, testCtx(t))
		noCandidateOnError(t, c, err)
		if err == nil {
			checkAccepted(t, c)
		}
	})
}

func FuzzResponsesFunctionCall(f *testing.F) {
	for _, s := range []string{
		`{"type":"function_call","id":"fc_1","call_id":"call_8f3","name":"payout_create","arguments":"{\"amount\":\"150.00\"}","status":"completed"}`,
		`{"type":"function_call","call_id":"call_1","name":"search","arguments":"{}","status":"in_progress"}`,
		`{"status":"incomplete","model":"m","output":[{"type":"function_call","call_id":"call_1","name":"search","arguments":"{}"},{"type":"computer_call","call_id":"c"}]}`,
		`[{"type":"reasoning"},{"type":"function_call","call_id":"call_1","name":"s","arguments":"{\"a\":1.5}"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := MapResponsesFunctionCall(in, testCtx(t))
		noCandidateOnError(t, c, err)
		if err == nil {
			checkAccepted(t, c)
		}
		items, err := MapResponsesOutput(in, testCtx(t))
		fuzzItems(t, items, err)
	})
}

func FuzzMCPToolsCall(f *testing.F) {
	fuzzSingle(f, []string{
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod","ref":"main"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":-1e2,"method":"tools/call","params":{"name":"x","arguments":{"deep":[[[[1]]]]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"s"}}`,
	}, MapMCPToolsCall, mcpCtx)
}

func FuzzParseCandidateAct(f *testing.F) {
	f.Add([]byte(`{"version":"1.0"}`))
	f.Add([]byte(`{"version":"1.0","object_type":"agent_candidate_act","candidate_act_id":"act-00000000000000000000000000000000-00000000000000000000000000000000","act_type":"TOOL_CALL","created_at":"2026-09-01T12:00:00Z","expires_at":"2026-09-01T12:05:00Z","initiating_principal":{"principal_id":"alice"},"agent":{"agent_id":"a"},"tool":{"tool_id":"t","function_id":"t"},"purpose":{"purpose_id":"p"},"arguments_digest":{"algorithm":"SHA-256","canonicalization":"JCS","material":"EP-TOOL-CALL-BINDING-v1","value":"sha256:0000000000000000000000000000000000000000000000000000000000000000"},"consequence_class":"OTHER","policy_state":{"policy_epoch":0,"authority_epoch":0,"revocation_epoch":0},"freshness":{"nonce":"C0FFEE11DEADBEEF","session_id":"s"},"finality_sink":{"sink_id":"k","sink_type":"TOOL_DISPATCH"}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := ParseCandidateAct(in)
		if err != nil {
			if a != nil {
				t.Fatal("act with an error")
			}
			if _, ok := CodeOf(err); !ok {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("parsed act does not validate: %v", err)
		}
		b, err := a.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseCandidateAct(b)
		if err != nil {
			t.Fatalf("canonical form refused: %v", err)
		}
		if d1, _ := a.Digest(); d1 != mustDigest(t, back) {
			t.Fatal("round trip changed the act")
		}
	})
}

func mustDigest(t *testing.T, a *AgentCandidateAct) string {
	d, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
