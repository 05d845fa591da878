package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/envelope"
)

// CodeCallsMismatch: a moment's calls are missing or are not the calls its options' action
// digests name (envelope.CheckCalls); the page shows a diagnostic, never a decision.
const CodeCallsMismatch envelope.Code = "MOMENT_CALLS_MISMATCH"

// pageData is what the page template renders.
type pageData struct {
	Principal, Surface, Token string
	// MaxAnswer bounds the answer box (envelope.MaxAnswerRunes).
	MaxAnswer int
	Outcome   *outcome
	ListError string
	Moments   []momentView
	// Footer is the door's footer line; SignOut shows the sign-out button (approval service).
	Footer  string
	SignOut bool
}

// momentView is one moment prepared for the template. Every string that did not pass the
// envelope profile (act facts, ids, payload) went through safeLine or safeText first;
// html/template escapes all of them.
type momentView struct {
	ID, Principal, Agent string
	// Anchor is the section's element id, "moment-" + Ref (or ID): the fragment announcement
	// links point at.
	Anchor  string
	Expires string
	Act     Act
	// Well is true when the envelope is shown as a decision.
	Well bool
	// AgentAuthored: the slots are the agent's words, and are labelled so.
	AgentAuthored  bool
	EnvelopeDigest string
	Content        envelope.Content
	Options        []optionView
	Hatches        envelope.Hatches
	// ActOption is the 1-based number of the option that authorises exactly the act's action,
	// 0 when none does.
	ActOption int
	Problems  []envelope.Problem
	Payload   string
}

// optionView is one option of slot 6, with the call it authorises.
type optionView struct {
	Idx, Number                     int
	Label, Reasoning, ActionDigest  string
	Recommended, AuthorisesActsCall bool
	// MarkActsCall labels the option "the call the agent made": only on a gate-authored moment,
	// which decides a call the agent made; an agent's proposal made no call.
	MarkActsCall bool
	Call         callView
}

// callView is the call an option authorises, as the gate holds it: every string escaped by
// envelope.Visible, the arguments indented whole (the page scrolls them; nothing is cut).
type callView struct {
	Tool, Server, Destination string
	Args                      string
	// Masked lists the pointers whose values policy masks; Verified is true when nothing is
	// masked and the page checked that the call hashes to the option's action digest.
	Masked   []string
	Verified bool
}

// callViewOf prepares c for the template.
func callViewOf(c envelope.Call) callView {
	v := callView{Tool: envelope.Visible(c.Tool), Server: envelope.Visible(c.Server), Destination: envelope.Visible(c.Destination),
		Verified: c.Verified()}
	var b bytes.Buffer
	if err := json.Indent(&b, c.Args, "", "  "); err != nil {
		v.Args = envelope.Visible(string(c.Args))
	} else {
		// The indentation's own line breaks stay; a break inside a string is already the
		// escape \n in canonical JSON, so every other character goes through Visible.
		lines := strings.Split(b.String(), "\n")
		for i, l := range lines {
			lines[i] = envelope.Visible(l)
		}
		v.Args = strings.Join(lines, "\n")
	}
	for _, p := range c.Masked {
		v.Masked = append(v.Masked, envelope.Visible(p))
	}
	return v
}

// viewOf prepares m for the template at now.
func viewOf(m Moment, now time.Time) momentView {
	v := momentView{
		ID: safeLine(m.ID), Principal: safeLine(m.Principal), Agent: safeLine(m.Agent), Anchor: "moment-" + safeLine(m.ID),
		Act: Act{Name: safeLine(m.Act.Name), Tool: safeLine(m.Act.Tool), Server: safeLine(m.Act.Server),
			Class: safeLine(m.Act.Class), ActionDigest: safeLine(m.Act.ActionDigest), Unavailable: safeLine(m.Act.Unavailable)},
	}
	if m.Ref != "" {
		v.Anchor = "moment-" + safeLine(m.Ref)
	}
	if !m.Expires.IsZero() {
		v.Expires = expiresText(m.Expires, now)
	}
	if m.Envelope != nil {
		if err := envelope.CheckCalls(m.Envelope, m.Calls); err != nil {
			// What an option runs is part of the decision: without its call shown there is
			// no decision to offer.
			m.Problems = []envelope.Problem{{Code: CodeCallsMismatch, Path: "calls", Message: err.Error()}}
			m.Envelope = nil
		}
	}
	if m.Envelope == nil {
		v.Problems = make([]envelope.Problem, len(m.Problems))
		for i, p := range m.Problems {
			v.Problems[i] = envelope.Problem{Code: envelope.Code(safeLine(string(p.Code))), Path: safeLine(p.Path), Message: safeLine(p.Message)}
		}
		if len(v.Problems) == 0 {
			v.Problems = []envelope.Problem{{Code: envelope.CodeInternal, Path: "$", Message: "the envelope was discarded"}}
		}
		v.Payload = safeText(m.Payload)
		return v
	}
	v.Well = true
	v.AgentAuthored = m.AgentAuthored
	v.EnvelopeDigest = m.Envelope.Digest()
	v.Content = m.Envelope.Content()
	v.Hatches = v.Content.Question.Hatches
	for i, o := range v.Content.Question.Options {
		ov := optionView{Idx: i, Number: i + 1, Label: o.Label, Reasoning: o.Reasoning, ActionDigest: o.ActionDigest,
			Recommended: i == v.Content.Question.RecommendedIdx, AuthorisesActsCall: o.ActionDigest == m.Act.ActionDigest,
			Call: callViewOf(m.Calls[i])}
		if ov.AuthorisesActsCall {
			v.ActOption = i + 1
		}
		ov.MarkActsCall = ov.AuthorisesActsCall && !m.AgentAuthored
		v.Options = append(v.Options, ov)
	}
	return v
}

// expiresText says when a moment expires, relative and absolute.
func expiresText(at, now time.Time) string {
	abs := at.UTC().Format(time.RFC3339)
	d := at.Sub(now)
	if d <= 0 {
		return "expired at " + abs
	}
	return fmt.Sprintf("expires in %s (%s)", d.Round(time.Second), abs)
}

// parsePage parses the embedded page template.
func parsePage() (*template.Template, error) {
	t, err := template.New("page.html.tmpl").Funcs(template.FuncMap{
		"add1": func(i int) int { return i + 1 },
	}).ParseFS(assets, "templates/page.html.tmpl")
	if err != nil {
		return nil, fmt.Errorf("console: page template: %w", err)
	}
	return t, nil
}

// safeLine makes one line of text from outside the envelope safe to show: invalid UTF-8,
// control, line-break and bidi-override characters become U+FFFD, so a field cannot pose as
// several lines or reorder what is around it. (html/template still escapes markup.)
func safeLine(s string) string {
	return strings.Map(func(c rune) rune {
		if unsafeRune(c) {
			return utf8.RuneError
		}
		return c
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// safeText is safeLine that keeps newlines and tabs, for a payload shown as preformatted text.
func safeText(s string) string {
	return strings.Map(func(c rune) rune {
		if c != '\n' && c != '\t' && unsafeRune(c) {
			return utf8.RuneError
		}
		return c
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// unsafeRune is the envelope profile's rule (envelope.ForbiddenRune) plus the implicit
// directional marks (LRM, RLM, ALM), which a page also must not let reorder a decision.
func unsafeRune(c rune) bool {
	return envelope.ForbiddenRune(c) || c == '\u200E' || c == '\u200F' || c == '\u061C'
}
