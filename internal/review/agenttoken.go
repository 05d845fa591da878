package review

// AgentTokenHeader carries, on a request of a pod whose ToolPolicy has spec.agentAuth, the
// agent's access token the sidecar verified (Authorization carries the pod's service-account
// token). The service verifies it itself against the policy's issuer and audience and names
// the agent by it (docs/identity.md "Agents in a pod"): the sidecar runs in the agent's pod,
// so an agent name it merely asserted would be the pod author's choice. The token travels only
// over the TLS channel to the service and is never passed upstream.
const AgentTokenHeader = "Actgate-Agent-Token"

// Refusals of a request's agent token (spec.agentAuth).
const (
	// ReasonAgentUnauthenticated: the policy has spec.agentAuth and the request carries no
	// agent token (a Review, Permit, Refusal or Propose), or one that does not verify (expired,
	// another issuer or audience, an unknown key, no signature); or the policy has none and the
	// request carries one. HTTP 401.
	ReasonAgentUnauthenticated Reason = "AgentUnauthenticated"
	// ReasonAgentIDPUnavailable: the provider's keys could not be fetched and none cached
	// verifies the token. HTTP 503; the call is refused, never admitted.
	ReasonAgentIDPUnavailable Reason = "AgentIDPUnavailable"
)
