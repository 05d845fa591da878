package tracing

import (
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// The OpenTelemetry semantic conventions for MCP (semantic-conventions-genai docs/gen-ai/mcp.md,
// status Development) name an MCP span `{mcp.method.name} {target}`, the target being the
// tool's name for tools/call, and give it mcp.method.name, gen_ai.tool.name,
// gen_ai.operation.name=execute_tool, mcp.protocol.version and error.type. actgate's MCP spans
// carry these beside its own actgate.* attributes, so trace backends and dashboards built for
// the conventions read them without a mapping. The opt-in argument and result attributes
// (gen_ai.tool.call.arguments, .result) are never recorded: arguments appear as digests only.
const (
	// MethodToolsCall is mcp.method.name of a tool call.
	MethodToolsCall = "tools/call"
	// OperationExecuteTool is gen_ai.operation.name of a tool call.
	OperationExecuteTool = "execute_tool"
	// ErrorTypeToolError is error.type of a call the tool answered with isError true.
	ErrorTypeToolError = "tool_error"
)

// ToolCallSpanName is the conventions' span name of a tools/call: "tools/call NAME", or
// "tools/call" when name is empty (a name the gate does not know is left out, so an agent
// cannot grow the set of span names: call it with "" for those).
func ToolCallSpanName(name string) string {
	if name == "" {
		return MethodToolsCall
	}
	return MethodToolsCall + " " + name
}

// ToolCallAttributes are the conventions' attributes of a tools/call span: the method, the
// tool, the operation and, when known, the MCP revision the span's peer speaks.
func ToolCallAttributes(tool, protocolVersion string) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		semconv.McpMethodNameKey.String(MethodToolsCall),
		semconv.GenAIOperationNameKey.String(OperationExecuteTool),
		semconv.GenAIToolName(tool),
		semconv.NetworkTransportTCP,
		semconv.NetworkProtocolName("http"),
	}
	if protocolVersion != "" {
		kv = append(kv, semconv.McpProtocolVersion(protocolVersion))
	}
	return kv
}

// ErrorType is the conventions' error.type attribute.
func ErrorType(t string) attribute.KeyValue { return semconv.ErrorTypeKey.String(t) }

// ServerAttributes are server.address and server.port of a client span calling rawURL (none
// when it does not parse).
func ServerAttributes(rawURL string) []attribute.KeyValue {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	kv := []attribute.KeyValue{semconv.ServerAddress(host)}
	if p, err := strconv.Atoi(port); err == nil && p > 0 && p < 65536 {
		kv = append(kv, semconv.ServerPort(p))
	}
	return kv
}
