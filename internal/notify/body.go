package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/sink"
)

// Moment is what an announcement may say about a pending binding moment. It has no field for
// options or actions (envelope-04 §8.4: the envelope goes to the principal's surface only; the
// announcement points there). Calls, the calls the options run, reach only a webhook with
// IncludeCalls: Body leaves them out for every other.
type Moment struct {
	// ID names the moment (the standalone gate's moment id, or the BindingMoment's
	// namespace/name in a cluster).
	ID string
	// EnvelopeDigest is the digest of the envelope (envelope-04 §6.2).
	EnvelopeDigest string
	// Synopsis is the envelope's synopsis slot (envelope-04 §5.1).
	Synopsis string
	// Principals may resolve the moment.
	Principals []string
	// Agent is the agent that asked.
	Agent string
	// Server, Tool and Class describe the act that needs a human (tool-use-binding §20 class).
	Server, Tool, Class string
	// Policy and Rule required the human decision.
	Policy, Rule string
	// GateAuthored: the gate wrote the envelope (a direct call of a gated tool), rather than
	// the agent proposing it.
	GateAuthored bool
	// Expires is when the moment lapses unresolved (zero: not shown).
	Expires time.Time
	// Calls are the calls the options run, one per option (sink.MomentEvent.Calls), for
	// webhooks with IncludeCalls only.
	Calls []envelope.Call
}

// FromEvent is the announcement of a sink.MomentEvent.
func FromEvent(e sink.MomentEvent) Moment {
	return Moment{
		ID: e.ID, EnvelopeDigest: e.EnvelopeDigest, Synopsis: e.Synopsis,
		Principals: append([]string(nil), e.Principals...), Agent: e.Agent,
		Server: e.Server, Tool: e.Tool, Class: string(e.Class),
		Policy: e.Policy, Rule: e.Rule, GateAuthored: e.GateAuthored, Expires: e.Expires,
		Calls: e.Calls,
	}
}

// Slack limits (Block Kit): a section's text 3000 characters, a field 2000, a header 150.
const (
	maxSectionText = 3000
	maxFieldText   = 2000
	maxHeaderText  = 150
	maxFallback    = 3000
)

// message is the Slack-compatible body: `text` is the notification fallback, `blocks` the
// layout.
type message struct {
	Text   string  `json:"text"`
	Blocks []block `json:"blocks"`
}

type block struct {
	Type     string    `json:"type"`
	Text     *textObj  `json:"text,omitempty"`
	Fields   []textObj `json:"fields,omitempty"`
	Elements []element `json:"elements,omitempty"`
	BlockID  string    `json:"block_id,omitempty"`
}

type textObj struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type element struct {
	Type     string   `json:"type"`
	Text     *textObj `json:"text,omitempty"`
	URL      string   `json:"url,omitempty"`
	ActionID string   `json:"action_id,omitempty"`
}

// Body renders the Slack-compatible JSON body announcing m, with link as the console link
// ("" for none). Every string from the moment is escaped for Slack mrkdwn (&, <, >), so an
// agent-written synopsis cannot mention @channel or forge a link.
func Body(m Moment, link string) ([]byte, error) {
	principals := strings.Join(m.Principals, ", ")
	if principals == "" {
		principals = "(none named)"
	}
	what := m.Tool
	if m.Server != "" {
		what = m.Server + "/" + m.Tool
	}
	synopsis := strings.TrimSpace(m.Synopsis)
	if synopsis == "" {
		synopsis = "(no synopsis)"
	}

	fallback := esc(fmt.Sprintf("Binding moment %s awaits %s: %s", m.ID, principals, synopsis))
	msg := message{Text: truncate(fallback, maxFallback)}
	msg.Blocks = append(msg.Blocks,
		block{Type: "header", Text: &textObj{Type: "plain_text", Text: truncate("Decision needed: binding moment "+m.ID, maxHeaderText)}},
		block{Type: "section", BlockID: "synopsis", Text: &textObj{Type: "mrkdwn", Text: truncate(esc(synopsis), maxSectionText)}},
	)
	fields := []textObj{
		field("Principal", principals),
		field("Agent", m.Agent),
		field("Tool", what),
		field("Class", m.Class),
		field("Moment", m.ID),
		field("Envelope digest", m.EnvelopeDigest),
	}
	if !m.Expires.IsZero() {
		fields = append(fields, field("Expires", m.Expires.UTC().Format(time.RFC3339)))
	}
	if m.Policy != "" {
		p := m.Policy
		if m.Rule != "" {
			p += " / " + m.Rule
		}
		fields = append(fields, field("Policy", p))
	}
	msg.Blocks = append(msg.Blocks, block{Type: "section", BlockID: "facts", Fields: fields})
	if len(m.Calls) > 0 {
		msg.Blocks = append(msg.Blocks, block{Type: "section", BlockID: "calls", Text: &textObj{Type: "mrkdwn", Text: callsText(m.Calls)}})
	}
	if link != "" {
		msg.Blocks = append(msg.Blocks, block{Type: "actions", BlockID: "console", Elements: []element{{
			Type: "button", Text: &textObj{Type: "plain_text", Text: "Open in the console"}, URL: link, ActionID: "open-console",
		}}})
		// The fallback text carries the link too, for receivers that ignore blocks.
		msg.Text = truncate(fallback, maxFallback-len(link)-8) + " — " + link
	}
	return json.Marshal(msg)
}

// callsText is the "calls" section: what each option runs, as actgate holds it, each call
// bounded so the section stays within Slack's limit, a cut always marked.
func callsText(calls []envelope.Call) string {
	var b strings.Builder
	b.WriteString("*What each option runs (verified by actgate; the labels are in the console)*")
	per := (maxSectionText - 200) / len(calls)
	for i, c := range calls {
		lines, omitted := envelope.CallLines(c, per-120)
		fmt.Fprintf(&b, "\n[%d] %s", i+1, esc(c.Where()))
		for _, l := range lines {
			b.WriteString("\n    " + esc(l))
		}
		if omitted > 0 {
			fmt.Fprintf(&b, "\n    [TRUNCATED: %d bytes not shown; read the whole call in the console]", omitted)
		}
	}
	return truncate(b.String(), maxSectionText)
}

func field(name, value string) textObj {
	if value == "" {
		value = "-"
	}
	return textObj{Type: "mrkdwn", Text: truncate("*"+name+"*\n"+esc(value), maxFieldText)}
}

// esc escapes Slack's control characters in mrkdwn text
// (https://api.slack.com/reference/surfaces/formatting#escaping).
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 4 {
		return ""
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
