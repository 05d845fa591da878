package service

import (
	"errors"
	"fmt"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/sink/moment"
)

// DefaultOffer is slot 4 of a gate-authored envelope (envelope-04 §5.4); internal/sink's.
const DefaultOffer = moment.DefaultOffer

// gateEnvelope builds the gate-authored binding moment of an escalated call (docs/architecture.md
// "Human decisions") with internal/sink/moment's GateDraft, as the embedded gate builds it, so
// a principal sees the same envelope from the embedded gate and from the cluster: a factual
// briefing (tool, server, destination, class, digests, act, agent, provenance — never argument
// values), the requested call as option 0 and the rule's declared alternatives (RFC 7396 merge
// patch over the requested arguments) as the others, the first alternative recommended.
// Alternatives that do not apply, or repeat an option, are left out; fewer than two options is
// an error.
func gateEnvelope(x *call) (*envelope.Envelope, error) {
	d, err := gateDraft(x)
	if err != nil {
		return nil, err
	}
	return envelope.Build(d)
}

// gateDraft is the draft gateEnvelope builds: its options name the calls each authorises.
func gateDraft(x *call) (envelope.Draft, error) {
	tool := x.tool()
	draft := []envelope.DraftOption{moment.RequestedOption(tool, x.args)}
	seen := map[string]bool{x.actionDigest(): true}
	for _, alt := range x.d.Alternatives {
		if len(draft) == envelope.MaxOptions {
			break
		}
		patched, err := sink.MergePatch(x.args, alt.Args.Raw)
		if err != nil {
			continue
		}
		canon, err := jcs.Canonicalize(patched, jcs.Strict)
		if err != nil {
			continue
		}
		d, err := action.Digest(tool, canon, jcs.Strict)
		if err != nil || seen[d] {
			continue
		}
		seen[d] = true
		draft = append(draft, moment.AlternativeOption(alt.Label, alt.Reasoning, tool, canon))
	}
	if len(draft) < envelope.MinOptions {
		return envelope.Draft{}, errors.New("the rule declares no usable alternative")
	}
	prov := provenance(x.act)
	if prov == "" {
		prov = "unknown"
	}
	d := moment.GateDraft(moment.Briefing{
		Tool: tool, Server: x.server, Destination: x.destination, Class: string(x.class),
		ArgsDigest: x.binding.ArgumentsDigest, ActionDigest: x.actionDigest(), Agent: x.c.user,
		ActID: x.binding.ActID, Provenance: prov, Rule: x.d.Rule,
	}, draft)
	// A call over an Escalate budget: the findings state the numbers the principal decides on.
	for _, f := range x.budgetFindings {
		if len(d.Findings) < envelope.MaxFindings {
			d.Findings = append(d.Findings, f)
		}
	}
	return d, nil
}

// momentCalls are the calls of d's options as a BindingMoment carries them (spec.calls): the
// server and destination of the escalated call, each option's tool and canonical arguments with
// the rule's maskArguments applied. A call too large for the field is an error: a moment whose
// calls cannot be shown is not offered.
func momentCalls(x *call, d envelope.Draft) ([]v1alpha1.BindingMomentCall, error) {
	out := make([]v1alpha1.BindingMomentCall, len(d.Options))
	for i, o := range d.Options {
		args, masked, err := argmask.Apply(o.Args, x.d.MaskArguments)
		if err != nil {
			return nil, fmt.Errorf("option %d: %w", i, err)
		}
		if len(args) > maxCallArgsBytes {
			return nil, fmt.Errorf("option %d: the arguments are %d bytes; a BindingMoment shows at most %d", i, len(args), maxCallArgsBytes)
		}
		out[i] = v1alpha1.BindingMomentCall{Server: x.server, Destination: x.destination, Tool: o.Tool, Args: string(args), Masked: masked}
	}
	return out, nil
}

// maxCallArgsBytes is the bound of BindingMomentCall.args (its CRD maxLength).
const maxCallArgsBytes = 65536
