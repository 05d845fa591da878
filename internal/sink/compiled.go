package sink

import (
	"context"

	"github.com/actgate/actgate/internal/policy"
)

// CompiledPolicy adapts a compiled ToolPolicy to the gate's PolicyEvaluator. In mode Audit the
// gate is given the outcome enforcement would have returned (policy.Decision.AuditOutcome)
// with Audit set, and lets the call through itself.
func CompiledPolicy(c *policy.Compiled) PolicyEvaluator { return compiledPolicy{c} }

type compiledPolicy struct{ c *policy.Compiled }

func (p compiledPolicy) Evaluate(ctx context.Context, r PolicyRequest) PolicyDecision {
	d := p.c.Evaluate(ctx, policy.Request{
		Server:      r.Server,
		Destination: r.Destination,
		Tool:        r.Tool,
		Args:        r.Args,
		Class:       r.Class,
		Provenance:  r.Provenance,
		Agent:       r.Agent,
		StrictArgs:  r.StrictArgs,
	})
	out := PolicyDecision{
		Outcome:       PolicyOutcome(d.Outcome),
		Code:          d.Code,
		Message:       d.Message,
		Policy:        d.Policy,
		Rule:          d.Rule,
		Class:         d.Class,
		AuthorityTTL:  d.AuthorityTTL,
		Epoch:         d.Epoch,
		MaskArguments: d.MaskArguments,
		RateLimit:     d.RateLimit,
		Budgets:       d.Budgets,
		Evidence: Evidence{
			Role:               string(d.Evidence.Role),
			Principals:         d.Evidence.Principals,
			MinPrincipals:      int(d.Evidence.MinPrincipals),
			SeparationOfDuties: d.Evidence.SeparationOfDuties == nil || *d.Evidence.SeparationOfDuties,
		},
	}
	if d.Audit {
		out.Audit = true
		out.Outcome = PolicyOutcome(d.AuditOutcome)
	}
	for _, a := range d.Alternatives {
		out.Alternatives = append(out.Alternatives, Alternative{Label: a.Label, Reasoning: a.Reasoning, Args: a.Args.Raw})
	}
	return out
}

func (p compiledPolicy) CanEscalate(server, tool string) bool { return p.c.CanEscalate(server, tool) }

// ToolPin is the pin of the rule governing tool on server (ToolPinner).
func (p compiledPolicy) ToolPin(server, tool string) (ToolPin, bool) {
	pin, ok := p.c.ToolPin(server, tool)
	if !ok {
		return ToolPin{}, false
	}
	return ToolPin{Policy: p.c.Name(), Rule: pin.Rule, OnFirstUse: pin.OnFirstUse, Digest: pin.Digest, Audit: pin.Audit, Named: pin.Named}, true
}

func (p compiledPolicy) Servers() []ServerInfo {
	servers := p.c.Servers()
	out := make([]ServerInfo, 0, len(servers))
	for _, s := range servers {
		out = append(out, ServerInfo{Name: s.Name, URL: s.URL})
	}
	return out
}

// SinkID is the policy's spec.sink.id ("" when each sink binds authority to its own id).
func (p compiledPolicy) SinkID() string { return p.c.SinkID() }
