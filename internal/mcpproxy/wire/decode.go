package wire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MaxDepth is the nesting of objects and arrays a decoded message may have: the MCP Go SDK's own
// limit, so that a message the gate decodes is one the SDK would decode.
const MaxDepth = 1000

var (
	// ErrDepth is the refusal of a message nested deeper than MaxDepth.
	ErrDepth = fmt.Errorf("JSON nested deeper than %d", MaxDepth)
	// ErrNoID is the refusal of a message that has neither a method nor a valid id.
	ErrNoID = errors.New("jsonrpc: a message without a method needs a valid id")
)

// message is every member a JSON-RPC 2.0 message may carry.
type message struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id,omitempty"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// DecodeMessage decodes one JSON-RPC message with the checks of the SDK's jsonrpc.DecodeMessage
// — the version tag, the id's type, a method or else a valid id, the depth limit, member names
// matched case-sensitively — but parses the bytes in place. The SDK's decoder allocates a
// 32 KiB read buffer for each value it decodes, several per message, which dominated the gate's
// per-call allocations (docs/performance.md "The MCP proxy's direct paths").
func DecodeMessage(data []byte) (jsonrpc.Message, error) {
	if err := checkDepth(data); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	var m message
	if err := Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if m.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", m.Version, "2.0")
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil {
		return nil, err
	}
	if len(m.Method) > 0 {
		var method string
		if err := Unmarshal(m.Method, &method); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: m.Params}, nil
	}
	if !id.IsValid() {
		return nil, ErrNoID
	}
	resp := &jsonrpc.Response{ID: id, Result: m.Result}
	if m.Error != nil {
		resp.Error = m.Error // only when present: a nil *jsonrpc.Error is not a nil error
	}
	return resp, nil
}

// checkDepth reports ErrDepth when objects and arrays in data nest deeper than MaxDepth;
// brackets inside strings do not count.
func checkDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString && b == '"':
			inString = false
		case inString:
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > MaxDepth {
				return ErrDepth
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return nil
}
