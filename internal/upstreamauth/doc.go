// Package upstreamauth obtains the short-lived OAuth access tokens the gate (or the pod's
// sidecar) presents to an upstream MCP server, from the organisation's identity provider, so
// that no long-lived upstream credential sits in a file and the agent's own token is never
// passed through (MCP authorization, "Token Passthrough"; docs/identity.md "Gate → upstream").
//
// Two grants are spoken at the provider's token endpoint:
//   - client credentials (RFC 6749 §4.4), the client authenticated by its secret
//     (client_secret_basic) or by a private-key JWT assertion (RFC 7523 §2.2, private_key_jwt);
//   - token exchange (RFC 8693) of the workload's own identity token (the pod's projected
//     service-account token, or a configured subject-token file) for an upstream token.
//
// Every request names the upstream as the resource (RFC 8707), and token exchange also as the
// audience. A Source caches the token until shortly before it expires, refreshes it in the
// background before then without holding calls, and lets concurrent callers share one request
// to the provider. A token is never logged and never leaves the proxy→upstream leg. When no
// token can be obtained, Token returns an *Error: the upstream request is not sent
// (docs/architecture.md "tools/call and its outcomes").
package upstreamauth
