package act

import "encoding/json"

// MapMCPToolsCall maps an MCP JSON-RPC tools/call request (tool-use-binding §8):
//
//	{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{...}}}
//
// params.name → tool.tool_id; params.arguments → digest (absent means {}); the server identity
// from the mapping context (required: CodeServerIdentityMissing otherwise) → tool.tool_endpoint
// and destination, protocol MCP, so the same call presented to a swapped server fails the
// destination match (§12 MCP_SERVER_SWAP). The JSON-RPC id goes to Candidate.VendorID as its
// JSON text (e.g. `4` or `"a"`) to address the response; it is never the act id (§11: it "can
// collide across servers").
//
// Methods other than tools/call are refused with CodeNotToolCall (tools/list is discovery and
// MUST NOT issue authority, §8). Because a proxy forwards the request, the request and its
// params are closed: a member other than name, arguments and _meta in params
// (inputResponses, requestState, task...) would reach the server without being bound by the
// digest, and is refused with CodeShapeInvalid. params._meta is transport metadata (progress
// tokens) and is not digested.
func MapMCPToolsCall(req []byte, mc MappingContext) (*Candidate, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	if mc.Server.ID() == "" {
		return nil, newErr(CodeServerIdentityMissing, "Server", "an MCP act must bind the server identity")
	}
	v, err := envelope(req, mc.maxInput())
	if err != nil {
		return nil, err
	}
	m, err := asObject("", v)
	if err != nil {
		return nil, err
	}
	for _, k := range m.keys() {
		switch k {
		case "jsonrpc", "id", "method", "params":
		default:
			return nil, newErr(CodeShapeInvalid, k, "not a JSON-RPC request member")
		}
	}
	if ver, err := m.reqStr("", "jsonrpc"); err != nil {
		return nil, err
	} else if ver != "2.0" {
		return nil, newErr(CodeShapeInvalid, "jsonrpc", `must be "2.0"`)
	}
	method, err := m.reqStr("", "method")
	if err != nil {
		return nil, err
	}
	if method != "tools/call" {
		return nil, newErr(CodeNotToolCall, "method", "only tools/call is an act")
	}
	id, err := rpcID(m)
	if err != nil {
		return nil, err
	}
	pv, ok := m["params"]
	if !ok {
		return nil, newErr(CodeShapeInvalid, "params", "required")
	}
	p, err := asObject("params", pv)
	if err != nil {
		return nil, err
	}
	for _, k := range p.keys() {
		switch k {
		case "name", "arguments":
		case "_meta":
			if len(p[k]) == 0 || p[k][0] != '{' {
				return nil, newErr(CodeShapeInvalid, "params._meta", "must be an object")
			}
		default:
			return nil, newErr(CodeShapeInvalid, "params."+k, "would reach the server without being bound by the arguments digest")
		}
	}
	name, err := p.reqStr("params", "name")
	if err != nil {
		return nil, err
	}
	if err := CheckToolName("params.name", name); err != nil {
		return nil, err
	}
	args, ok := p["arguments"]
	if !ok {
		args = json.RawMessage("{}")
	}
	c, err := NewCandidate(Input{Vendor: VendorMCP, VendorID: id, ToolName: name, Arguments: args}, mc)
	if err != nil {
		return nil, withField(err, "params.arguments")
	}
	return c, nil
}

// rpcID returns the canonical JSON text of a request id: a string or a number (JSON-RPC 2.0
// §4; MCP forbids null). A request without one is a notification, which cannot be answered and
// so is not mapped.
func rpcID(m members) (string, error) {
	v, ok := m["id"]
	if !ok {
		return "", newErr(CodeShapeInvalid, "id", "required: a tools/call notification cannot be answered")
	}
	if c := v[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return "", newErr(CodeShapeInvalid, "id", "must be a string or a number")
	}
	if len(v) > MaxIDBytes {
		return "", newErr(CodeShapeInvalid, "id", "too long")
	}
	return string(v), nil
}
