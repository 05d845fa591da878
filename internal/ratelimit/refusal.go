package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

// Refusal is a call a rule's limit refuses: why, in words for the agent, and how long until the
// bucket holds a call again (0 when the refusal is the Set's bound on buckets or a limit that
// cannot be enforced).
type Refusal struct {
	Message string
	Wait    time.Duration
}

// Decide takes one call from k's bucket under rule's limit l (docs/api.md "Rate limits") and
// returns nil when the call may run. A call the limit refuses takes nothing from the bucket;
// its Wait is rounded up to whole seconds and never more than l.Period. When the Set holds as
// many buckets as it allows and none can be dropped, or l cannot be enforced, the call is
// refused too (fail closed). shared says the bucket is the whole process's (k.Agent empty), not
// the agent's, for the message.
func (s *Set) Decide(k Key, l Limit, rule string, shared bool) *Refusal {
	wait, err := s.Take(k, l)
	switch {
	case errors.Is(err, ErrBound):
		return &Refusal{Message: "The gate holds as many rate-limit buckets as it allows; the call was not sent."}
	case err != nil:
		return &Refusal{Message: "The rule's rate limit cannot be enforced; the call was not sent."}
	case wait > 0:
		if wait%time.Second != 0 {
			wait = wait.Truncate(time.Second) + time.Second
		}
		if wait > l.Period {
			wait = l.Period
		}
		whose := "this agent's calls of the tool"
		if shared {
			whose = "the tool's calls"
		}
		return &Refusal{Wait: wait, Message: fmt.Sprintf("Rule %s allows %s at most %d per %s (bursts of %d); the call was not sent. Retry after %s.",
			rule, whose, l.Calls, l.Period, l.Burst, wait)}
	}
	return nil
}
