package testutil

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Text joins the text blocks of a tool result with newlines.
func Text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// MetaString is the string a tool result carries in _meta[key], "" when none (e.g.
// mcpproxy.MetaEFCode, the EF code of a refusal).
func MetaString(r *mcp.CallToolResult, key string) string {
	s, _ := r.Meta[key].(string)
	return s
}
