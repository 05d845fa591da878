package agent2025

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
)

func (b *bridge) listTools(ctx context.Context, req *mcp.ListToolsRequest) (mcp.Result, error) {
	res, err := forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.ListToolsResult, error) {
		return cs.ListTools(ctx, req.Params)
	})
	if err != nil {
		return nil, err
	}
	up := res.(*mcp.ListToolsResult)
	first := req.Params == nil || req.Params.Cursor == ""
	raw, err := json.Marshal(up)
	if err == nil {
		raw, err = toolcall.GateTools(ctx, b.p.cfg.Gate, b.p.cfg.Server, raw, first, b.listed)
	}
	if err != nil {
		return b.render(nil, err)
	}
	return &toolcall.RawResult{Raw: raw}, nil
}

// maxListedTools bounds the tools a session remembers from its tools/list results (listed):
// beyond it every refusal of the session omits structuredContent (hasOutputSchema).
const maxListedTools = 4096

// listed records whether a tool the session listed declares an outputSchema.
func (b *bridge) listed(tool string, outputSchema bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.outputSchemas[tool]; !ok && len(b.outputSchemas) >= maxListedTools {
		b.schemasOverflow = true
		return
	}
	if b.outputSchemas == nil {
		b.outputSchemas = make(map[string]bool)
	}
	b.outputSchemas[tool] = outputSchema
}

// hasOutputSchema reports whether a refusal of tool must omit structuredContent: the session
// listed the tool with an outputSchema (its client may validate a result against it), or
// listed more tools than it remembers.
func (b *bridge) hasOutputSchema(tool string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.schemasOverflow || b.outputSchemas[tool]
}
