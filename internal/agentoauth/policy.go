package agentoauth

import (
	"context"
	"errors"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Defaults of a ToolPolicy's spec.agentAuth, whose bounds the policy does not set.
const (
	policyClockSkew   = 30 * time.Second
	policyJWKSRefresh = 30 * time.Second
	policyJWKSMaxAge  = time.Hour
)

// DefaultAlgorithms are the JWS algorithms accepted when none are configured: asymmetric
// only (docs/identity.md "What the gate checks").
var DefaultAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}

// PolicyOptions are the Options of a ToolPolicy's spec.agentAuth (docs/identity.md "Agents in
// a pod"): the sidecar and the authority service build their verifiers from the same
// settings, so they accept the same tokens. Only the configured audience is accepted
// (AudienceOnly); externalURL is where the sidecar publishes its metadata (the authority
// service, which publishes none, passes any URL). reserved are the policy's principals and
// its sink, which no agent may be.
func PolicyOptions(a *v1alpha1.AgentAuth, externalURL string, reserved []string) (Options, error) {
	if a == nil {
		return Options{}, errors.New("agentoauth: the policy has no agentAuth")
	}
	claim := a.AgentClaim
	if claim == "" {
		claim = "sub"
	}
	return Options{
		Issuer: a.Issuer, ExternalURL: externalURL, Audience: a.Audience, AudienceOnly: true, JWKSURL: a.JWKSURL,
		Algorithms: DefaultAlgorithms, AgentClaim: claim, AgentPrefix: a.AgentPrefix, Scopes: a.Scopes, Reserved: reserved,
		ClockSkew: policyClockSkew, JWKSRefresh: policyJWKSRefresh, JWKSMaxAge: policyJWKSMaxAge, CAPEM: []byte(a.CABundle),
	}, nil
}

// tokenKey carries an agent's verified access token in a context.
type tokenKey struct{}

// WithToken returns ctx carrying the agent's access token, verified by the sidecar, for the
// authority service to verify again (internal/review sends it with the review; the service
// never takes the agent's name from the sidecar). The token is never sent upstream.
func WithToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, tokenKey{}, token)
}

// TokenFrom is the agent's access token WithToken put in ctx, or "".
func TokenFrom(ctx context.Context) string {
	t, _ := ctx.Value(tokenKey{}).(string)
	return t
}
