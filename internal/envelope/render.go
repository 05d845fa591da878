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
type TextRenderer struct{}

var _ Renderer = TextRenderer{}

// Render implements Renderer.
func (TextRenderer) Render(w io.Writer, env *Envelope) error {
	if env == nil {
		return errors.New("envelope: render of a nil envelope")
	}
	if err := env.CheckProfile(); err != nil {
		return err
	}
	c := env.Content()
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "BINDING MOMENT %s\n", env.Digest())
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
		fmt.Fprintf(b, "%s [%d] %s%s\n", mark, i+1, o.Label, tag)
		fmt.Fprintf(b, "      Why: %s\n", o.Reasoning)
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
	fmt.Fprintf(b, "\nThe agent recommends [%d]. Reply with %s.\n", c.Question.RecommendedIdx+1, keys)
	return b.Flush()
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
