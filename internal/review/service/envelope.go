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
)

// DefaultOffer is slot 4 of a gate-authored envelope (envelope-04 §5.4); internal/sink's.
const DefaultOffer = "Ask for detail on any item."

// gateEnvelope builds the gate-authored binding moment of an escalated call (docs/architecture.md
// "Human decisions"), as internal/sink's escalateMoment builds it, so a principal sees the same
// envelope from the embedded gate and from the cluster: a factual briefing (tool, server,
// destination, class, digests, act, agent, provenance — never argument values), the requested call
// as option 0 and the rule's declared alternatives (RFC 7396 merge patch over the requested
// arguments) as the others, the first alternative recommended. Alternatives that do not apply, or
// repeat an option, are left out; fewer than two options is an error.
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
	draft := []envelope.DraftOption{{
		Label:     envelope.SlotText("Run "+tool+" as requested", envelope.MaxLabelRunes),
		Reasoning: "Authorises exactly the call the agent made, once.",
		Tool:      tool,
		Args:      x.args,
	}}
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
		draft = append(draft, envelope.DraftOption{
			Label:     envelope.SlotText(alt.Label, envelope.MaxLabelRunes),
			Reasoning: envelope.SlotText(alt.Reasoning, envelope.MaxTextRunes),
			Tool:      tool,
			Args:      canon,
		})
	}
	if len(draft) < envelope.MinOptions {
		return envelope.Draft{}, errors.New("the rule declares no usable alternative")
	}
	rule := x.d.Rule
	if rule == "" {
		rule = "policy"
	}
	prov := provenance(x.act)
	if prov == "" {
		prov = "unknown"
	}
	recommended := 0
	if len(draft) > 1 {
		// §5.7: the mark falls on the option that minimises the cost of being wrong; the rule's
		// declared alternatives exist to be the narrower call.
		recommended = 1
	}
	return envelope.Draft{
		Synopsis: envelope.SlotText(fmt.Sprintf("Rule %s holds this %s call until a principal chooses which call may run.", rule, tool), envelope.MaxTextRunes),
		Findings: []string{
			envelope.SlotText(fmt.Sprintf("Tool %s on server %s (%s).", tool, x.server, x.destination), envelope.MaxTextRunes),
			fmt.Sprintf("Consequence class %s.", x.class),
			fmt.Sprintf("Arguments digest %s.", x.binding.ArgumentsDigest),
			fmt.Sprintf("Action digest %s.", x.actionDigest()),
			envelope.SlotText(fmt.Sprintf("Requested by agent %s in act %s, instruction provenance %s.", x.c.user, x.binding.ActID, prov), envelope.MaxTextRunes),
		},
		Recommendations: []string{"Choose the requested call to let it run once as made.", "Choose an alternative to authorise that call instead."},
		Offer:           DefaultOffer,
		Stem:            envelope.SlotText(fmt.Sprintf("Which call of %s may run?", tool), envelope.MaxTextRunes),
		Options:         draft,
		RecommendedIdx:  recommended,
	}, nil
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
