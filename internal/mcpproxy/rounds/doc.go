// Package rounds is the requestState of the gate's own input-required rounds in front of a
// stateful (2025) upstream (docs/architecture.md "Input-required rounds toward a 2025
// upstream"): what a state says (Claims), minting it under the proxy's MAC key (Mint) and
// verifying one an agent sends back (Parse), the digest it binds (Bound: the agent, the
// server, the request's canonical binding, the dispatched call's operation id, the round's
// pending upstream requests) and the continuation's other member, inputResponses
// (ParseInputResponses). Every parser here reads an agent's bytes: a bad one is a clear error
// (Error), never a panic or a continuation.
//
// The held exchanges themselves (the upstream request kept open while the agent answers) are
// internal/mcpproxy's.
package rounds
