package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// maxAgentVerifiers bounds the verifiers the service holds: one per ToolPolicy with
// spec.agentAuth. Past it, one is dropped (and built again when its policy's next call comes):
// the bound costs a fetch of the provider's keys, never a verification.
const maxAgentVerifiers = 512

// agentVerifiers are the verifiers of the policies' spec.agentAuth, by policy, built from the
// policy's settings as last seen (a changed spec.agentAuth builds a new one).
type agentVerifiers struct {
	mu sync.Mutex
	m  map[string]agentVerifier
}

type agentVerifier struct {
	spec []byte // spec.agentAuth and the reserved identities, as JSON
	v    *agentoauth.Verifier
}

// agentOps are the operations that name the agent (Acts, binding moments): under
// spec.agentAuth each must carry the agent's token. Consume and Report refer to an Act such a
// request recorded, and to the authority it issued.
var agentOps = map[review.Operation]bool{
	review.OperationReview: true, review.OperationPermit: true, review.OperationRefusal: true, review.OperationPropose: true,
}

// agentIdentity names the agent of a request of c's pod (docs/identity.md "Agents in a pod"):
// under the policy's spec.agentAuth, the claim of the agent's access token in
// review.AgentTokenHeader, which the service verifies itself — issuer, audience, expiry,
// signature against the provider's keys — so a sidecar (which the pod's author controls)
// cannot name an agent the provider did not sign for. It sets c.user, the name Acts, binding
// moments and receipts carry. Without spec.agentAuth the pod's service account stays the
// agent, and a request carrying an agent token is refused: the token would be ignored.
func (s *Service) agentIdentity(ctx context.Context, c *caller, r *http.Request, op review.Operation) *outcome {
	tokens := r.Header.Values(review.AgentTokenHeader)
	refuse := func(msg string) *outcome {
		o := deny(http.StatusUnauthorized, ef.EFAgentUnauthenticated, review.ReasonAgentUnauthenticated, msg)
		return &o
	}
	a := c.policy.Spec.AgentAuth
	switch {
	case a == nil && len(tokens) == 0:
		return nil
	case a == nil:
		return refuse(fmt.Sprintf("ToolPolicy %s has no spec.agentAuth: the agent's token is not accepted; its pod's service account is the agent.", c.policy.Name))
	case len(tokens) == 0 && !agentOps[op]:
		return nil
	case len(tokens) == 0:
		return refuse(fmt.Sprintf("ToolPolicy %s has spec.agentAuth: the request must carry the agent's access token (%s).", c.policy.Name, review.AgentTokenHeader))
	case len(tokens) > 1:
		return refuse("The request carries more than one agent token.")
	}
	v, err := s.agents.get(c.policy)
	if err != nil {
		s.log.Error(err, "spec.agentAuth does not configure a verifier; refusing its agents", "policy", c.policy.Namespace+"/"+c.policy.Name)
		o := deny(http.StatusOK, ef.EFPolicyDenied, review.ReasonPolicyNotReady, fmt.Sprintf("ToolPolicy %s is not served: its spec.agentAuth is not usable.", c.policy.Name))
		return &o
	}
	agent, rf := v.Verify(ctx, tokens[0], "")
	if rf != nil {
		s.log.V(1).Info("agent token refused", "policy", c.policy.Namespace+"/"+c.policy.Name, "pod", c.podName, "code", rf.Code, "reason", rf.Description)
		if rf.Status == http.StatusServiceUnavailable {
			o := deny(http.StatusServiceUnavailable, rf.Code, review.ReasonAgentIDPUnavailable, rf.Description)
			return &o
		}
		return refuse("The agent's token was refused: " + rf.Description + ".")
	}
	c.user = agent
	return nil
}

// reservedIdentities are the names no agent may take under p: its principals (an agent named
// as a principal would resolve its own escalations) and its sink.
func reservedIdentities(p *v1alpha1.ToolPolicy) []string {
	var out []string
	if p.Spec.Sink != nil && p.Spec.Sink.ID != "" {
		out = append(out, p.Spec.Sink.ID)
	}
	for _, r := range p.Spec.Rules {
		if r.Evidence != nil {
			out = append(out, r.Evidence.Principals...)
		}
	}
	return out
}

// get is the verifier of p's spec.agentAuth, built on first use and again when the settings
// changed.
func (a *agentVerifiers) get(p *v1alpha1.ToolPolicy) (*agentoauth.Verifier, error) {
	reserved := reservedIdentities(p)
	spec, err := json.Marshal(struct {
		Auth     *v1alpha1.AgentAuth
		Reserved []string
	}{p.Spec.AgentAuth, reserved})
	if err != nil {
		return nil, err
	}
	key := p.Namespace + "/" + p.Name
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.m[key]; ok && bytes.Equal(e.spec, spec) {
		return e.v, nil
	}
	// The service publishes no metadata; the verifier's external URL is never shown.
	o, err := agentoauth.PolicyOptions(p.Spec.AgentAuth, "https://actgate-authority.invalid", reserved)
	if err != nil {
		return nil, err
	}
	v, err := agentoauth.New(o)
	if err != nil {
		return nil, err
	}
	if a.m == nil {
		a.m = map[string]agentVerifier{}
	}
	if _, ok := a.m[key]; !ok && len(a.m) >= maxAgentVerifiers {
		for k := range a.m {
			delete(a.m, k)
			break
		}
	}
	a.m[key] = agentVerifier{spec: spec, v: v}
	return v, nil
}
