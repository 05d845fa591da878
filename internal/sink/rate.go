package sink

import (
	"errors"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/ratelimit"
)

// overRate is a call the governing rule's rate limit refuses: why, for the agent, and how long
// until the bucket holds a call again (0 when the refusal is the gate's bound on buckets).
type overRate struct {
	message string
	wait    time.Duration
}

// overRate takes one call from the bucket of the governing rule's rate limit, when it has one
// (docs/api.md "Rate limits"): per agent and tool, or per tool for the whole process. It is
// decided here, in the process that serves the agent, before the call is registered, issued
// or sent, and never asks the control plane. A call the limit refuses takes nothing from the
// bucket. When the process holds as many buckets as it allows and none can be dropped, the
// call is refused too (fail closed).
func (g *gate) overRate(cl *callState) *overRate {
	rl := cl.dec.RateLimit
	if rl == nil || cl.dec.Outcome == PolicyDeny {
		return nil
	}
	k := ratelimit.Key{Policy: cl.dec.Policy, Rule: cl.dec.Rule, Server: cl.c.Server, Tool: cl.c.Tool}
	if !rl.PerPod {
		k.Agent = cl.c.Agent
	}
	wait, err := g.rates.Take(k, rl.Limit)
	switch {
	case errors.Is(err, ratelimit.ErrBound):
		return &overRate{message: "The gate holds as many rate-limit buckets as it allows; the call was not sent."}
	case err != nil:
		return &overRate{message: "The rule's rate limit cannot be enforced; the call was not sent."}
	case wait > 0:
		if wait%time.Second != 0 {
			wait = wait.Truncate(time.Second) + time.Second
		}
		if wait > rl.Period {
			wait = rl.Period
		}
		whose := "this agent's calls of the tool"
		if rl.PerPod {
			whose = "the tool's calls"
		}
		return &overRate{wait: wait, message: fmt.Sprintf("Rule %s allows %s at most %d per %s (bursts of %d); the call was not sent. Retry after %s.",
			cl.dec.Rule, whose, rl.Calls, rl.Period, rl.Burst, wait)}
	}
	return nil
}
