package act

import "encoding/json"

// MapAnthropicToolUse maps one Anthropic Messages API content block (tool-use-binding §6):
//
//	{"type":"tool_use","id":"toolu_01A","name":"email_send","input":{...}}
//
// id → Candidate.VendorID (the tool_result's tool_use_id; never the act id), name → tool.tool_id
// and tool.function_id, input → canonicalized into arguments_digest. A name in the computer-use
// family gives act_type COMPUTER_USE and sink BROWSER_CONTROLLER. Other members of the block
// (cache_control, ...) are ignored: the host invokes tools[name](input) and nothing else of the
// block reaches the tool. server_tool_use and mcp_tool_use blocks run at the vendor, not at
// this sink, and are refused with CodeNotToolCall.
func MapAnthropicToolUse(block []byte, mc MappingContext) (*Candidate, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	v, err := envelope(block, mc.maxInput())
	if err != nil {
		return nil, err
	}
	m, err := asObject("", v)
	if err != nil {
		return nil, err
	}
	c, _, err := anthropicBlock("", m, mc)
	return c, err
}

func anthropicBlock(path string, m members, mc MappingContext) (*Candidate, string, error) {
	typ, err := m.reqStr(path, "type")
	if err != nil {
		return nil, "", err
	}
	if typ != "tool_use" {
		return nil, "", newErr(CodeNotToolCall, join(path, "type"), "not a tool_use block")
	}
	id, err := m.vendorID(path, "id")
	if err != nil {
		return nil, "", err
	}
	name, err := m.reqStr(path, "name")
	if err != nil {
		return nil, id, err
	}
	if err := CheckToolName(join(path, "name"), name); err != nil {
		return nil, id, err
	}
	input, ok := m["input"]
	if !ok {
		return nil, id, newErr(CodeArgumentsInvalid, join(path, "input"), "required")
	}
	c, err := NewCandidate(Input{Vendor: VendorAnthropic, VendorID: id, ToolName: name, Arguments: input}, mc)
	if err != nil {
		return nil, id, withField(err, join(path, "input"))
	}
	return c, id, nil
}

// MapAnthropicMessage maps every tool_use block of an assistant message, given as the message
// object ({"role":"assistant","content":[...],"stop_reason":...,"model":...}) or as its content
// array. Each tool_use block is its own act with its own id (tool-use-binding §9); blocks that
// are not tool_use (text, thinking, vendor-run server_tool_use...) yield no Item. A block that
// cannot be mapped yields an Item with Err, so the host answers it with an error tool_result.
// When stop_reason is "max_tokens" a final tool_use block may be cut off and stays
// non-effective (CodePartialBlock, §9); when it is null the message is still streaming and
// every tool_use block stays non-effective. The error return is for a message that is not this
// shape at all.
func MapAnthropicMessage(msg []byte, mc MappingContext) ([]Item, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	v, err := envelope(msg, mc.maxInput())
	if err != nil {
		return nil, err
	}
	var blocks []json.RawMessage
	path, truncated, unfinished := "", false, false
	if v[0] == '[' {
		if blocks, err = asArray("", v); err != nil {
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
			return nil, newErr(CodeShapeInvalid, "role", "tool_use blocks come from the assistant")
		}
		if string(m["stop_reason"]) == "null" {
			// A streamed message before its message_delta: nothing in it is final (§9).
			unfinished = true
		} else if stop, _, err := m.str("", "stop_reason"); err != nil {
			return nil, err
		} else {
			truncated = stop == "max_tokens"
		}
		if mc.Agent.ModelID == "" {
			mc.Agent.ModelID = m.modelID()
		}
		content, ok := m["content"]
		if !ok {
			return nil, newErr(CodeShapeInvalid, "content", "required")
		}
		if blocks, err = asArray("content", content); err != nil {
			return nil, err
		}
		path = "content"
	}
	var items []Item
	for i, raw := range blocks {
		p := idx(path, i)
		b, err := asObject(p, raw)
		if err != nil {
			items = append(items, Item{Index: i, Err: err})
			continue
		}
		typ, _, err := b.str(p, "type")
		if err != nil {
			items = append(items, Item{Index: i, Err: err})
			continue
		}
		if typ != "tool_use" {
			continue
		}
		if unfinished || (truncated && i == len(blocks)-1) {
			id, _ := b.vendorID(p, "id")
			items = append(items, Item{Index: i, VendorID: id, Err: newErr(CodePartialBlock, p, "message not finalized (stop_reason null, or max_tokens on the final block)")})
			continue
		}
		c, id, err := anthropicBlock(p, b, mc)
		items = append(items, Item{Index: i, VendorID: id, Candidate: c, Err: err})
	}
	markDuplicateIDs(items)
	return items, nil
}
