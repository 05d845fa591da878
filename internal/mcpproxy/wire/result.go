package wire

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callToolResult is a CallToolResult as the wire carries it, its content read as text items.
type callToolResult struct {
	Meta              mcp.Meta        `json:"_meta,omitempty"`
	Content           []textContent   `json:"content"`
	StructuredContent any             `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	InputRequests     json.RawMessage `json:"inputRequests,omitempty"`
	RequestState      string          `json:"requestState,omitempty"`
	ResultType        json.RawMessage `json:"resultType,omitempty"`
}

// textContent is what the SDK reads of a content item of type "text".
type textContent struct {
	Type        string           `json:"type"`
	Text        string           `json:"text"`
	Meta        mcp.Meta         `json:"_meta,omitempty"`
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

// DecodeCallToolResult decodes an upstream's tools/call result as the SDK's
// CallToolResult.UnmarshalJSON does. A result whose content is all text, without the 2026-07-28
// input-request members — what a tool answers on the hot path — is parsed in place; any other
// goes to the SDK's own decoder, which allocates a 32 KiB buffer per value it decodes
// (docs/performance.md "The MCP proxy's direct paths"). wire.TestDecodeCallToolResultAgreesWithSDK
// and FuzzDecodeCallToolResult compare the two.
func DecodeCallToolResult(data []byte) (*mcp.CallToolResult, error) {
	res := &mcp.CallToolResult{}
	var w callToolResult
	if checkDepth(data) != nil || Unmarshal(data, &w) != nil || len(w.InputRequests) > 0 || len(w.ResultType) > 0 {
		return res, Unmarshal(data, res) // CallToolResult.UnmarshalJSON: the SDK's decoder, and its error
	}
	content := make([]mcp.Content, 0, len(w.Content))
	for i := range w.Content {
		c := &w.Content[i]
		if c.Type != "text" {
			return res, Unmarshal(data, res)
		}
		content = append(content, &mcp.TextContent{Text: c.Text, Meta: c.Meta, Annotations: c.Annotations})
	}
	res.Meta, res.Content, res.StructuredContent, res.IsError, res.RequestState = w.Meta, content, w.StructuredContent, w.IsError, w.RequestState
	return res, nil
}
