package mcpproxy

import (
	"context"
	"net/http"

	"github.com/actgate/actgate/internal/mcpproxy/admission"
)

// Who may talk to the gate is internal/mcpproxy/admission's: the DNS rebinding refusal, the
// agents' authentication and the bound on open sessions. These are its types as the rest of
// the product names them (Config.Agents, Config.Sessions).
type (
	// AgentAuthenticator names the agent behind an HTTP request (admission.AgentAuthenticator).
	AgentAuthenticator = admission.AgentAuthenticator
	// AgentChallenger is an AgentAuthenticator that answers its refusals itself
	// (admission.AgentChallenger).
	AgentChallenger = admission.AgentChallenger
	// BearerAgents authenticates agents by bearer token (admission.BearerAgents).
	BearerAgents = admission.BearerAgents
	// SessionLimiter bounds the agent sessions open at once (admission.SessionLimiter).
	SessionLimiter = admission.SessionLimiter
)

// NewBearerAgents returns the authenticator of tokens, agent name → token
// (admission.NewBearerAgents).
func NewBearerAgents(tokens map[string][]byte) (*BearerAgents, error) {
	return admission.NewBearerAgents(tokens)
}

// NewSessionLimiter returns a limiter of max sessions in total and perAgent per agent
// (admission.NewSessionLimiter).
func NewSessionLimiter(max, perAgent int) *SessionLimiter {
	return admission.NewSessionLimiter(max, perAgent)
}

// RebindingHeader names the header that shows r reached a loopback listener from a page of
// another site, or "" (admission.RebindingHeader).
func RebindingHeader(r *http.Request) string { return admission.RebindingHeader(r) }

// authenticate admits r (admission.Authenticate) with the proxy's authenticator.
func (p *Proxy) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	return admission.Authenticate(w, r, p.cfg.Agents, p.cfg.Server)
}

// requestAgent is the agent a request was authenticated as, or the configured agent.
func (p *Proxy) requestAgent(ctx context.Context) string {
	if a, ok := admission.AgentOf(ctx); ok {
		return a
	}
	return p.cfg.Agent
}
