package act

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// Every adapter must produce the EP-TOOL-CALL-BINDING-v1 digest for the same logical call
// (testdata/README.md); docs/architecture.md "The action an option authorises".
func TestConformanceVectorsEveryAdapter(t *testing.T) {
	for _, v := range loadBindingVectors(t) {
		// A differently-serialized but equivalent argument text (§7: two equivalent JSON strings
		// MUST NOT produce two different authorities).
		var anyArgs any
		if err := json.Unmarshal(v.Args, &anyArgs); err != nil {
			t.Fatal(err)
		}
		pretty, _ := json.MarshalIndent(anyArgs, "", "   ")
		shapes := map[string]func() (*Candidate, error){
			"anthropic": func() (*Candidate, error) {
				return MapAnthropicToolUse(mustJSON(t, map[string]any{"type": "tool_use", "id": "toolu_01A", "name": v.Tool, "input": json.RawMessage(pretty)}), testCtx(t))
			},
			"openai-chat": func() (*Candidate, error) {
				return MapOpenAIToolCall(mustJSON(t, map[string]any{"id": "call_8f3", "type": "function", "function": map[string]any{"name": v.Tool, "arguments": string(pretty)}}), testCtx(t))
			},
			"openai-responses": func() (*Candidate, error) {
				return MapResponsesFunctionCall(mustJSON(t, map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_8f3", "name": v.Tool, "arguments": string(v.Args), "status": "completed"}), testCtx(t))
			},
			"mcp": func() (*Candidate, error) {
				return MapMCPToolsCall(mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": map[string]any{"name": v.Tool, "arguments": json.RawMessage(pretty)}}), mcpCtx(t))
			},
		}
		for name, mapIt := range shapes {
			t.Run(v.ID+"/"+name, func(t *testing.T) {
				c, err := mapIt()
				if err != nil {
					t.Fatal(err)
				}
				checkAccepted(t, c)
				if got := c.ActionDigest(); got != v.digest() {
					t.Fatalf("action digest %s, vector expects %s", got, v.digest())
				}
				// numeric-forms holds 1.5: outside the strict profile, so not bindable to a human.
				wantStrict := v.ID != "numeric-forms"
				if c.Strict() != wantStrict {
					t.Fatalf("Strict() = %v, want %v", c.Strict(), wantStrict)
				}
			})
		}
	}
}

// The informative source shapes of tool-use-binding §6, §7, §8, mapped per the rules there
// and in §11.
func TestSpecSourceShapes(t *testing.T) {
	type want struct {
		vendorID, tool string
		actType        ActType
		class          ConsequenceClass
		proto          ToolProtocol
		sink           SinkType
		endpoint, dest string
	}
	cases := []struct {
		name string
		run  func(MappingContext) (*Candidate, error)
		ctx  func(testing.TB) MappingContext
		want want
	}{
		{
			name: "§6 anthropic tool_use email_send",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_01A","name":"email_send","input":{"to":"alice@example.com","subject":"Invoice","body":"..."}}`), mc)
			},
			ctx:  testCtx,
			want: want{"toolu_01A", "email_send", ActToolCall, ClassCommunication, ProtocolLocalFunction, SinkToolDispatch, "", ""},
		},
		{
			name: "§7 openai tool_calls payout_create",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapOpenAIToolCall([]byte(`{"id":"call_8f3","type":"function","function":{"name":"payout_create","arguments":"{\"amount\":\"150.00\",\"currency\":\"EUR\",\"beneficiary\":\"vendor-441\"}"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"call_8f3", "payout_create", ActToolCall, ClassFinancial, ProtocolLocalFunction, SinkToolDispatch, "", ""},
		},
		{
			name: "§7 responses function_call payout_create",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapResponsesFunctionCall([]byte(`{"type":"function_call","id":"fc_9","call_id":"call_8f3","name":"payout_create","arguments":"{\"amount\":\"150.00\",\"currency\":\"EUR\",\"beneficiary\":\"vendor-441\"}","status":"completed"}`), mc)
			},
			ctx:  testCtx,
			want: want{"call_8f3", "payout_create", ActToolCall, ClassFinancial, ProtocolLocalFunction, SinkToolDispatch, "", ""},
		},
		{
			name: "§8 mcp tools/call repo_deploy",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod","ref":"main"}}}`), mc)
			},
			ctx:  mcpCtx,
			want: want{"4", "repo_deploy", ActToolCall, ClassNetworkControl, ProtocolMCP, SinkToolDispatch, "mcp://git.example/prod", "mcp://git.example/prod"},
		},
		{
			name: "§8 mcp server named but no URL",
			run: func(mc MappingContext) (*Candidate, error) {
				mc.Server = ServerIdentity{Name: "git-prod"}
				return MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{"name":"repo_deploy"}}`), mc)
			},
			ctx:  testCtx,
			want: want{`"r-1"`, "repo_deploy", ActToolCall, ClassNetworkControl, ProtocolMCP, SinkToolDispatch, "git-prod", "git-prod"},
		},
		{
			name: "§6/§11 computer-use click",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_02","name":"computer","input":{"action":"left_click","coordinate":[640,400]}}`), mc)
			},
			ctx:  testCtx,
			want: want{"toolu_02", "computer", ActComputerUse, ClassCommunication, ProtocolLocalFunction, SinkBrowserController, "", ""},
		},
		{
			name: "computer-use screenshot is DATA_DISCLOSURE",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_03","name":"computer","input":{"action":"screenshot"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"toolu_03", "computer", ActComputerUse, ClassDataDisclosure, ProtocolLocalFunction, SinkBrowserController, "", ""},
		},
		{
			name: "versioned computer tool name",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_04","name":"computer_20250124","input":{"action":"type","text":"hi"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"toolu_04", "computer_20250124", ActComputerUse, ClassCommunication, ProtocolLocalFunction, SinkBrowserController, "", ""},
		},
		{
			name: "browser_navigate is a BROWSER_ACTION",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapOpenAIToolCall([]byte(`{"id":"call_b","type":"function","function":{"name":"browser_navigate","arguments":"{\"url\":\"https://pay.example/checkout\"}"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"call_b", "browser_navigate", ActBrowserAction, ClassCommunication, ProtocolLocalFunction, SinkBrowserController, "", ""},
		},
		{
			name: "§21 memory tool is MEMORY_WRITE",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_05","name":"memory","input":{"command":"create","path":"/memories/x","file_text":"y"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"toolu_05", "memory", ActMemoryWrite, ClassPersistentStateChange, ProtocolLocalFunction, SinkToolDispatch, "", ""},
		},
		{
			name: "bash is a SHELL_ACTION",
			run: func(mc MappingContext) (*Candidate, error) {
				return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_06","name":"bash","input":{"command":"ls"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"toolu_06", "bash", ActShellAction, ClassPersistentStateChange, ProtocolLocalFunction, SinkToolDispatch, "", ""},
		},
		{
			name: "§7 GPT Action over HTTP is an API_REQUEST to the Action server",
			run: func(mc MappingContext) (*Candidate, error) {
				mc.ToolProtocol = ProtocolHTTPAPI
				mc.Destination = "https://api.customer.example"
				return MapOpenAIToolCall([]byte(`{"id":"call_h","type":"function","function":{"name":"getOrders","arguments":"{}"}}`), mc)
			},
			ctx:  testCtx,
			want: want{"call_h", "getOrders", ActAPIRequest, ClassPersistentStateChange, ProtocolHTTPAPI, SinkToolDispatch, "", "https://api.customer.example"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mc := tc.ctx(t)
			c, err := tc.run(mc)
			if err != nil {
				t.Fatal(err)
			}
			checkAccepted(t, c)
			a := c.Act
			got := want{c.VendorID, a.Tool.ToolID, a.ActType, a.ConsequenceClass, a.Tool.ToolProtocol, a.FinalitySink.SinkType, a.Tool.ToolEndpoint, ""}
			if a.Destination != nil {
				got.dest = a.Destination.DestinationID
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if a.Tool.FunctionID != a.Tool.ToolID {
				t.Fatal("function_id must be the name (§6, §7)")
			}
			if a.CandidateActID == c.VendorID {
				t.Fatal("the vendor id must not be the act id (§6, §11)")
			}
			if err := mc.IDs.CheckAct(&a, mc.SessionID); err != nil {
				t.Fatalf("act id not bound to its session: %v", err)
			}
			if !a.CreatedAt.Equal(testNow) || !a.ExpiresAt.Equal(testNow.Add(mc.TTL)) {
				t.Fatalf("times %v..%v", a.CreatedAt, a.ExpiresAt)
			}
			if a.InstructionProvenance == nil || a.InstructionProvenance.SourceType != SourceUnknown {
				t.Fatal("provenance must default to unknown")
			}
			if a.PolicyState != mc.PolicyState || a.FinalitySink.SinkID != mc.SinkID || a.Freshness.SessionID != mc.SessionID {
				t.Fatal("context not carried into the act")
			}
		})
	}
}

// §7: the same arguments in another order or spacing give one digest; another value or
// another tool gives another.
func TestEquivalentArgumentsOneDigest(t *testing.T) {
	mc := testCtx(t) // one issuer: its seeded source gives each act a fresh id
	call := func(name, args string) *Candidate {
		t.Helper()
		c, err := MapOpenAIToolCall(mustJSON(t, map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args}}), mc)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := call("payout_create", `{"amount":100,"currency":"USD"}`)
	b := call("payout_create", "{ \"currency\" : \"USD\",\n \"amount\": 1e2 }")
	if a.ActionDigest() != b.ActionDigest() {
		t.Fatal("equivalent JSON strings gave different digests")
	}
	if a.Act.CandidateActID == b.Act.CandidateActID {
		t.Fatal("two acts share an id")
	}
	if err := a.Act.MatchArguments(json.RawMessage(`{"currency":"USD","amount":100.0}`)); err != nil {
		t.Fatalf("equivalent live arguments refused: %v", err)
	}
	wantCode(t, a.Act.MatchArguments(json.RawMessage(`{"amount":101,"currency":"USD"}`)), CodeDigestMismatch)
	wantCode(t, a.Act.MatchArguments(json.RawMessage(`{"amount":100,"currency":"USD","memo":"x"}`)), CodeDigestMismatch)
	wantCode(t, a.Act.MatchArguments(json.RawMessage(`{"amount":100,`)), CodeArgumentsInvalid)
	wantCode(t, a.Act.MatchArguments(json.RawMessage(`[1]`)), CodeArgumentsInvalid)
	// "A string value and a numeric value should only be treated as equivalent where the
	// applicable schema explicitly defines that equivalence" (latest draft, §25).
	if call("payout_create", `{"amount":"100","currency":"USD"}`).ActionDigest() == a.ActionDigest() {
		t.Fatal("string and number collapsed")
	}
	// The digest binds the tool: the same arguments under another name are another action.
	if call("refund_create", `{"amount":100,"currency":"USD"}`).ActionDigest() == a.ActionDigest() {
		t.Fatal("tool name not bound by the digest")
	}
}

func TestAnthropicBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		code     Code
	}{
		{"not json", `{"type":"tool_use",`, CodeInputInvalid},
		{"empty", ``, CodeInputInvalid},
		{"duplicate name member (T6)", `{"type":"tool_use","id":"toolu_1","name":"search","name":"payout_create","input":{}}`, CodeInputInvalid},
		{"duplicate after escape decoding", `{"type":"tool_use","id":"toolu_1","name":"search","n\u0061me":"payout","input":{}}`, CodeInputInvalid},
		{"unpaired surrogate in input", `{"type":"tool_use","id":"toolu_1","name":"search","input":{"q":"\ud800"}}`, CodeInputInvalid},
		{"invalid utf-8", "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"search\",\"input\":{\"q\":\"\xff\"}}", CodeInputInvalid},
		{"duplicate inside input", `{"type":"tool_use","id":"toolu_1","name":"email_send","input":{"to":"a@x","to":"b@y"}}`, CodeInputInvalid},
		{"array", `[]`, CodeShapeInvalid},
		{"string", `"tool_use"`, CodeShapeInvalid},
		{"missing type", `{"id":"toolu_1","name":"search","input":{}}`, CodeShapeInvalid},
		{"type not string", `{"type":1,"id":"toolu_1","name":"search","input":{}}`, CodeShapeInvalid},
		{"text block", `{"type":"text","text":"hi"}`, CodeNotToolCall},
		{"server_tool_use runs at the vendor", `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}`, CodeNotToolCall},
		{"missing id", `{"type":"tool_use","name":"search","input":{}}`, CodeShapeInvalid},
		{"empty id", `{"type":"tool_use","id":"","name":"search","input":{}}`, CodeShapeInvalid},
		{"id with newline", `{"type":"tool_use","id":"a\nb","name":"search","input":{}}`, CodeShapeInvalid},
		{"missing name", `{"type":"tool_use","id":"toolu_1","input":{}}`, CodeShapeInvalid},
		{"empty name", `{"type":"tool_use","id":"toolu_1","name":"","input":{}}`, CodeToolNameInvalid},
		{"name with zero-width joiner", `{"type":"tool_use","id":"toolu_1","name":"pay\u200dout","input":{}}`, CodeToolNameInvalid},
		{"name with space", `{"type":"tool_use","id":"toolu_1","name":"email send","input":{}}`, CodeToolNameInvalid},
		{"name too long", `{"type":"tool_use","id":"toolu_1","name":"` + strings.Repeat("a", 257) + `","input":{}}`, CodeToolNameInvalid},
		{"missing input", `{"type":"tool_use","id":"toolu_1","name":"search"}`, CodeArgumentsInvalid},
		{"input is a partial-json string", `{"type":"tool_use","id":"toolu_1","name":"search","input":"{\"q\":"}`, CodeArgumentsInvalid},
		{"input null", `{"type":"tool_use","id":"toolu_1","name":"search","input":null}`, CodeArgumentsInvalid},
		{"input array", `{"type":"tool_use","id":"toolu_1","name":"search","input":[1]}`, CodeArgumentsInvalid},
		{"infinite number", `{"type":"tool_use","id":"toolu_1","name":"search","input":{"n":1e400}}`, CodeInputInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := MapAnthropicToolUse([]byte(tc.in), testCtx(t))
			noCandidateOnError(t, c, err)
			wantCode(t, err, tc.code)
			if strings.Contains(err.Error(), "alice") || strings.Contains(err.Error(), "b@y") {
				t.Fatal("error text carries argument values")
			}
		})
	}
}

func TestOpenAIChatBadInput(t *testing.T) {
	call := func(args string) string {
		return `{"id":"call_1","type":"function","function":{"name":"payout_create","arguments":` + strconv.Quote(args) + `}}`
	}
	for _, tc := range []struct {
		name, in string
		code     Code
	}{
		{"partial arguments (§9)", call(`{"amount":"150.00","curr`), CodeArgumentsInvalid},
		{"empty arguments string", call(``), CodeArgumentsInvalid},
		{"arguments a bare number", call(`150`), CodeArgumentsInvalid},
		{"arguments an array", call(`[{"amount":1}]`), CodeArgumentsInvalid},
		{"arguments trailing garbage", call(`{"amount":1} {"amount":2}`), CodeArgumentsInvalid},
		{"arguments duplicate member", call(`{"beneficiary":"vendor-441","beneficiary":"attacker"}`), CodeArgumentsInvalid},
		{"arguments with unpaired surrogate escape", call(`{"memo":"\ud800"}`), CodeArgumentsInvalid},
		{"arguments not a string", `{"id":"call_1","type":"function","function":{"name":"payout_create","arguments":{"amount":1}}}`, CodeArgumentsInvalid},
		{"arguments missing", `{"id":"call_1","type":"function","function":{"name":"payout_create"}}`, CodeArgumentsInvalid},
		{"function missing", `{"id":"call_1","type":"function"}`, CodeShapeInvalid},
		{"function not object", `{"id":"call_1","type":"function","function":"payout_create"}`, CodeShapeInvalid},
		{"custom tool call", `{"id":"call_1","type":"custom","custom":{"name":"x","input":"free text"}}`, CodeNotToolCall},
		{"missing id", `{"type":"function","function":{"name":"payout_create","arguments":"{}"}}`, CodeShapeInvalid},
		{"name not string", `{"id":"call_1","type":"function","function":{"name":["payout"],"arguments":"{}"}}`, CodeShapeInvalid},
		{"name with control char", `{"id":"call_1","type":"function","function":{"name":"payout\u0000","arguments":"{}"}}`, CodeToolNameInvalid},
		{"duplicate function member", `{"id":"call_1","type":"function","function":{"name":"search","arguments":"{}"},"function":{"name":"payout_create","arguments":"{}"}}`, CodeInputInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := MapOpenAIToolCall([]byte(tc.in), testCtx(t))
			noCandidateOnError(t, c, err)
			wantCode(t, err, tc.code)
		})
	}
	// The error names the member that failed, in the vendor's terms.
	_, err := MapOpenAIToolCall([]byte(call(`{"a":`)), testCtx(t))
	var e *Error
	if !asErr(err, &e) || e.Field != "function.arguments" {
		t.Fatalf("field = %v", err)
	}
}

func TestResponsesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		code     Code
	}{
		{"in progress (§9)", `{"type":"function_call","call_id":"call_1","name":"search","arguments":"{}","status":"in_progress"}`, CodePartialBlock},
		{"incomplete", `{"type":"function_call","call_id":"call_1","name":"search","arguments":"{}","status":"incomplete"}`, CodePartialBlock},
		{"partial arguments", `{"type":"function_call","call_id":"call_1","name":"search","arguments":"{\"q\":"}`, CodeArgumentsInvalid},
		{"missing call_id", `{"type":"function_call","id":"fc_1","name":"search","arguments":"{}"}`, CodeShapeInvalid},
		{"message item", `{"type":"message","role":"assistant","content":[]}`, CodeNotToolCall},
		{"custom_tool_call", `{"type":"custom_tool_call","call_id":"call_1","name":"x","input":"y"}`, CodeNotToolCall},
		{"status not string", `{"type":"function_call","call_id":"call_1","name":"search","arguments":"{}","status":true}`, CodeShapeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := MapResponsesFunctionCall([]byte(tc.in), testCtx(t))
			noCandidateOnError(t, c, err)
			wantCode(t, err, tc.code)
		})
	}
}

func TestMCPBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		code     Code
	}{
		{"tools/list is discovery (§8)", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, CodeNotToolCall},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"repo_deploy","arguments":{}}}`, CodeShapeInvalid},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"repo_deploy"}}`, CodeShapeInvalid},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"repo_deploy"}}`, CodeShapeInvalid},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"repo_deploy"}}`, CodeShapeInvalid},
		{"missing jsonrpc", `{"id":1,"method":"tools/call","params":{"name":"repo_deploy"}}`, CodeShapeInvalid},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy"}}]`, CodeShapeInvalid},
		{"extra request member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy"},"x":1}`, CodeShapeInvalid},
		{"missing params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, CodeShapeInvalid},
		{"params not object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`, CodeShapeInvalid},
		{"unbound params member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy","arguments":{},"requestState":"opaque"}}`, CodeShapeInvalid},
		{"_meta not object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy","_meta":1}}`, CodeShapeInvalid},
		{"missing name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, CodeShapeInvalid},
		{"arguments null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy","arguments":null}}`, CodeArgumentsInvalid},
		{"arguments string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy","arguments":"{}"}}`, CodeArgumentsInvalid},
		{"duplicate arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"dev"},"arguments":{"env":"prod"}}}`, CodeInputInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := MapMCPToolsCall([]byte(tc.in), mcpCtx(t))
			noCandidateOnError(t, c, err)
			wantCode(t, err, tc.code)
		})
	}
	t.Run("no server identity (§8)", func(t *testing.T) {
		c, err := MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{}}}`), testCtx(t))
		noCandidateOnError(t, c, err)
		wantCode(t, err, CodeServerIdentityMissing)
	})
	t.Run("_meta is accepted and not digested", func(t *testing.T) {
		a, err := MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod"},"_meta":{"progressToken":7}}}`), mcpCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		b, err := MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod"}}}`), mcpCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if a.ActionDigest() != b.ActionDigest() {
			t.Fatal("_meta or the JSON-RPC id changed the digest")
		}
	})
	t.Run("absent arguments are {}", func(t *testing.T) {
		c, err := MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy"}}`), mcpCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		checkAccepted(t, c)
		if string(c.Arguments) != "{}" {
			t.Fatalf("arguments %s", c.Arguments)
		}
	})
}

// §12 MCP_SERVER_SWAP: the same call to another server is another destination.
func TestMCPServerSwapChangesDestination(t *testing.T) {
	req := []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod","ref":"main"}}}`)
	good, err := MapMCPToolsCall(req, mcpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	mc := mcpCtx(t)
	mc.Server.URL = "mcp://git.attacker/prod"
	evil, err := MapMCPToolsCall(req, mc)
	if err != nil {
		t.Fatal(err)
	}
	if good.Act.Destination.DestinationID == evil.Act.Destination.DestinationID || good.Act.Tool.ToolEndpoint == evil.Act.Tool.ToolEndpoint {
		t.Fatal("server identity did not enter destination and tool_endpoint")
	}
}

func TestContextInvalid(t *testing.T) {
	block := []byte(`{"type":"tool_use","id":"toolu_1","name":"search","input":{}}`)
	for _, tc := range []struct {
		name   string
		mutate func(*MappingContext)
	}{
		{"no session", func(m *MappingContext) { m.SessionID = "" }},
		{"session with space", func(m *MappingContext) { m.SessionID = "a b" }},
		{"no principal", func(m *MappingContext) { m.Principal.PrincipalID = "" }},
		{"no agent", func(m *MappingContext) { m.Agent.AgentID = "" }},
		{"no sink", func(m *MappingContext) { m.SinkID = "" }},
		{"no clock", func(m *MappingContext) { m.Now = nil }},
		{"zero ttl", func(m *MappingContext) { m.TTL = 0 }},
		{"ttl beyond max", func(m *MappingContext) { m.TTL = MaxTTL + 1 }},
		{"no issuer", func(m *MappingContext) { m.IDs = nil }},
		{"bad protocol", func(m *MappingContext) { m.ToolProtocol = "GRPC" }},
		{"bad provenance", func(m *MappingContext) { m.Provenance = "model" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := testCtx(t)
			tc.mutate(&mc)
			c, err := MapAnthropicToolUse(block, mc)
			noCandidateOnError(t, c, err)
			wantCode(t, err, CodeContextInvalid)
		})
	}
	t.Run("negative epoch fails validation", func(t *testing.T) {
		mc := testCtx(t)
		mc.PolicyState.PolicyEpoch = -1
		c, err := MapAnthropicToolUse(block, mc)
		noCandidateOnError(t, c, err)
		wantCode(t, err, CodeFieldInvalid)
	})
	t.Run("input larger than the bound", func(t *testing.T) {
		mc := testCtx(t)
		mc.MaxInputBytes = 16
		c, err := MapAnthropicToolUse(block, mc)
		noCandidateOnError(t, c, err)
		wantCode(t, err, CodeInputTooLarge)
	})
}

func asErr(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

// The strict depth bound counts the action object around the arguments (envelope-04 §6.3 via
// internal/action): arguments 63 deep stay strict, 64 deep fall back to full RFC 8785 and are
// still an act, never a refusal.
func TestArgumentDepthAtTheProfileBound(t *testing.T) {
	nest := func(depth int) string { // an object `depth` containers deep, the root counting
		return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
	}
	for _, tc := range []struct {
		depth  int
		strict bool
	}{{63, true}, {64, false}, {200, false}} {
		t.Run(strconv.Itoa(tc.depth), func(t *testing.T) {
			c, err := MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":`+nest(tc.depth)+`}}`), mcpCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			checkAccepted(t, c)
			if c.Strict() != tc.strict {
				t.Fatalf("Strict() = %v", c.Strict())
			}
		})
	}
}
