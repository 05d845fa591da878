// Package stateless is the MCP 2026-07-28 revision's request (SEP-2575, SEP-2243): a POST that
// carries its own version, capabilities and standard headers instead of a session. It parses
// and checks one such request before anything acts on it (Parse, CheckParamHeaders: parsers of
// untrusted bytes with table and fuzz tests), scopes it (Scope, ContinuationScope), reads the
// x-mcp-header declarations of tools (ToolHeaders) and shapes a stateful upstream's results as
// the revision requires (WithResultType, WithCacheHints, LogAllowed), and reads a
// subscriptions/listen filter (ParseListen, HonoredFilter, StampSubscription). The agent side that serves
// such requests is internal/mcpproxy/agent2026 (docs/architecture.md "The MCP proxy"). It
// imports the wire and nothing else of the proxy.
package stateless
