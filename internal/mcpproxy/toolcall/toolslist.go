package toolcall

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tooldef"
)

// listTools is tools/list: the upstream's list plus the virtual tool and the advisory
// emits_binding_moment annotation, nothing else changed (envelope-04 §8.2). Discovery never
// issues authority (tool-use-binding §8).
// jsonNull is a JSON member present with the value null, which MCP reads as absent.
const jsonNull = "null"

// AugmentTools returns the JSON of a tools/list result with the upstream's tools (minus any
// named like the virtual tool), the advisory annotation on each tool canEscalate names, and,
// when first, the virtual tool appended.
func AugmentTools(up *mcp.ListToolsResult, first bool, canEscalate func(string) bool) (json.RawMessage, error) {
	b, err := json.Marshal(up)
	if err != nil {
		return nil, err
	}
	return AugmentToolsRaw(b, first, canEscalate, nil)
}

// errToolsList is the refusal of a tools/list result that is not an object with a tools array
// of objects.
var errToolsList = errors.New("mcpproxy: the tools/list result is not an object with a tools array of objects")

// AugmentToolsRaw is AugmentTools on the upstream's result as it was written: every member of
// the result and of each tool is kept as the upstream wrote it (execution, outputSchema, icons,
// fields of revisions the proxy does not know); only the virtual tool's name is removed, the
// annotation added, and the virtual tool appended. A result that is not an object with an
// array of tool objects is refused (errToolsList), never passed on unannotated. listed, when
// set, is told each upstream tool's name and whether it declares an outputSchema.
func AugmentToolsRaw(raw json.RawMessage, first bool, canEscalate func(string) bool, listed func(string, bool)) (json.RawMessage, error) {
	return augmentTools(raw, first, canEscalate, listed, nil)
}

// ToolLister is implemented by a Gate that pins tool definitions (*sink.Gate): it is told the
// tools an upstream listed and names those to hide (docs/api.md "Pinned tool definitions").
type ToolLister interface {
	ListedTools(ctx context.Context, server string, tools []sink.ListedTool) map[string]bool
}

// GateTools is AugmentToolsRaw for server's tools/list answer through g: each upstream tool is
// digested as the upstream wrote it (internal/tooldef) and told to g, and the tools g names
// (pinned tools whose definition changed) are left out of the list the agent gets.
func GateTools(ctx context.Context, g Gate, server string, raw json.RawMessage, first bool, listed func(string, bool)) (json.RawMessage, error) {
	canEscalate := func(tool string) bool { return g.CanEscalate(server, tool) }
	var hide func([]map[string]json.RawMessage) map[string]bool
	if l, ok := g.(ToolLister); ok {
		hide = func(tools []map[string]json.RawMessage) map[string]bool {
			in := make([]sink.ListedTool, 0, len(tools))
			for _, t := range tools {
				d, err := tooldef.Of(t)
				name := d.Name
				if err != nil {
					_ = json.Unmarshal(t["name"], &name)
				}
				if name == sink.RequestBindingMomentTool {
					continue
				}
				in = append(in, sink.ListedTool{Name: name, Definition: d, Err: err})
			}
			return l.ListedTools(ctx, server, in)
		}
	}
	return augmentTools(raw, first, canEscalate, listed, hide)
}

func augmentTools(raw json.RawMessage, first bool, canEscalate func(string) bool, listed func(string, bool),
	hide func([]map[string]json.RawMessage) map[string]bool) (json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil || doc == nil {
		return nil, errToolsList
	}
	var tools []map[string]json.RawMessage
	if t, ok := doc["tools"]; ok && string(t) != jsonNull {
		if err := json.Unmarshal(t, &tools); err != nil {
			return nil, errToolsList
		}
	}
	for _, t := range tools {
		if t == nil {
			return nil, errToolsList
		}
	}
	var hidden map[string]bool
	if hide != nil {
		// Digested before annotate changes the tool's annotations: the digest is the
		// upstream's definition alone.
		hidden = hide(tools)
	}
	out := make([]map[string]json.RawMessage, 0, len(tools)+1)
	for _, t := range tools {
		var name string
		if n, ok := t["name"]; ok {
			if err := json.Unmarshal(n, &name); err != nil {
				return nil, errToolsList
			}
		}
		if name == sink.RequestBindingMomentTool || hidden[name] {
			continue
		}
		if listed != nil {
			os, ok := t["outputSchema"]
			listed(name, ok && string(os) != jsonNull)
		}
		if canEscalate(name) {
			if err := annotate(t); err != nil {
				return nil, errToolsList
			}
		}
		out = append(out, t)
	}
	if first {
		v, err := virtualTool()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	var err error
	if doc["tools"], err = wire.MarshalNoEscape(out); err != nil {
		return nil, err
	}
	return wire.MarshalNoEscape(doc)
}

// annotate sets emits_binding_moment: true in a tool's "annotations" and "_meta" objects,
// keeping every member already there.
func annotate(tool map[string]json.RawMessage) error {
	for _, member := range []string{"annotations", "_meta"} {
		obj := map[string]json.RawMessage{}
		if old, ok := tool[member]; ok && string(old) != jsonNull {
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
