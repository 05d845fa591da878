// Package ratelimit is the gate's hot-path rate limits: token buckets, one per key, decided in
// the process that serves the agent (the pod's sidecar, or actgate serve) without the control
// plane (docs/api.md "Rate limits"). The buckets are golang.org/x/time/rate Limiters.
//
// The keys are made of what an agent chooses (its tool names, within a rule's globs), so the
// set is bounded: in all (MaxBuckets) and per agent (MaxBucketsPerAgent). A bucket that is
// full again is the same as a new one and is dropped when room is needed; when no bucket can
// be dropped, Take refuses (fail closed) and says the bound was reached.
package ratelimit

import (
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Default bounds of a Set.
const (
	DefaultMaxBuckets         = 65536
	DefaultMaxBucketsPerAgent = 1024
)

// Limit is one rule's limit: Burst calls at once, refilled continuously at Calls per Period.
type Limit struct {
	Calls  int
	Period time.Duration
	Burst  int
}

// Valid reports whether l can be enforced.
func (l Limit) Valid() bool { return l.Calls > 0 && l.Period > 0 && l.Burst > 0 }

func (l Limit) every() rate.Limit {
	return rate.Limit(float64(l.Calls) / l.Period.Seconds())
}

// Key names one bucket. Agent is empty for a limit shared by every agent of the process.
type Key struct {
	Policy, Rule, Server, Tool, Agent string
}

// ErrBound is Take's error when a new bucket is needed and none can be dropped: the process
// holds as many buckets as it allows, in all or for this agent.
var ErrBound = errors.New("ratelimit: the gate holds as many rate-limit buckets as it allows")

// Set is the buckets of one process. The zero value is not usable; use New.
type Set struct {
	maxAll, maxAgent int
	now              func() time.Time

	mu       sync.Mutex
	buckets  map[Key]*rate.Limiter
	perAgent map[string]int
}

// Options configure New. Zero values take the defaults.
type Options struct {
	MaxBuckets, MaxBucketsPerAgent int
	Now                            func() time.Time
}

// New returns an empty Set.
func New(o Options) *Set {
	if o.MaxBuckets <= 0 {
		o.MaxBuckets = DefaultMaxBuckets
	}
	if o.MaxBucketsPerAgent <= 0 {
		o.MaxBucketsPerAgent = DefaultMaxBucketsPerAgent
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Set{maxAll: o.MaxBuckets, maxAgent: o.MaxBucketsPerAgent, now: o.Now,
		buckets: map[Key]*rate.Limiter{}, perAgent: map[string]int{}}
}

// Take takes one call from k's bucket under l. It returns 0 when the call may run, or how long
// until the bucket holds a call again. An invalid l is refused as ErrBound would be: a limit
// the gate cannot enforce never lets a call through.
func (s *Set) Take(k Key, l Limit) (time.Duration, error) {
	if !l.Valid() {
		return 0, errors.New("ratelimit: invalid limit")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	b, ok := s.buckets[k]
	if !ok {
		if err := s.roomFor(k.Agent, now); err != nil {
			return 0, err
		}
		b = rate.NewLimiter(l.every(), l.Burst)
		b.SetLimitAt(now, l.every()) // the bucket starts full at now
		s.buckets[k] = b
		s.perAgent[k.Agent]++
	} else if b.Limit() != l.every() || b.Burst() != l.Burst {
		// The policy changed the limit: the bucket keeps what it holds, at the new rate.
		b.SetLimitAt(now, l.every())
		b.SetBurstAt(now, l.Burst)
	}
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return math.MaxInt64, nil
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, nil
	}
	return 0, nil
}

// roomFor makes room for a new bucket of agent: at a bound, every bucket that is full again
// (the same as a new one) is dropped; ErrBound when that is not enough.
func (s *Set) roomFor(agent string, now time.Time) error {
	if len(s.buckets) < s.maxAll && s.perAgent[agent] < s.maxAgent {
		return nil
	}
	for k, b := range s.buckets {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(s.buckets, k)
			if s.perAgent[k.Agent]--; s.perAgent[k.Agent] <= 0 {
				delete(s.perAgent, k.Agent)
			}
		}
	}
	if len(s.buckets) >= s.maxAll || s.perAgent[agent] >= s.maxAgent {
		return ErrBound
	}
	return nil
}

// Len is how many buckets the Set holds.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buckets)
}
