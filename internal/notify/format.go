package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/envelope"
)

// Format is the body shape a webhook receives.
type Format string

// Formats. Every one carries the same announcement (Moment fields and the link) and nothing a
// receiver could resolve with: the only action any of them holds is a link to the moment's page
// (envelope-04 §8.4; docs/operations.md "Notifications: Slack, Teams and e-mail").
const (
	// FormatSlack is a Slack incoming-webhook message: `text` (the notification fallback) and
	// Block Kit `blocks`, the link as a URL button. The default.
	FormatSlack Format = "slack"
	// FormatTeams is a Microsoft Teams incoming-webhook (or Workflows "when a webhook request is
	// received") message: {"type":"message","attachments":[…]} holding one Adaptive Card whose
	// only action is Action.OpenUrl to the link.
	FormatTeams Format = "teams"
	// FormatGeneric is plain JSON of the announcement's fields (GenericBody), for a receiver of
	// the operator's own.
	FormatGeneric Format = "generic"
)

// Formats lists the accepted formats, for flag help and config errors.
var Formats = []Format{FormatSlack, FormatTeams, FormatGeneric}

// ParseFormat accepts "" (FormatSlack) or one of Formats.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "":
		return FormatSlack, nil
	case FormatSlack, FormatTeams, FormatGeneric:
		return f, nil
	}
	return "", fmt.Errorf("format %q: one of slack, teams, generic", s)
}

// Render is the body announcing m in format f, with link as the moment page's link ("" for
// none). m.Calls, when set, are rendered (the caller clears them for a webhook without
// IncludeCalls).
func Render(f Format, m Moment, link string) ([]byte, error) {
	switch f {
	case "", FormatSlack:
		return Body(m, link)
	case FormatTeams:
		return TeamsBody(m, link)
	case FormatGeneric:
		return GenericBody(m, link)
	}
	return nil, fmt.Errorf("notify: unknown format %q", f)
}

// Announcement is the FormatGeneric body: the announcement's fields as plain JSON.
type Announcement struct {
	// Type is always "actgate.bindingMoment.pending".
	Type           string    `json:"type"`
	Moment         string    `json:"moment"`
	EnvelopeDigest string    `json:"envelopeDigest"`
	Synopsis       string    `json:"synopsis"`
	Principals     []string  `json:"principals"`
	Agent          string    `json:"agent,omitempty"`
	Server         string    `json:"server,omitempty"`
	Tool           string    `json:"tool,omitempty"`
	Class          string    `json:"class,omitempty"`
	Policy         string    `json:"policy,omitempty"`
	Rule           string    `json:"rule,omitempty"`
	GateAuthored   bool      `json:"gateAuthored,omitempty"`
	Expires        time.Time `json:"expires,omitzero"`
	// Link opens the moment's page (the console or the approval service).
	Link string `json:"link,omitempty"`
	// Calls is present only for a webhook with IncludeCalls.
	Calls []AnnouncedCall `json:"calls,omitempty"`
}

// AnnouncedCall is one option's call as the gate holds it, policy masks applied, bounded.
type AnnouncedCall struct {
	Where string   `json:"where"`
	Lines []string `json:"lines"`
	// OmittedBytes is how much of the call was cut (0: shown whole).
	OmittedBytes int `json:"omittedBytes,omitempty"`
}

// AnnouncementType is Announcement.Type.
const AnnouncementType = "actgate.bindingMoment.pending"

// maxGenericCallBytes bounds each call of a generic body.
const maxGenericCallBytes = 4096

// GenericBody renders the FormatGeneric body.
func GenericBody(m Moment, link string) ([]byte, error) {
	a := Announcement{
		Type: AnnouncementType, Moment: m.ID, EnvelopeDigest: m.EnvelopeDigest, Synopsis: m.Synopsis,
		Principals: append([]string{}, m.Principals...), Agent: m.Agent, Server: m.Server, Tool: m.Tool, Class: m.Class,
		Policy: m.Policy, Rule: m.Rule, GateAuthored: m.GateAuthored, Link: link,
	}
	if !m.Expires.IsZero() {
		a.Expires = m.Expires.UTC()
	}
	for _, c := range m.Calls {
		lines, omitted := envelope.CallLines(c, maxGenericCallBytes)
		a.Calls = append(a.Calls, AnnouncedCall{Where: c.Where(), Lines: lines, OmittedBytes: omitted})
	}
	return json.Marshal(a)
}

// Teams message shapes (Adaptive Card 1.4 in an incoming-webhook message).
type teamsMessage struct {
	Type        string            `json:"type"`
	Attachments []teamsAttachment `json:"attachments"`
}

type teamsAttachment struct {
	ContentType string    `json:"contentType"`
	ContentURL  *string   `json:"contentUrl"`
	Content     teamsCard `json:"content"`
}

type teamsCard struct {
	Schema  string        `json:"$schema"`
	Type    string        `json:"type"`
	Version string        `json:"version"`
	Body    []teamsBlock  `json:"body"`
	Actions []teamsAction `json:"actions,omitempty"`
	// MSTeams asks for the full message width.
	MSTeams map[string]string `json:"msteams,omitempty"`
}

// teamsBlock is a TextBlock (the card's own fixed text) or a RichTextBlock of TextRuns (every
// value from the moment: TextRuns are not markdown, so an agent-written synopsis cannot forge a
// link or emphasis).
type teamsBlock struct {
	Type    string     `json:"type"`
	Text    string     `json:"text,omitempty"`
	Inlines []teamsRun `json:"inlines,omitempty"`
	Wrap    bool       `json:"wrap,omitempty"`
	Size    string     `json:"size,omitempty"`
	Weight  string     `json:"weight,omitempty"`
	ID      string     `json:"id,omitempty"`
}

type teamsRun struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Weight   string `json:"weight,omitempty"`
	FontType string `json:"fontType,omitempty"`
}

type teamsAction struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	URL   string `json:"url"`
}

// Teams content types and limits: a message is refused above 28 KB, so each value is bounded.
const (
	teamsCardContentType = "application/vnd.microsoft.card.adaptive"
	richTextBlock        = "RichTextBlock"
	textRun              = "TextRun"
	teamsCardSchema      = "http://adaptivecards.io/schemas/adaptive-card.json"
	teamsCardVersion     = "1.4"
	maxTeamsText         = 2000
	maxTeamsCalls        = 12000
)

// TeamsBody renders the FormatTeams body.
func TeamsBody(m Moment, link string) ([]byte, error) {
	principals := strings.Join(m.Principals, ", ")
	if principals == "" {
		principals = "(none named)"
	}
	synopsis := strings.TrimSpace(m.Synopsis)
	if synopsis == "" {
		synopsis = "(no synopsis)"
	}
	card := teamsCard{
		Schema: teamsCardSchema, Type: "AdaptiveCard", Version: teamsCardVersion,
		MSTeams: map[string]string{"width": "Full"},
		Body: []teamsBlock{
			{Type: "TextBlock", Text: "Decision needed: binding moment", Size: "Large", Weight: "Bolder", Wrap: true},
			{Type: richTextBlock, ID: "synopsis", Inlines: []teamsRun{{Type: textRun, Text: truncate(synopsis, maxTeamsText)}}},
		},
	}
	fact := func(name, value string) {
		if value == "" {
			value = "-"
		}
		card.Body = append(card.Body, teamsBlock{Type: richTextBlock, Inlines: []teamsRun{
			{Type: textRun, Text: name + ": ", Weight: "Bolder"},
			{Type: textRun, Text: truncate(value, maxTeamsText)},
		}})
	}
	what := m.Tool
	if m.Server != "" {
		what = m.Server + "/" + m.Tool
	}
	fact("Principal", principals)
	fact("Agent", m.Agent)
	fact("Tool", what)
	fact("Class", m.Class)
	fact("Moment", m.ID)
	fact("Envelope digest", m.EnvelopeDigest)
	if !m.Expires.IsZero() {
		fact("Expires", m.Expires.UTC().Format(time.RFC3339))
	}
	if m.Policy != "" {
		p := m.Policy
		if m.Rule != "" {
			p += " / " + m.Rule
		}
		fact("Policy", p)
	}
	if len(m.Calls) > 0 {
		card.Body = append(card.Body, teamsBlock{Type: richTextBlock, ID: "calls", Inlines: []teamsRun{
			{Type: textRun, Text: "What each option runs (verified by actgate; the labels are on the moment's page)\n", Weight: "Bolder"},
			{Type: textRun, Text: callsPlain(m.Calls, maxTeamsCalls), FontType: "Monospace"},
		}})
	}
	if link != "" {
		card.Body = append(card.Body, teamsBlock{Type: richTextBlock, ID: "link", Inlines: []teamsRun{{Type: textRun, Text: link}}})
		card.Actions = []teamsAction{{Type: "Action.OpenUrl", Title: "Open the moment", URL: link}}
	}
	return json.Marshal(teamsMessage{Type: "message", Attachments: []teamsAttachment{{ContentType: teamsCardContentType, Content: card}}})
}

// callsPlain is the calls section as plain text (no markup), bounded to max bytes with every cut
// marked.
func callsPlain(calls []envelope.Call, maxBytes int) string {
	var b strings.Builder
	per := (maxBytes - 200) / len(calls)
	for i, c := range calls {
		lines, omitted := envelope.CallLines(c, per-120)
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%d] %s", i+1, c.Where())
		for _, l := range lines {
			b.WriteString("\n    " + l)
		}
		if omitted > 0 {
			fmt.Fprintf(&b, "\n    [TRUNCATED: %d bytes not shown; read the whole call on the moment's page]", omitted)
		}
	}
	return truncate(b.String(), maxBytes)
}
