package envelope

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Renderer turns an envelope into one surface's native form (envelope-04 §9). Every
// implementation keeps the §9.1 invariants: all four briefing slots, the recommended
// option visibly distinguished, per-option reasoning with each option, an affordance per
// hatch that is true, and an affordance to decline. Every implementation also refuses,
// writing nothing, an envelope outside the actgate profile ([Envelope.CheckProfile]),
// returning that error. Terminal and HTML renderers implement this same interface.
type Renderer interface {
	// Render writes env as a decision the principal can resolve.
	Render(w io.Writer, env *Envelope) error
	// RenderFallback writes the conventional payload of a tool result whose binding
	// moment was discarded, with a diagnostic (§4, §9.3, §12.8): as malformed, or, when
	// every problem is a profile code, as well formed but outside the actgate profile. It
	// never presents a decision.
	RenderFallback(w io.Writer, payload string, problems []Problem) error
}

// RenderToolResult renders an MCP tool result with r: its envelope when the
// binding_moment member is well formed, else the fallback (§9.3). It returns the
// validation error of a discarded envelope after writing the fallback, so a caller can
// log the codes; a tool result without a binding_moment member renders its payload and
// returns nil.
func RenderToolResult(r Renderer, w io.Writer, raw []byte) error {
	env, fallback, err := FromToolResult(raw)
	switch {
	case err == nil:
		return r.Render(w, env)
	case errors.Is(err, ErrNoEnvelope):
		_, werr := io.WriteString(w, withNewline(sanitizePayload(fallback)))
		return werr
	}
	if werr := r.RenderFallback(w, fallback, ProblemsOf(err)); werr != nil {
		return werr
	}
	return err
}

// TextRenderer renders plain text: the agent-runtime hook form of envelope-04 §9.2 ("plain
// text with a labelled multiple-choice block"). Options are numbered from 1; hatches and
// decline are lettered. Slot strings are printed whole: Render refuses an envelope outside
// the actgate profile, so no string can draw lines of its own. An empty findings or
// recommendations list (well formed, §5.2, §5.3) is shown as "(none)", never dropped.
//
// The zero value renders the envelope alone, as the agent sees its own moment. A principal's
// surface sets Calls: each option is then followed by a "Runs (verified by actgate):" block
// with the exact call it authorises as the gate holds it, and the slots are attributed to
// their author, so the agent's label can never stand in for what runs.
type TextRenderer struct {
	// Calls are the calls the options authorise, one per option in order (CheckCalls). When
	// set, Render refuses calls that do not match the options and shows no decision.
	Calls []Call
	// AgentAuthored says the agent wrote the envelope (request_binding_moment); false means
	// the gate wrote it from policy. It is used only with Calls.
	AgentAuthored bool
	// MaxCallBytes bounds each call's rendered arguments (<= 0: DefaultMaxCallBytes). A call
	// over the bound is cut at a whole argument and marked, with the number of bytes not shown.
	MaxCallBytes int
}

var _ Renderer = TextRenderer{}

// Render implements Renderer.
func (r TextRenderer) Render(w io.Writer, env *Envelope) error {
	if env == nil {
		return errors.New("envelope: render of a nil envelope")
	}
	if err := env.CheckProfile(); err != nil {
		return err
	}
	principal := r.Calls != nil
	if principal {
		if err := CheckCalls(env, r.Calls); err != nil {
			return err
		}
	}
	label, why := "", "Why: "
	if principal && r.AgentAuthored {
		label, why = "Agent's label: ", "Agent's reasoning: "
	}
	c := env.Content()
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "BINDING MOMENT %s\n", env.Digest())
	if principal {
		if r.AgentAuthored {
			b.WriteString("Written by the agent: the briefing, the question, each label and reasoning are its words.\n")
		} else {
			b.WriteString("Written by actgate from policy: the briefing and the labels are the gate's.\n")
		}
		b.WriteString("What each option runs is shown under \"Runs (verified by actgate)\": the call the gate holds and the digest binds.\n")
	}
	if c.Meta != nil && c.Meta.DecisionClass != "" {
		fmt.Fprintf(b, "Decision class: %s\n", c.Meta.DecisionClass)
	}
	if c.Meta != nil && c.Meta.CalibrationNote != "" {
		fmt.Fprintf(b, "\nCorrection: %s\n", c.Meta.CalibrationNote)
	}

	// Briefing slots 1–4, all of them (§9.1).
	fmt.Fprintf(b, "\nSynopsis: %s\n", c.Synopsis)
	writeList(b, "Findings", c.Findings)
	writeList(b, "Recommendations", c.Recommendations)
	fmt.Fprintf(b, "\nOffer: %s\n", c.Offer)

	// Binding slots 5–8.
	fmt.Fprintf(b, "\nQuestion: %s\n\n", c.Question.Stem)
	for i, o := range c.Question.Options {
		mark, tag := " ", ""
		if i == c.Question.RecommendedIdx {
			mark, tag = "*", "  (recommended)"
		}
		fmt.Fprintf(b, "%s [%d] %s%s%s\n", mark, i+1, label, o.Label, tag)
		fmt.Fprintf(b, "      %s%s\n", why, o.Reasoning)
		if principal {
			r.writeCall(b, r.Calls[i])
		}
		fmt.Fprintf(b, "      Authorises: %s\n", o.ActionDigest)
	}
	keys := fmt.Sprintf("1-%d", len(c.Question.Options))
	b.WriteString("\n")
	if c.Question.Hatches.FreeText {
		b.WriteString("  [a] Answer in your own words instead of choosing an option\n")
		keys += ", a"
	}
	if c.Question.Hatches.Dialogue {
		b.WriteString("  [q] Reject the question as put and reopen the discussion\n")
		keys += ", q"
	}
	b.WriteString("  [d] Decline: answer no to the question as put\n")
	keys += " or d"
	fmt.Fprintf(b, "\n%s [%d]. Reply with %s.\n", r.recommender(principal), c.Question.RecommendedIdx+1, keys)
	return b.Flush()
}

// recommender names who recommends the distinguished option: on a principal's surface the
// moment's author (the agent for request_binding_moment, else the policy the gate wrote it
// from), so a gate-authored recommendation is never attributed to the agent; the zero value,
// which does not know the author, names none.
func (r TextRenderer) recommender(principal bool) string {
	switch {
	case !principal:
		return "Recommended:"
	case r.AgentAuthored:
		return "The agent recommends"
	default:
		return "Policy recommends"
	}
}

// writeList writes a briefing list under its heading, "(none)" when it is empty.
func writeList(b *bufio.Writer, heading string, items []string) {
	fmt.Fprintf(b, "\n%s:\n", heading)
	if len(items) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, s := range items {
		fmt.Fprintf(b, "  - %s\n", s)
	}
}

// writeCall writes the "Runs (verified by actgate)" block of one option.
func (r TextRenderer) writeCall(b *bufio.Writer, c Call) {
	fmt.Fprintf(b, "      Runs (verified by actgate): %s\n", c.Where())
	lines, omitted := CallLines(c, r.MaxCallBytes)
	for _, l := range lines {
		fmt.Fprintf(b, "        %s\n", l)
	}
	if omitted > 0 {
		fmt.Fprintf(b, "        [TRUNCATED: about %d bytes of arguments not shown here; read the whole call on the web console or in the JSON before choosing]\n", omitted)
	}
	for _, p := range MaskedLines(c) {
		fmt.Fprintf(b, "        %s = ••• masked by policy\n", p)
	}
	if !c.Verified() {
		b.WriteString("        (masked values are not shown; the action digest binds their real values)\n")
	}
}

// RenderFallback implements Renderer.
func (TextRenderer) RenderFallback(w io.Writer, payload string, problems []Problem) error {
	b := bufio.NewWriter(w)
	if (&ValidationError{Problems: problems}).ProfileOnly() {
		b.WriteString("BINDING MOMENT NOT RENDERED: the envelope is well formed but outside the actgate profile, so no decision is offered.\n")
	} else {
		b.WriteString("BINDING MOMENT DISCARDED: the envelope is malformed, so no decision is offered (envelope-04 §9.3).\n")
	}
	for _, p := range problems {
		fmt.Fprintf(b, "  %s\n", p)
	}
	b.WriteString("\nTool result:\n")
	if strings.TrimSpace(payload) == "" {
		b.WriteString("(the tool result carries nothing else)\n")
	} else {
		b.WriteString(withNewline(sanitizePayload(payload)))
	}
	return b.Flush()
}

// sanitizePayload replaces control and bidi characters other than tab and newline with
// U+FFFD, so a tool's payload cannot drive a terminal or pose as a decision block.
func sanitizePayload(s string) string {
	return strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' || !ForbiddenRune(c) {
			return c
		}
		return '\uFFFD'
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

func withNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
