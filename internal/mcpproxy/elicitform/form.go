// Package elicitform is the MCP elicitation form a binding moment is offered as (envelope-04
// §12.4, docs/architecture.md "Elicitation"): what the agent's client is shown (Params: the §9.1
// rendering, a "choice" per option and enabled hatch, decline), how an accepted form maps onto a
// §7.3 resolution (Resolution: the content is the client's, untrusted, and anything the form did
// not offer is refused), and what a result's _meta says became of it (Meta, Outcome, With).
// Whether and to whom a moment is offered is internal/mcpproxy's (bridge.elicit).
package elicitform

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/sink"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Meta carries, in the result of a call that surfaced a binding moment, what became
// of the elicitation offered for it: {"action": accept|decline|cancel|error, "resolution":
// option|answer|question|declined (when one was applied), "principal"}.
const Meta = "actgate.io/elicitation"

// Choice values of the elicitation form's "choice" property.
const (
	choiceOptionPrefix = "option:"
	choiceAnswer       = "answer"
	choiceQuestion     = "question"
	choiceDecline      = "declined"
	maxAnswerRunes     = 2000
)

// Outcome is Meta's value.
type Outcome struct {
	Action     string `json:"action"`
	Resolution string `json:"resolution,omitempty"`
	Principal  string `json:"principal,omitempty"`
}

// Params is the form: the §9.1 rendering of the envelope as the message (all four
// briefing slots, the recommended option marked, every option's reasoning, the hatches) and a
// requestedSchema whose "choice" enumerates the options, the enabled hatches and decline; an
// "answer" string carries the answer-space hatch's text.
func Params(ref *sink.MomentRef, principal string) (*mcp.ElicitParams, error) {
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

// Resolution maps an accepted form onto a §7.3 resolution of env. Anything the form did
// not offer is refused (never guessed).
func Resolution(env *envelope.Envelope, content map[string]any) (envelope.Resolution, error) {
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

// With records the outcome of an elicitation in a rendered result's _meta.
func With(res mcp.Result, out *Outcome) mcp.Result {
	if out == nil {
		return res
	}
	if rr, ok := res.(*toolcall.RawResult); ok {
		if rr.Meta == nil {
			rr.Meta = mcp.Meta{}
		}
		rr.Meta[Meta] = out
	}
	return res
}
