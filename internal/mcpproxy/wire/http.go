package wire

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MCP streamable-HTTP headers the direct paths read and write.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-ID"
)

// HeaderReplayed is the gate's own response header on the answer to a retry of a tools/call
// that already ran, answered from the journal (tool-use-binding §9), value "true". The
// answer's JSON-RPC result is the one first given, unchanged: the marker stays out of what
// an agent framework renders to its model (docs/api.md "Per method").
const HeaderReplayed = "Actgate-Replayed"

// VersionStandardHeaders is the first MCP protocol version (SEP-2575) whose requests carry
// per-request versions and standard Mcp-Method/Mcp-Name headers. Sessions at or after it are
// served by the SDK alone, both toward the agent and toward the upstream.
const VersionStandardHeaders = "2026-07-28"

// WriteRPCError writes a JSON-RPC error response with an HTTP status, as the SDK does.
func WriteRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, jerr *jsonrpc.Error) {
	w.Header().Set("Content-Type", MediaJSON)
	w.WriteHeader(status)
	if data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: jerr}); err == nil {
		_, _ = w.Write(data)
	}
}

// Accepts is the SDK's reading of the Accept header (streamableAccepts): whether it admits
// application/json and text/event-stream.
func Accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case MediaJSON, "application/*":
				jsonOK = true
			case MediaSSE, "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// The media types of MCP's streamable HTTP transport: a JSON answer and an event stream.
const (
	MediaJSON = "application/json"
	MediaSSE  = "text/event-stream"
)

// MCP 2026-07-28 (SEP-2575, SEP-2243) standard request headers: the method, the name of the
// tool, prompt or resource, and the prefix of a tool's parameter headers.
const (
	HeaderMethod      = "Mcp-Method"
	HeaderName        = "Mcp-Name"
	HeaderParamPrefix = "Mcp-Param-"
)

// ReplayCounter is the http.RoundTripper of an MCP client of the gate that counts, in N, the
// answers the gate marked a journal replay (HeaderReplayed "true"): the official SDKs' client
// sessions do not show response headers, their HTTP clients do. Several counters may share one
// N. Base nil is http.DefaultTransport.
type ReplayCounter struct {
	Base http.RoundTripper
	N    *atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (c ReplayCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	base := c.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err == nil && resp.Header.Get(HeaderReplayed) == "true" {
		c.N.Add(1)
	}
	return resp, err
}
