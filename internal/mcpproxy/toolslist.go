package mcpproxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/sink"
)

// listTools is tools/list: the upstream's list plus the virtual tool and the advisory
// emits_binding_moment annotation, nothing else changed (envelope-04 §8.2). Discovery never
// issues authority (tool-use-binding §8).
func (b *bridge) listTools(ctx context.Context, req *mcp.ListToolsRequest) (mcp.Result, error) {
	res, err := forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.ListToolsResult, error) {
		return cs.ListTools(ctx, req.Params)
	})
	if err != nil {
		return nil, err
	}
	up := res.(*mcp.ListToolsResult)
	first := req.Params == nil || req.Params.Cursor == ""
	raw, err := augmentTools(up, first, func(tool string) bool { return b.p.cfg.Gate.CanEscalate(b.p.cfg.Server, tool) })
	if err != nil {
		return b.render(nil, err)
	}
	return &rawResult{raw: raw}, nil
}

// augmentTools returns the JSON of a tools/list result with the upstream's tools (minus any
// named like the virtual tool), the advisory annotation on each tool canEscalate names, and,
// when first, the virtual tool appended.
func augmentTools(up *mcp.ListToolsResult, first bool, canEscalate func(string) bool) (json.RawMessage, error) {
	out := *up
	out.Tools = make([]*mcp.Tool, 0, len(up.Tools))
	for _, t := range up.Tools {
		if t != nil && t.Name != sink.RequestBindingMomentTool {
			out.Tools = append(out.Tools, t)
		}
	}
	b, err := json.Marshal(&out)
	if err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(doc["tools"], &tools); err != nil {
		return nil, err
	}
	for i, t := range tools {
		if !canEscalate(out.Tools[i].Name) {
			continue
		}
		if err := annotate(t); err != nil {
			return nil, err
		}
	}
	if first {
		v, err := virtualTool()
		if err != nil {
			return nil, err
		}
		tools = append(tools, v)
	}
	if doc["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// annotate sets emits_binding_moment: true in a tool's "annotations" and "_meta" objects,
// keeping every member already there.
func annotate(tool map[string]json.RawMessage) error {
	for _, member := range []string{"annotations", "_meta"} {
		obj := map[string]json.RawMessage{}
		if old, ok := tool[member]; ok && string(old) != "null" {
			if err := json.Unmarshal(old, &obj); err != nil {
				return err
			}
		}
		obj[AnnotationEmitsBindingMoment] = json.RawMessage("true")
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		tool[member] = b
	}
	return nil
}

// virtualToolDescription is what the model reads about the virtual tool.
const virtualToolDescription = "Ask your principal to decide before a consequential action. Propose a binding moment: " +
	"a one-sentence synopsis, findings, recommendations, an offer of detail, a neutral question stem, and 2 to 4 " +
	"options, each a concrete tool call (tool, args, optional server) with a label and one line of reasoning, plus " +
	"the index of the option you recommend. The gate computes each option's action digest itself and routes the " +
	"moment to the principal; if the principal chooses an option, making exactly that call runs it once."

// virtualTool is the tools/list entry of request_binding_moment.
func virtualTool() (map[string]json.RawMessage, error) {
	f := false
	t := &mcp.Tool{
		Name:        sink.RequestBindingMomentTool,
		Title:       "Request a binding moment",
		Description: virtualToolDescription,
		InputSchema: sink.ProposalSchema(),
		Annotations: &mcp.ToolAnnotations{Title: "Request a binding moment", DestructiveHint: &f, OpenWorldHint: &f},
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, annotate(m)
}
