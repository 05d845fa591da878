package service

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/policy"
)

// maxCachedPolicies bounds the compiled-policy cache; past it the cache starts over.
const maxCachedPolicies = 4096

// policyCache holds one compiled policy per ToolPolicy UID, for the generation and epoch it was
// compiled at. Compiling CEL costs milliseconds; a review reads the policy from the API server
// and reuses the compiled form while its generation and epoch are unchanged.
type policyCache struct {
	mu      sync.Mutex
	entries map[types.UID]cachedPolicy
}

type cachedPolicy struct {
	generation, epoch int64
	compiled          *policy.Compiled
}

func newPolicyCache() *policyCache { return &policyCache{entries: map[types.UID]cachedPolicy{}} }

// ready reports why p may not be served yet, or "" when it may: its Accepted condition is True
// for its current generation (the controller compiled this spec) and it has a policy epoch to
// bind authorities to.
func ready(p *v1alpha1.ToolPolicy) string {
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition)
	switch {
	case c == nil || c.Status != metav1.ConditionTrue:
		return "it is not Accepted"
	case c.ObservedGeneration != p.Generation && p.Status.ObservedGeneration != p.Generation:
		return "its current generation has not been accepted yet"
	case p.Status.PolicyEpoch < 1:
		return "it has no policy epoch yet"
	}
	return ""
}

// compiled returns the compiled form of p, compiling it when its generation or epoch changed.
func (pc *policyCache) compiled(p *v1alpha1.ToolPolicy) (*policy.Compiled, error) {
	pc.mu.Lock()
	e, ok := pc.entries[p.UID]
	pc.mu.Unlock()
	if ok && e.generation == p.Generation && e.epoch == p.Status.PolicyEpoch {
		return e.compiled, nil
	}
	c, err := policy.Compile(p.Namespace+"/"+p.Name, &p.Spec, p.Status.PolicyEpoch)
	if err != nil {
		return nil, fmt.Errorf("ToolPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	pc.mu.Lock()
	if len(pc.entries) >= maxCachedPolicies {
		pc.entries = map[types.UID]cachedPolicy{}
	}
	pc.entries[p.UID] = cachedPolicy{generation: p.Generation, epoch: p.Status.PolicyEpoch, compiled: c}
	pc.mu.Unlock()
	return c, nil
}
