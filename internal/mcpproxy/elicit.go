package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/sink"
)

// ElicitationPolicy says which consequence classes' binding moments may also be offered as an
// MCP elicitation (ToolPolicy spec.elicitation); *policy.Compiled implements it.
type ElicitationPolicy interface {
	ElicitationAllowed(class act.ConsequenceClass) bool
}

// MomentResolver is what an elicitation needs of the gate beyond Gate: the moment as
// registered (class, principals) and the resolution path every surface uses. *sink.Gate
// implements it; a gate that does not offers no elicitation.
type MomentResolver interface {
	Moments(ctx context.Context, filter sink.MomentFilter) ([]sink.Moment, error)
	Resolve(ctx context.Context, momentID, principal string, resolution []byte) (sink.ResolveResult, error)
}

// MetaElicitation carries, in the result of a call that surfaced a binding moment, what became
// of the elicitation offered for it: {"action": accept|decline|cancel|error, "resolution":
// option|answer|question|declined (when one was applied), "principal"}.
const MetaElicitation = "actgate.io/elicitation"

// DefaultElicitationTimeout bounds how long a tools/call waits for the answer to an
// elicitation (never past the moment's expiry).
const DefaultElicitationTimeout = 2 * time.Minute

// Choice values of the elicitation form's "choice" property.
const (
	choiceOptionPrefix = "option:"
	choiceAnswer       = "answer"
	choiceQuestion     = "question"
	choiceDecline      = "declined"
	maxAnswerRunes     = 2000
)

// elicitOutcome is MetaElicitation's value.
type elicitOutcome struct {
	Action     string `json:"action"`
	Resolution string `json:"resolution,omitempty"`
	Principal  string `json:"principal,omitempty"`
}

// elicit offers the moment ref as an elicitation when every condition holds, and applies an
// accepted answer as a resolution through the gate as the moment's principal. It returns nil
// when nothing was offered. The tool result is sent whatever happens here: it carries
// binding_moment either way (envelope-04 §8.1; the elicitation is additional), and a
// resolution applied here reaches the agent with its next result like any other.
//
// Offered only when:
//   - the policy lists the moment's class in spec.elicitation (ElicitationAllowed; only
//     INFORMATIONAL can be listed, envelope-04 §12.4);
//   - the agent's MCP client declared form elicitation in initialize;
//   - the gate can list and resolve moments (MomentResolver);
//   - the moment names exactly one principal and it is not the agent: an elicitation answer
//     resolves as that principal, and the gate refuses the agent's own identity. A moment
//     for several principals (or a quorum) goes to their own surfaces only.
//
// The client's "decline" and "cancel" dismiss the form and resolve nothing: the moment stays
// pending for the principal's console. A §7.3 decline is the form's explicit "Decline"
// choice (§9.1: an affordance to decline is rendered with the options).
func (b *bridge) elicit(ctx context.Context, ref *sink.MomentRef) *elicitOutcome {
	pol := b.p.cfg.Elicitation
	if pol == nil || ref == nil || ref.Envelope == nil {
		return nil
	}
	if e := b.caps.Elicitation; e == nil || (e.Form == nil && e.URL != nil) {
		return nil
	}
	gate, ok := b.p.cfg.Gate.(MomentResolver)
	if !ok {
		return nil
	}
	log := b.p.log.WithValues("moment", ref.ID, "envelope", ref.Envelope.Digest(), "session", b.ss.ID())
	ms, err := gate.Moments(ctx, sink.MomentFilter{Pending: true, Session: b.ss.ID()})
	if err != nil {
		log.Error(err, "Elicitation not offered: moments could not be listed")
		return nil
	}
	var m *sink.Moment
	for i := range ms {
		if ms[i].ID == ref.ID {
			m = &ms[i]
		}
	}
	if m == nil {
		return nil
	}
	if !pol.ElicitationAllowed(act.ConsequenceClass(m.Class)) {
		log.V(1).Info("Elicitation not offered: the class is not in spec.elicitation", "class", m.Class)
		return nil
	}
	if len(m.Principals) != 1 || m.Principals[0] == "" || m.Principals[0] == b.agent {
		log.V(1).Info("Elicitation not offered: the moment does not name exactly one principal other than the agent", "principals", len(m.Principals))
		return nil
	}
	principal := m.Principals[0]

	params, err := elicitParams(ref, principal)
	if err != nil {
		log.Error(err, "Elicitation not offered")
		return nil
	}
	timeout := b.p.cfg.ElicitationTimeout
	if timeout <= 0 {
		timeout = DefaultElicitationTimeout
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !ref.Expires.IsZero() {
		var cancelExp context.CancelFunc
		ectx, cancelExp = context.WithDeadline(ectx, ref.Expires)
		defer cancelExp()
	}
	res, err := b.ss.Elicit(ectx, params)
	if err != nil {
		log.Info("Elicitation failed; the moment stays pending", "error", err.Error())
		return &elicitOutcome{Action: "error"}
	}
	out := &elicitOutcome{Action: res.Action}
	if res.Action != "accept" {
		log.Info("Elicitation dismissed; the moment stays pending", "action", res.Action)
		return out
	}
	r, err := resolutionFrom(ref.Envelope, res.Content)
	if err != nil {
		log.Info("Elicitation answer not applied; the moment stays pending", "error", err.Error())
		out.Action = "error"
		return out
	}
	raw, err := json.Marshal(r)
	if err != nil {
		log.Error(err, "Elicitation answer not applied")
		out.Action = "error"
		return out
	}
	// The resolution is recorded whatever the agent does with its request now.
	rr, err := gate.Resolve(context.WithoutCancel(ctx), m.ID, principal, raw)
	if err != nil {
		log.Info("Elicitation answer refused by the gate; the moment stays as it was", "error", err.Error())
		out.Action = "error"
		return out
	}
	log.Info("Binding moment resolved by elicitation", "principal", principal, "resolution", rr.Kind, "option", rr.OptionID, "pending", rr.Pending)
	out.Resolution, out.Principal = rr.Kind, principal
	return out
}

// elicitParams is the form: the §9.1 rendering of the envelope as the message (all four
// briefing slots, the recommended option marked, every option's reasoning, the hatches) and a
// requestedSchema whose "choice" enumerates the options, the enabled hatches and decline; an
// "answer" string carries the answer-space hatch's text.
func elicitParams(ref *sink.MomentRef, principal string) (*mcp.ElicitParams, error) {
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "Binding moment %s for %s. Answer only if you are %s; otherwise dismiss this and resolve it in the actgate console.\n\n", ref.ID, principal, principal)
	if err := (envelope.TextRenderer{}).Render(&msg, ref.Envelope); err != nil {
		return nil, err
	}
	c := ref.Envelope.Content()
	var oneOf []map[string]any
	for i, o := range c.Question.Options {
		title := fmt.Sprintf("%d. %s", i+1, o.Label)
		if i == c.Question.RecommendedIdx {
			title += " (recommended)"
		}
		title += " — " + o.Reasoning
		oneOf = append(oneOf, map[string]any{"const": choiceOptionPrefix + strconv.Itoa(i), "title": title})
	}
	h := ref.Envelope.Hatches()
	if h.FreeText {
		oneOf = append(oneOf, map[string]any{"const": choiceAnswer, "title": "Answer in my own words (write it in \"answer\")"})
	}
	if h.Dialogue {
		oneOf = append(oneOf, map[string]any{"const": choiceQuestion, "title": "Reject the question (reopen deliberation)"})
	}
	oneOf = append(oneOf, map[string]any{"const": choiceDecline, "title": "Decline (the answer to the question as put is no)"})
	props := map[string]any{
		"choice": map[string]any{
			"type": "string", "title": c.Question.Stem, "oneOf": oneOf,
		},
	}
	if h.FreeText {
		props["answer"] = map[string]any{
			"type": "string", "title": "Your answer", "maxLength": maxAnswerRunes,
			"description": "Only with \"Answer in my own words\".",
		}
	}
	return &mcp.ElicitParams{
		Mode:            "form",
		Message:         strings.TrimRight(msg.String(), "\n"),
		RequestedSchema: map[string]any{"type": "object", "properties": props, "required": []string{"choice"}},
	}, nil
}

// resolutionFrom maps an accepted form onto a §7.3 resolution of env. Anything the form did
// not offer is refused (never guessed).
func resolutionFrom(env *envelope.Envelope, content map[string]any) (envelope.Resolution, error) {
	r := envelope.Resolution{EnvelopeDigest: env.Digest()}
	choice, _ := content["choice"].(string)
	h := env.Hatches()
	switch {
	case strings.HasPrefix(choice, choiceOptionPrefix):
		idx, err := strconv.Atoi(strings.TrimPrefix(choice, choiceOptionPrefix))
		if err != nil || idx < 0 || idx >= len(env.Content().Question.Options) || strconv.Itoa(idx) != strings.TrimPrefix(choice, choiceOptionPrefix) {
			return r, fmt.Errorf("choice %.40q is not an option", choice)
		}
		r.Kind, r.OptionIdx = envelope.KindOption, idx
	case choice == choiceAnswer && h.FreeText:
		a, _ := content["answer"].(string)
		a = strings.TrimSpace(a)
		if a == "" {
			return r, fmt.Errorf("the answer hatch was chosen without an answer")
		}
		r.Kind, r.Answer = envelope.KindAnswer, a
	case choice == choiceQuestion && h.Dialogue:
		r.Kind = envelope.KindQuestion
	case choice == choiceDecline:
		r.Kind = envelope.KindDeclined
	default:
		return r, fmt.Errorf("choice %.40q was not offered", choice)
	}
	return r, nil
}

// withElicitation records the outcome of an elicitation in a rendered result's _meta.
func withElicitation(res mcp.Result, out *elicitOutcome) mcp.Result {
	if out == nil {
		return res
	}
	if rr, ok := res.(*toolcall.RawResult); ok {
		if rr.Meta == nil {
			rr.Meta = mcp.Meta{}
		}
		rr.Meta[MetaElicitation] = out
	}
	return res
}
