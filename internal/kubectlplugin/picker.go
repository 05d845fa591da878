package kubectlplugin

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/actgate/actgate/internal/envelope"
)

// keyKind is what a decoded key is.
type keyKind int

const (
	keyRune      keyKind = iota // a printable character, in key.r
	keyUp                       // ↑
	keyDown                     // ↓
	keyEnter                    // Enter (CR or LF)
	keyEsc                      // a lone Escape
	keyBackspace                // Backspace or Delete-left (DEL, BS)
	keyInterrupt                // Ctrl-C or Ctrl-D
	keyOther                    // any other key or sequence: ignored
)

// key is one key press.
type key struct {
	kind keyKind
	r    rune
}

// pickerMode is the screen the picker shows.
type pickerMode int

const (
	// modeChoose: arrow keys move among the options; Enter, a, q and d choose.
	modeChoose pickerMode = iota
	// modeAnswer: typing the free-form answer of the answer-space hatch.
	modeAnswer
	// modeConfirm: the resolution is chosen; y writes it, anything else goes back.
	modeConfirm
)

// picker is the arrow-key picker of envelope-04 §9.2 as a pure state machine: Key consumes one
// key and View renders the current screen. It never writes anything; the caller writes the
// resolution Key returns.
//
//	mode     key                  effect
//	choose   ↑ ↓ k j, 1..N        move the cursor among the options
//	choose   Enter                choose the option under the cursor → confirm
//	choose   a                    answer-space hatch, when open → answer
//	choose   q                    question-space hatch, when open → confirm
//	choose   d                    decline → confirm
//	choose   Esc, Ctrl-C, Ctrl-D  abort: done, nothing chosen
//	answer   characters, ⌫        edit the answer
//	answer   Enter                a non-empty answer → confirm
//	answer   Esc                  back to choose (the text is kept)
//	confirm  y, Y                 done with the chosen resolution
//	confirm  any other key        back to where the choice was made
//	any      Ctrl-C, Ctrl-D       abort
//
// Choosing never writes at once: every resolution passes the confirm screen, which names it,
// so one stray Enter cannot commit an action. The cursor starts on the first option, not the
// recommended one: the recommendation is marked, but the picker does not make it the path of
// least resistance (§5.5, §12.2). A hatch the envelope closes has no key; pressing its letter
// says so instead (§5.8).
type picker struct {
	env     *envelope.Envelope
	content envelope.Content
	header  []string // lines shown above the briefing (which moment, which act)
	// calls are the calls the options run (Moment.Calls), shown under each option; nil when
	// the moment carries none (CheckChoice then refuses an option after the picker).
	calls []envelope.Call

	mode   pickerMode
	cursor int
	answer []rune
	chosen *envelope.Resolution
	back   pickerMode // where a "no" on the confirm screen returns to
	notice string     // one-line feedback to the last key
}

// newPicker starts a picker on env; header lines are shown above the briefing.
func newPicker(env *envelope.Envelope, header ...string) *picker {
	return &picker{env: env, content: env.Content(), header: header}
}

// withCalls sets the calls the options run (verified by OpenMoment against their digests).
func (p *picker) withCalls(calls []envelope.Call) *picker {
	p.calls = calls
	return p
}

// Key applies one key. done reports that the picker is finished: res is the chosen resolution,
// naming env's digest, or nil when the principal aborted.
func (p *picker) Key(k key) (done bool, res *envelope.Resolution) {
	p.notice = ""
	if k.kind == keyInterrupt {
		return true, nil
	}
	switch p.mode {
	case modeChoose:
		return p.keyChoose(k)
	case modeAnswer:
		p.keyAnswer(k)
	case modeConfirm:
		if k.kind == keyRune && (k.r == 'y' || k.r == 'Y') {
			return true, p.chosen
		}
		p.mode, p.chosen = p.back, nil
	}
	return false, nil
}

func (p *picker) keyChoose(k key) (bool, *envelope.Resolution) {
	n := len(p.content.Question.Options)
	h := p.content.Question.Hatches
	switch {
	case k.kind == keyEsc:
		return true, nil
	case k.kind == keyUp || k.kind == keyRune && k.r == 'k':
		p.cursor = max(p.cursor-1, 0)
	case k.kind == keyDown || k.kind == keyRune && k.r == 'j':
		p.cursor = min(p.cursor+1, n-1)
	case k.kind == keyEnter:
		p.confirm(envelope.Resolution{Kind: envelope.KindOption, OptionIdx: p.cursor})
	case k.kind != keyRune:
		// other keys do nothing
	case k.r >= '1' && k.r <= '9':
		if i := int(k.r - '1'); i < n {
			p.cursor = i
		} else {
			p.notice = fmt.Sprintf("There is no option %c; the options are 1 to %d.", k.r, n)
		}
	case k.r == 'a':
		if !h.FreeText {
			p.notice = "The agent closed the answer-space hatch for this question, so there is no free-form answer."
			break
		}
		p.mode = modeAnswer
	case k.r == 'q':
		if !h.Dialogue {
			p.notice = "The agent closed the question-space hatch for this question, so the framing cannot be refused here."
			break
		}
		p.confirm(envelope.Resolution{Kind: envelope.KindQuestion})
	case k.r == 'd':
		p.confirm(envelope.Resolution{Kind: envelope.KindDeclined})
	}
	return false, nil
}

func (p *picker) keyAnswer(k key) {
	switch k.kind {
	case keyEsc:
		p.mode = modeChoose
	case keyBackspace:
		if len(p.answer) > 0 {
			p.answer = p.answer[:len(p.answer)-1]
		}
	case keyEnter:
		text := string(p.answer)
		if strings.TrimSpace(text) == "" {
			p.notice = "An answer cannot be empty; type it, or press Esc to go back."
			return
		}
		p.confirm(envelope.Resolution{Kind: envelope.KindAnswer, Answer: text})
	case keyRune:
		switch {
		case !unicode.IsPrint(k.r) && k.r != ' ':
			// the answer profile refuses control characters; never insert them
		case len(p.answer) >= envelope.MaxAnswerRunes:
			p.notice = fmt.Sprintf("The answer is at its bound of %d characters.", envelope.MaxAnswerRunes)
		default:
			p.answer = append(p.answer, k.r)
		}
	}
}

// confirm moves to the confirm screen with r, naming the envelope.
func (p *picker) confirm(r envelope.Resolution) {
	r.EnvelopeDigest = p.env.Digest()
	p.back, p.chosen, p.mode = p.mode, &r, modeConfirm
}

// View renders the current screen as lines joined by "\n". Like show, it keeps every
// envelope-04 §9.1 invariant on every screen: the four briefing slots, each option with its
// reasoning and the recommended one marked, a key for each open hatch and for decline.
func (p *picker) View() string {
	c := p.content
	var b strings.Builder
	for _, h := range p.header {
		b.WriteString(h + "\n")
	}
	fmt.Fprintf(&b, "BINDING MOMENT %s\n", p.env.Digest())
	if c.Meta != nil && c.Meta.DecisionClass != "" {
		fmt.Fprintf(&b, "Decision class: %s\n", c.Meta.DecisionClass)
	}
	if c.Meta != nil && c.Meta.CalibrationNote != "" {
		fmt.Fprintf(&b, "\nCorrection: %s\n", c.Meta.CalibrationNote)
	}
	fmt.Fprintf(&b, "\nSynopsis: %s\n\nFindings:\n", c.Synopsis)
	for _, f := range c.Findings {
		fmt.Fprintf(&b, "  - %s\n", f)
	}
	b.WriteString("\nRecommendations:\n")
	for _, r := range c.Recommendations {
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	fmt.Fprintf(&b, "\nOffer: %s\n\nQuestion: %s\n\n", c.Offer, c.Question.Stem)
	for i, o := range c.Question.Options {
		cursor := "  "
		if i == p.cursor && p.mode == modeChoose {
			cursor = "> "
		}
		mark, tag := " ", ""
		if i == c.Question.RecommendedIdx {
			mark, tag = "*", "  (recommended)"
		}
		fmt.Fprintf(&b, "%s%s [%d] %s%s\n", cursor, mark, i+1, o.Label, tag)
		fmt.Fprintf(&b, "        Why: %s\n", o.Reasoning)
		if i < len(p.calls) {
			writeCallLines(&b, "        ", p.calls[i])
		}
		fmt.Fprintf(&b, "        Authorises: %s\n", o.ActionDigest)
	}
	b.WriteString("\n")
	h := c.Question.Hatches
	if h.FreeText {
		b.WriteString("  [a] Answer in your own words instead of choosing an option\n")
	}
	if h.Dialogue {
		b.WriteString("  [q] Reject the question as put and reopen the discussion\n")
	}
	b.WriteString("  [d] Decline: answer no to the question as put\n\n")

	switch p.mode {
	case modeChoose:
		// Gate-authored: the authority service writes every BindingMoment from policy, so the
		// recommendation is the policy's, never the agent's.
		fmt.Fprintf(&b, "Policy recommends [%d].\n", c.Question.RecommendedIdx+1)
		keys := fmt.Sprintf("↑/↓ or 1-%d move, Enter choose", len(c.Question.Options))
		if h.FreeText {
			keys += ", a answer"
		}
		if h.Dialogue {
			keys += ", q question"
		}
		keys += ", d decline, Esc quit without resolving"
		b.WriteString(keys + "\n")
	case modeAnswer:
		fmt.Fprintf(&b, "Your answer: %s_\n", string(p.answer))
		b.WriteString("Enter submit, Backspace delete, Esc back to the options\n")
	case modeConfirm:
		fmt.Fprintf(&b, "Chosen: %s\n", p.describeChosen())
		b.WriteString("y write this resolution, any other key go back\n")
	}
	if p.notice != "" {
		b.WriteString(p.notice + "\n")
	}
	return b.String()
}

// describeChosen names the resolution on the confirm screen in the principal's terms.
func (p *picker) describeChosen() string {
	r := p.chosen
	switch r.Kind {
	case envelope.KindOption:
		o, _ := p.env.Option(r.OptionIdx)
		var b strings.Builder
		fmt.Fprintf(&b, "option [%d] %q\n", r.OptionIdx+1, o.Label)
		if r.OptionIdx < len(p.calls) {
			writeCallLines(&b, "  ", p.calls[r.OptionIdx])
		}
		fmt.Fprintf(&b, "  authorising %s", o.ActionDigest)
		return b.String()
	case envelope.KindAnswer:
		return fmt.Sprintf("answer \"%s\" (authorises no action)", r.Answer)
	case envelope.KindQuestion:
		return "question: reject the question as put and reopen the discussion (authorises no action)"
	case envelope.KindDeclined:
		return "decline: answer no to the question as put (authorises no action)"
	}
	return string(r.Kind)
}

// writeCallLines writes the "Runs (verified by actgate)" block of one call, bounded as the
// text renderer bounds it and marked when cut.
func writeCallLines(b *strings.Builder, indent string, c envelope.Call) {
	fmt.Fprintf(b, "%sRuns (verified by actgate): %s\n", indent, c.Where())
	lines, omitted := envelope.CallLines(c, 0)
	for _, l := range lines {
		fmt.Fprintf(b, "%s  %s\n", indent, l)
	}
	if omitted > 0 {
		fmt.Fprintf(b, "%s  [TRUNCATED: about %d bytes of arguments not shown here; "+
			"read the whole call with kubectl actgate console or kubectl get -o yaml before choosing]\n", indent, omitted)
	}
	for _, p := range envelope.MaskedLines(c) {
		fmt.Fprintf(b, "%s  %s = ••• masked by policy\n", indent, p)
	}
}
