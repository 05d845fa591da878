package inject

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/actgate/actgate/api/v1alpha1"
)

// agentAuthOf is the sidecar's ACTGATE_AGENT_OAUTH: the selecting policies' spec.agentAuth as
// JSON (docs/identity.md "Agents in a pod"), "" when none has one. Policies that disagree —
// one with it and one without, or two different ones — are refused: one sidecar has one way
// of signing agents in, and the authority service would refuse the pod as ambiguous anyway.
func agentAuthOf(policies []v1alpha1.ToolPolicy) (string, error) {
	var auth *v1alpha1.AgentAuth
	for i, p := range policies {
		if i > 0 && !equality.Semantic.DeepEqual(auth, p.Spec.AgentAuth) {
			return "", fmt.Errorf("%w: %s/%s and %s/%s declare different spec.agentAuth; one sidecar has one", ErrPolicy,
				policies[0].Namespace, policies[0].Name, p.Namespace, p.Name)
		}
		auth = p.Spec.AgentAuth
	}
	if auth == nil {
		return "", nil
	}
	b, err := json.Marshal(auth)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
