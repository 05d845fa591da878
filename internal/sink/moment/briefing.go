package moment

import (
	"encoding/json"
	"fmt"

	"github.com/actgate/actgate/internal/envelope"
)

// DefaultOffer is slot 4 when a proposal leaves it empty (envelope-04 §5.4).
const DefaultOffer = "Ask for detail on any item."

// Briefing is what a gate-authored moment tells the principal about the escalated call: facts
// only (tool, server, destination, consequence class, digests, agent, act, instruction
// provenance and the rule), never an argument value (docs/architecture.md "Human decisions").
type Briefing struct {
	Tool, Server, Destination, Class string
	ArgsDigest, ActionDigest         string
	Agent, ActID, Provenance, Rule   string
	// Budgets state the budgets the call would pass (internal/budget.Finding), one finding each.
	Budgets []string
}

// RequestedOption is a gate-authored envelope's first option: exactly the call the agent made.
func RequestedOption(tool string, args json.RawMessage) envelope.DraftOption {
	return envelope.DraftOption{
		Label:     envelope.SlotText("Run "+tool+" as requested", envelope.MaxLabelRunes),
		Reasoning: "Authorises exactly the call the agent made, once.",
		Tool:      tool,
		Args:      args,
	}
}

// AlternativeOption is a gate-authored envelope's option for a declared alternative: the
// rule's label and reasoning, and the call it authorises.
func AlternativeOption(label, reasoning, tool string, args json.RawMessage) envelope.DraftOption {
	return envelope.DraftOption{
		Label:     envelope.SlotText(label, envelope.MaxLabelRunes),
		Reasoning: envelope.SlotText(reasoning, envelope.MaxTextRunes),
		Tool:      tool,
		Args:      args,
	}
}

// GateDraft is the draft of a gate-authored envelope: the factual briefing of b and the
// options, the requested call first (RequestedOption), the rule's alternatives after it.
func GateDraft(b Briefing, options []envelope.DraftOption) envelope.Draft {
	rule := b.Rule
	if rule == "" {
		rule = "policy"
	}
	findings := []string{
		envelope.SlotText(fmt.Sprintf("Tool %s on server %s (%s).", b.Tool, b.Server, b.Destination), envelope.MaxTextRunes),
		fmt.Sprintf("Consequence class %s.", b.Class),
		fmt.Sprintf("Arguments digest %s.", b.ArgsDigest),
		fmt.Sprintf("Action digest %s.", b.ActionDigest),
		envelope.SlotText(fmt.Sprintf("Requested by agent %s in act %s, instruction provenance %s.", b.Agent, b.ActID, b.Provenance), envelope.MaxTextRunes),
	}
	for _, f := range b.Budgets {
		if len(findings) == envelope.MaxFindings {
			break
		}
		findings = append(findings, envelope.SlotText(f, envelope.MaxTextRunes))
	}
	recommended := 0
	if len(options) > 1 {
		// §5.7: the mark falls on the option that minimises the cost of being wrong; the rule's
		// declared alternatives exist to be the narrower call.
		recommended = 1
	}
	return envelope.Draft{
		Synopsis:        envelope.SlotText(fmt.Sprintf("Rule %s holds this %s call until a principal chooses which call may run.", rule, b.Tool), envelope.MaxTextRunes),
		Findings:        findings,
		Recommendations: []string{"Choose the requested call to let it run once as made.", "Choose an alternative to authorise that call instead."},
		Offer:           DefaultOffer,
		Stem:            envelope.SlotText(fmt.Sprintf("Which call of %s may run?", b.Tool), envelope.MaxTextRunes),
		Options:         options,
		RecommendedIdx:  recommended,
	}
}
