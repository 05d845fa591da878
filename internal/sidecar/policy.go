package sidecar

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// DefaultPolicyRefresh is how often the sidecar asks the authority service for the policy
// that governs its pod (ServicePolicy).
const DefaultPolicyRefresh = time.Second

// ServicePolicy is the compiled ToolPolicy that governs the pod, as the authority service
// serves it (operation Policy: the service's own selection rule, exactly one Accepted policy
// selecting the pod), asked for every refresh interval and compiled once per generation and
// epoch with internal/policy, as the standalone gate compiles its policy. It fails closed:
// until a policy arrives, and whenever the service says there is none that may be served, every
// call is a PolicyDeny (EF_POLICY_DENIED). A service that cannot be reached leaves the last
// policy in force: its epoch is bound into every authority, and the service refuses an
// authority of another epoch at issue and at consume.
type ServicePolicy struct {
	client    *review.Client
	namespace string
	timeout   time.Duration
	every     time.Duration
	log       logr.Logger

	cur     atomic.Pointer[servedPolicy]
	mu      sync.Mutex
	changed chan struct{}
	done    chan struct{}
	exited  chan struct{}
}

type servedPolicy struct {
	name              string
	generation, epoch int64
	compiled          *policy.Compiled // nil: none may be served
	eval              sink.PolicyEvaluator
	why               string
}

// NewServicePolicy asks the service once (bounded by timeout) and then every interval until
// Close. namespace is the pod's: the compiled policy is named namespace/name, as the service
// names it.
func NewServicePolicy(c *review.Client, namespace string, timeout, every time.Duration, log logr.Logger) *ServicePolicy {
	if every <= 0 {
		every = DefaultPolicyRefresh
	}
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	p := &ServicePolicy{client: c, namespace: namespace, timeout: timeout, every: every, log: log, changed: make(chan struct{}),
		done: make(chan struct{}), exited: make(chan struct{})}
	p.refresh()
	go p.run()
	return p
}

func (p *ServicePolicy) run() {
	defer close(p.exited)
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.refresh()
		}
	}
}

// Close stops following the service.
func (p *ServicePolicy) Close() {
	select {
	case <-p.done:
	default:
		close(p.done)
		<-p.exited
	}
}

func (p *ServicePolicy) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	resp, err := p.client.Do(ctx, review.Request{Operation: review.OperationPolicy})
	if err != nil {
		p.log.V(1).Info("Policy not refreshed: the authority service did not answer", "cause", err.Error())
		return
	}
	cur := p.cur.Load()
	if !resp.Allowed || resp.Policy == nil {
		switch resp.Reason {
		case review.ReasonTimeout, review.ReasonUnavailable:
			return // the service's own failure: keep what is in force
		}
		if cur == nil || cur.compiled != nil || cur.why != resp.Message {
			p.log.Info("No policy may be served; every call is refused", "code", resp.Code, "reason", resp.Reason)
			p.set(&servedPolicy{why: resp.Message})
		}
		return
	}
	gp := resp.Policy
	if cur != nil && cur.compiled != nil && cur.name == gp.Name && cur.generation == gp.Generation && cur.epoch == gp.Epoch {
		return
	}
	var spec v1alpha1.ToolPolicySpec
	if err := json.Unmarshal(gp.Spec, &spec); err != nil {
		p.log.Error(err, "Policy not usable: its spec does not decode; every call is refused", "policy", gp.Name)
		p.set(&servedPolicy{name: gp.Name, why: "the policy does not decode"})
		return
	}
	c, err := policy.Compile(p.namespace+"/"+gp.Name, &spec, gp.Epoch)
	if err != nil {
		p.log.Error(err, "Policy not usable: it does not compile; every call is refused", "policy", gp.Name)
		p.set(&servedPolicy{name: gp.Name, why: "the policy does not compile"})
		return
	}
	p.log.Info("Policy in force", "policy", gp.Name, "generation", gp.Generation, "epoch", gp.Epoch)
	p.set(&servedPolicy{name: gp.Name, generation: gp.Generation, epoch: gp.Epoch, compiled: c, eval: sink.CompiledPolicy(c)})
}

func (p *ServicePolicy) set(s *servedPolicy) {
	p.cur.Store(s)
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Ready reports whether a policy is in force, and its epoch.
func (p *ServicePolicy) Ready() (bool, int64) {
	s := p.cur.Load()
	if s == nil || s.compiled == nil {
		return false, 0
	}
	return true, s.epoch
}

// Wait blocks until a policy is in force at an epoch of at least epoch, or ctx ends.
func (p *ServicePolicy) Wait(ctx context.Context, epoch int64) bool {
	for {
		if ok, e := p.Ready(); ok && e >= epoch {
			return true
		}
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// Evaluate decides with the policy in force; with none, it refuses.
func (p *ServicePolicy) Evaluate(ctx context.Context, r sink.PolicyRequest) sink.PolicyDecision {
	s := p.cur.Load()
	if s == nil || s.eval == nil {
		return sink.PolicyDecision{Outcome: sink.PolicyDeny, Code: ef.EFPolicyDenied,
			Message: "This sidecar holds no policy that may be served; the tool was not invoked."}
	}
	return s.eval.Evaluate(ctx, r)
}

// CanEscalate answers with the policy in force (false without one).
func (p *ServicePolicy) CanEscalate(server, tool string) bool {
	s := p.cur.Load()
	return s != nil && s.eval != nil && s.eval.CanEscalate(server, tool)
}

// Servers are the policy's servers (none without a policy).
func (p *ServicePolicy) Servers() []sink.ServerInfo {
	s := p.cur.Load()
	if s == nil || s.eval == nil {
		return nil
	}
	return s.eval.Servers()
}
