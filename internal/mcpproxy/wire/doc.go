// Package wire is the MCP proxy's wire: JSON-RPC framing and error codes, MCP method names,
// streamable-HTTP header names and media types, the reading of an upstream's event stream
// (ScanEvents, ReadJSONAnswer) and the small parsers of untrusted bytes the revisions share
// (ParseCancelled, Accepts). It imports nothing of the proxy (docs/architecture.md "The MCP
// proxy").
package wire
