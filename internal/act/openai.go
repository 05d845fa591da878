package act

import "encoding/json"

// MapOpenAIToolCall maps one element of a Chat Completions assistant message's tool_calls
// (tool-use-binding §7):
//
//	{"id":"call_8f3","type":"function","function":{"name":"payout_create","arguments":"{...}"}}
//
// function.arguments is a string: it is parsed as JSON, then canonicalized, then hashed, so two
// equivalent strings give one digest (§7). A string that is not a complete JSON object — a
// streaming fragment, "", a bare value — stays non-effective with CodeArgumentsInvalid (§9). id
// → Candidate.VendorID (the tool message's tool_call_id). A "type" other than "function"
// (custom tools with free-text input) is refused with CodeNotToolCall.
func MapOpenAIToolCall(call []byte, mc MappingContext) (*Candidate, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	v, err := envelope(call, mc.maxInput())
	if err != nil {
		return nil, err
	}
	m, err := asObject("", v)
	if err != nil {
		return nil, err
	}
	c, _, err := openAIChatCall("", m, mc)
	return c, err
}

func openAIChatCall(path string, m members, mc MappingContext) (*Candidate, string, error) {
	id, err := m.vendorID(path, "id")
	if err != nil {
		return nil, "", err
	}
	if typ, ok, err := m.str(path, "type"); err != nil {
		return nil, id, err
	} else if ok && typ != "function" {
		return nil, id, newErr(CodeNotToolCall, join(path, "type"), "only function tool calls are mapped")
	}
	fv, ok := m["function"]
	if !ok {
		return nil, id, newErr(CodeShapeInvalid, join(path, "function"), "required")
	}
	fpath := join(path, "function")
	f, err := asObject(fpath, fv)
	if err != nil {
		return nil, id, err
	}
	c, err := functionCall(VendorOpenAIChat, id, fpath, f, mc)
	return c, id, err
}

// functionCall reads name and the arguments string shared by Chat tool_calls[].function and
// Responses function_call items.
func functionCall(vendor Vendor, id, path string, f members, mc MappingContext) (*Candidate, error) {
	name, err := f.reqStr(path, "name")
	if err != nil {
		return nil, err
	}
	if err := CheckToolName(join(path, "name"), name); err != nil {
		return nil, err
	}
	argv, ok := f["arguments"]
	if !ok {
		return nil, newErr(CodeArgumentsInvalid, join(path, "arguments"), "required")
	}
	if len(argv) == 0 || argv[0] != '"' {
		return nil, newErr(CodeArgumentsInvalid, join(path, "arguments"), "must be a JSON string holding a JSON object")
	}
	var args string
	if err := json.Unmarshal(argv, &args); err != nil {
		return nil, &Error{Code: CodeArgumentsInvalid, Field: join(path, "arguments"), Detail: "must be a JSON string", Err: err}
	}
	c, err := NewCandidate(Input{Vendor: vendor, VendorID: id, ToolName: name, Arguments: json.RawMessage(args)}, mc)
	if err != nil {
		return nil, withField(err, join(path, "arguments"))
	}
	return c, nil
}

// MapOpenAIToolCalls maps every element of tool_calls, given as the assistant message
// ({"role":"assistant","tool_calls":[...]}) or as the array. Parallel tool_calls are parallel
// acts, each enforced separately (tool-use-binding §7, §27.3): every element yields one Item,
// with a Candidate or with the Err that keeps it non-effective (so the host still owes that
// tool_call_id an error tool message). The error return is for input that is not this shape.
func MapOpenAIToolCalls(msg []byte, mc MappingContext) ([]Item, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	v, err := envelope(msg, mc.maxInput())
	if err != nil {
		return nil, err
	}
	var calls []json.RawMessage
	path := ""
	if v[0] == '[' {
		if calls, err = asArray("", v); err != nil {
			return nil, err
		}
	} else {
		m, err := asObject("", v)
		if err != nil {
			return nil, err
		}
		if role, ok, err := m.str("", "role"); err != nil {
			return nil, err
		} else if ok && role != "assistant" {
			return nil, newErr(CodeShapeInvalid, "role", "tool_calls come from the assistant")
		}
		tc, ok := m["tool_calls"]
		if !ok {
			return nil, newErr(CodeShapeInvalid, "tool_calls", "required")
		}
		if calls, err = asArray("tool_calls", tc); err != nil {
			return nil, err
		}
		path = "tool_calls"
	}
	items := make([]Item, 0, len(calls))
	for i, raw := range calls {
		p := idx(path, i)
		m, err := asObject(p, raw)
		if err != nil {
			items = append(items, Item{Index: i, Err: err})
			continue
		}
		c, id, err := openAIChatCall(p, m, mc)
		items = append(items, Item{Index: i, VendorID: id, Candidate: c, Err: err})
	}
	markDuplicateIDs(items)
	return items, nil
}

// MapResponsesFunctionCall maps one Responses API output item of type function_call
// (tool-use-binding §7, §11: "Responses API function_call items use the same map"):
//
//	{"type":"function_call","id":"fc_1","call_id":"call_8f3","name":"...","arguments":"{...}","status":"completed"}
//
// call_id → Candidate.VendorID (what function_call_output answers). A status other than
// "completed" is a block still streaming or cut off and stays non-effective (CodePartialBlock,
// §9); an absent status is accepted.
func MapResponsesFunctionCall(item []byte, mc MappingContext) (*Candidate, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	v, err := envelope(item, mc.maxInput())
	if err != nil {
		return nil, err
	}
	m, err := asObject("", v)
	if err != nil {
		return nil, err
	}
	c, _, err := responsesItem("", m, false, mc)
	return c, err
}

func responsesItem(path string, m members, needStatus bool, mc MappingContext) (*Candidate, string, error) {
	typ, err := m.reqStr(path, "type")
	if err != nil {
		return nil, "", err
	}
	if typ != "function_call" {
		id, _ := m.vendorID(path, "call_id")
		return nil, id, newErr(CodeNotToolCall, join(path, "type"), "only function_call items are mapped")
	}
	id, err := m.vendorID(path, "call_id")
	if err != nil {
		return nil, "", err
	}
	status, ok, err := m.str(path, "status")
	if err != nil {
		return nil, id, err
	}
	if (ok && status != "completed") || (needStatus && !ok) {
		return nil, id, newErr(CodePartialBlock, join(path, "status"), "function_call is not completed")
	}
	c, err := functionCall(VendorOpenAIResponses, id, path, m, mc)
	return c, id, err
}

// hostRunResponsesItems are Responses output item types the host, not the vendor, would run.
// actgate maps only function_call; the others yield an Item with CodeNotToolCall so the host
// answers them with an error instead of running them past the sink.
func isHostRunResponsesItem(typ string) bool {
	switch typ {
	case "function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call":
		return true
	}
	return false
}

// MapResponsesOutput maps the function_call items of a Responses API response, given as the
// response object ({"output":[...],"status":...,"model":...}) or as its output array. Each
// function_call is its own act (tool-use-binding §9). Items the vendor runs or that are not
// calls (message, reasoning, web_search_call, mcp_call...) yield no Item; host-run calls other
// than function_call (custom_tool_call, computer_call, local_shell_call...) yield an Item with
// CodeNotToolCall. When the response's status is not "completed", a function_call must carry
// status "completed" itself or stays non-effective (CodePartialBlock).
func MapResponsesOutput(resp []byte, mc MappingContext) ([]Item, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	v, err := envelope(resp, mc.maxInput())
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	path, needStatus := "", false
	if v[0] == '[' {
		if out, err = asArray("", v); err != nil {
			return nil, err
		}
	} else {
		m, err := asObject("", v)
		if err != nil {
			return nil, err
		}
		status, ok, err := m.str("", "status")
		if err != nil {
			return nil, err
		}
		needStatus = ok && status != "completed"
		if mc.Agent.ModelID == "" {
			mc.Agent.ModelID = m.modelID()
		}
		ov, ok := m["output"]
		if !ok {
			return nil, newErr(CodeShapeInvalid, "output", "required")
		}
		if out, err = asArray("output", ov); err != nil {
			return nil, err
		}
		path = "output"
	}
	var items []Item
	for i, raw := range out {
		p := idx(path, i)
		m, err := asObject(p, raw)
		if err != nil {
			items = append(items, Item{Index: i, Err: err})
			continue
		}
		typ, _, err := m.str(p, "type")
		if err != nil {
			items = append(items, Item{Index: i, Err: err})
			continue
		}
		if !isHostRunResponsesItem(typ) {
			continue
		}
		c, id, err := responsesItem(p, m, needStatus, mc)
		items = append(items, Item{Index: i, VendorID: id, Candidate: c, Err: err})
	}
	markDuplicateIDs(items)
	return items, nil
}
