package sink

import (
	"github.com/actgate/actgate/internal/ratelimit"
)

// overRate takes one call from the bucket of the governing rule's rate limit, when it has one
// (docs/api.md "Rate limits"): per agent and tool, or per tool for the whole process. It is
// decided here, in the process that serves the agent, before the call is registered, issued
// or sent, and never asks the control plane; internal/ratelimit (Set.Decide) decides and words
// the refusal, nil when the call may proceed.
func (g *gate) overRate(cl *callState) *ratelimit.Refusal {
	rl := cl.dec.RateLimit
	if rl == nil || cl.dec.Outcome == PolicyDeny {
		return nil
	}
	k := ratelimit.Key{Policy: cl.dec.Policy, Rule: cl.dec.Rule, Server: cl.c.Server, Tool: cl.c.Tool}
	if !rl.PerPod {
		k.Agent = cl.c.Agent
	}
	return g.rates.Decide(k, rl.Limit, cl.dec.Rule, rl.PerPod)
}
