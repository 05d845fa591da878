// Package actgate is the root of the actgate module: a finality sink for AI-agent tool calls.
//
// A tool call printed by a model becomes an AgentCandidateAct (internal/act) that stays
// non-effective until the sink (internal/sink) has verified and consumed single-use authority
// (internal/authority) bound to the call's canonical arguments digest (internal/jcs,
// internal/action), its destination and its sink. High-consequence acts are committed by a human
// through a binding-moment envelope (internal/envelope). The Kubernetes API lives in
// api/v1alpha1, its reconcilers in controllers/ and its admission webhooks in webhook/.
package actgate
