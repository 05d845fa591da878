// Package upstream is the MCP proxy's HTTP client toward the protected server, for both
// revisions: the Transport that presents the credential only to its origin and propagates the
// trace context, the Client that never follows a redirect, the synchronous round tripper of the
// direct tools/call path (SyncTransport), the record of how the upstream framed its initialize
// answer (InitFraming), and the Attempt a tools/call is observed by on the wire, with its
// classification into the sink's outcomes (Classify; docs/architecture.md "tools/call and its
// outcomes"). It imports the wire and nothing else of the proxy.
package upstream
