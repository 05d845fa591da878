// Package action builds, canonicalizes and digests the action an option
// authorises: the object {"tool": <name>, "args": <arguments>}, the
// material shape of EP-TOOL-CALL-BINDING-v1 (docs/architecture.md "The action an
// option authorises"). Its digest is an option's action_digest
// (envelope-04 §5.6) and the act's arguments binding; the sink recomputes
// it from the live call and never trusts one carried by the agent.
//
// The destination (MCP server identity, origin) is deliberately not part of
// the material: it is bound by the authority and checked at the sink.
//
// Under jcs.Strict, the profile bounds of envelope-04 §6.3 apply to the
// whole action (§5.6): arguments outside them are rejected with
// CodeOutOfProfile, because such an action cannot be put in front of a
// human for a binding decision. Machine-only policy may digest the same
// arguments under jcs.Full (docs/architecture.md "Digests").
package action
