package sidecar

import (
	"fmt"
	"net/http"

	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/admission"
)

// agentVerifier is the verifier of the agents' access tokens under the policy's
// spec.agentAuth (Config.AgentOAuth), or nil without it (docs/identity.md "Agents in a pod").
// It accepts what the authority service accepts — the same settings, the policy's audience
// only — and publishes its metadata under the sidecar's loopback URL (Config.ExternalURL,
// default http://LISTEN). The service verifies each token again: this check answers the agent
// with the MCP authorization specification's 401 challenge, it names no agent on its own.
func agentVerifier(cfg Config) (*agentoauth.Verifier, error) {
	if cfg.AgentOAuth == nil {
		return nil, nil
	}
	ext := cfg.ExternalURL
	if ext == "" {
		ext = "http://" + cfg.Listen
	}
	o, err := agentoauth.PolicyOptions(cfg.AgentOAuth, ext, []string{cfg.SinkID})
	if err != nil {
		return nil, fmt.Errorf("agent OAuth: %w", err)
	}
	v, err := agentoauth.New(o)
	if err != nil {
		return nil, fmt.Errorf("agent OAuth: %w", err)
	}
	return v, nil
}

// handleAgentOAuth serves the protected resource metadata of each server's path (RFC 9728 §3)
// and puts the host-loop endpoints behind the agents' tokens too.
func handleAgentOAuth(mux *http.ServeMux, v *agentoauth.Verifier, upstreams []Upstream, loop *hostloop.Loop) {
	names := make([]string, len(upstreams))
	for i, u := range upstreams {
		names[i] = u.Name
	}
	meta := v.MetadataHandler(names)
	mux.Handle(agentoauth.MetadataPath, meta)
	mux.Handle(agentoauth.MetadataPath+"/", meta)
	host := loop.Handler(func(r *http.Request) (string, bool) { return admission.AgentOf(r.Context()) })
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r, ok := admission.Authenticate(w, r, v, ""); ok {
			host.ServeHTTP(w, r)
		}
	})
	mux.Handle(hostloop.EnforcePath, authed)
	mux.Handle(hostloop.CompletePath, authed)
}

var _ mcpproxy.AgentChallenger = (*agentoauth.Verifier)(nil)
