package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/envelope"
)

// clusterLink is the announcement link of a cluster moment payments/bm-1 on an approval
// service: the #moment-namespace/name deep link.
const clusterLink = "https://approve.example/#moment-payments/bm-1"

// formatMoment is a cluster moment whose options run calls with values that must never reach
// a receiver that did not opt in.
func formatMoment() Moment {
	m := testMoment()
	m.ID = "payments/bm-1"
	m.Calls = []envelope.Call{
		{Server: "bank", Tool: "send_payment", Args: json.RawMessage(`{"amount":250,"to":"` + secretArg + `"}`)},
		{Server: "bank", Tool: "send_payment", Args: json.RawMessage(`{"amount":0,"to":"PAYEE-NONE-9"}`)},
	}
	return m
}

// TestWebhookFormats: each format's body, as a loopback receiver gets it, parses as what its
// receiver expects (Slack Block Kit, a Teams message with one Adaptive Card, the generic
// announcement), carries the #moment-namespace/name link, offers no action but that link, and
// holds no call, argument value or option of any kind.
func TestWebhookFormats(t *testing.T) {
	slack, teams, generic := newReceiver(t), newReceiver(t), newReceiver(t)
	var s sleeps
	o := testOptions(&s, slack.srv.URL, teams.srv.URL, generic.srv.URL)
	o.ConsoleURL = "https://approve.example/"
	o.Webhooks[1].Format, o.Webhooks[2].Format = FormatTeams, FormatGeneric
	n := newNotifier(t, o)
	if err := n.Deliver(context.Background(), formatMoment()); err != nil {
		t.Fatal(err)
	}
	bodies := map[Format][]byte{}
	for f, r := range map[Format]*receiver{FormatSlack: slack, FormatTeams: teams, FormatGeneric: generic} {
		reqs := r.requests()
		if len(reqs) != 1 {
			t.Fatalf("%s receiver got %d requests", f, len(reqs))
		}
		if ct := reqs[0].header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s Content-Type %q", f, ct)
		}
		bodies[f] = reqs[0].body
		assertNoCalls(t, string(f), reqs[0].body)
		if !bytes.Contains(reqs[0].body, []byte(clusterLink)) {
			t.Errorf("%s body lacks the link %s: %s", f, clusterLink, reqs[0].body)
		}
	}
	assertSlack(t, bodies[FormatSlack], clusterLink, false)
	assertTeams(t, bodies[FormatTeams], clusterLink, false)
	assertGeneric(t, bodies[FormatGeneric], clusterLink, false)
	if st := n.Stats(); st.Delivered != 3 || st.Failed != 0 {
		t.Errorf("stats %+v, want 3 delivered", st)
	}
}

// TestWebhookFormatsWithCalls: includeCalls adds the calls to the teams and generic bodies as
// to the Slack one (and still no action but the link).
func TestWebhookFormatsWithCalls(t *testing.T) {
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			b, err := Render(f, formatMoment(), clusterLink)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(secretArg)) || !bytes.Contains(b, []byte("send_payment on server bank")) {
				t.Errorf("the includeCalls body lacks the calls: %s", b)
			}
			switch f {
			case FormatSlack:
				assertSlack(t, b, clusterLink, true)
			case FormatTeams:
				assertTeams(t, b, clusterLink, true)
			case FormatGeneric:
				assertGeneric(t, b, clusterLink, true)
			}
		})
	}
}

// TestTeamsNoMarkdown: an agent-written synopsis with a markdown link stays text: it is in a
// TextRun (Adaptive Cards render no markdown there), never a TextBlock.
func TestTeamsNoMarkdown(t *testing.T) {
	m := testMoment()
	m.Synopsis = "Approve [here](https://evil.example/approve) **now**"
	b, err := TeamsBody(m, "")
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]any
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	card := msg["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)
	for _, el := range card["body"].([]any) {
		e := el.(map[string]any)
		if e["type"] == "TextBlock" && strings.Contains(e["text"].(string), "evil") {
			t.Errorf("the synopsis is in a markdown TextBlock: %v", e)
		}
	}
	if _, ok := card["actions"]; ok {
		t.Errorf("a card without a link has actions: %s", b)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatSlack, "slack": FormatSlack, "teams": FormatTeams, "generic": FormatGeneric} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"Slack", "msteams", "json", " slack"} {
		if _, err := ParseFormat(in); err == nil {
			t.Errorf("ParseFormat(%q) accepted", in)
		}
	}
	if _, err := New(Options{Webhooks: []Webhook{{URL: "https://h.example/", Format: "xml"}}}); err == nil {
		t.Error("New accepted an unknown format")
	}
}

// assertNoCalls: no argument value of formatMoment's calls and no call line.
func assertNoCalls(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, v := range []string{secretArg, "PAYEE-NONE-9", `"amount"`, "amount =", "on server bank", "verified by actgate"} {
		if bytes.Contains(b, []byte(v)) {
			t.Errorf("%s body carries %q: %s", what, v, b)
		}
	}
}

// assertSlack: an incoming-webhook message: text and blocks, every block of a Block Kit type,
// the only interactive element a URL button to link.
func assertSlack(t *testing.T, b []byte, link string, calls bool) {
	t.Helper()
	var msg message
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&msg); err != nil {
		t.Fatalf("slack body: %v: %s", err, b)
	}
	if msg.Text == "" || len(msg.Blocks) < 3 || msg.Blocks[0].Type != "header" {
		t.Fatalf("slack body is not text + blocks with a header: %s", b)
	}
	buttons, callSection := 0, false
	for _, bl := range msg.Blocks {
		switch bl.Type {
		case "header", "section":
			callSection = callSection || bl.BlockID == "calls"
		case "actions":
			for _, e := range bl.Elements {
				if e.Type != "button" || e.URL != link {
					t.Errorf("slack element %+v is not a link button to %s", e, link)
				}
				buttons++
			}
		default:
			t.Errorf("slack block type %q", bl.Type)
		}
	}
	if buttons != 1 || callSection != calls {
		t.Errorf("slack: %d link buttons (want 1), calls section %v (want %v)", buttons, callSection, calls)
	}
}

// assertTeams: {"type":"message","attachments":[{contentType adaptive card, content an
// AdaptiveCard}]}, body elements of known types, the only action Action.OpenUrl to link.
func assertTeams(t *testing.T, b []byte, link string, calls bool) {
	t.Helper()
	var msg teamsMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&msg); err != nil {
		t.Fatalf("teams body: %v: %s", err, b)
	}
	if msg.Type != "message" || len(msg.Attachments) != 1 {
		t.Fatalf("teams body is not a message with one attachment: %s", b)
	}
	a := msg.Attachments[0]
	c := a.Content
	if a.ContentType != "application/vnd.microsoft.card.adaptive" || a.ContentURL != nil || c.Type != "AdaptiveCard" ||
		c.Schema != "http://adaptivecards.io/schemas/adaptive-card.json" || c.Version != "1.4" || len(c.Body) < 3 {
		t.Fatalf("teams attachment is not an Adaptive Card 1.4: %s", b)
	}
	if !bytes.Contains(b, []byte(`"contentUrl":null`)) {
		t.Errorf("teams attachment lacks contentUrl null: %s", b)
	}
	callBlock := false
	for _, e := range c.Body {
		switch e.Type {
		case "TextBlock":
			if e.Text == "" {
				t.Errorf("empty TextBlock")
			}
		case "RichTextBlock":
			callBlock = callBlock || e.ID == "calls"
			for _, r := range e.Inlines {
				if r.Type != "TextRun" {
					t.Errorf("inline %q", r.Type)
				}
			}
		default:
			t.Errorf("teams element type %q", e.Type)
		}
	}
	if len(c.Actions) != 1 || c.Actions[0].Type != "Action.OpenUrl" || c.Actions[0].URL != link {
		t.Errorf("teams actions %+v, want one Action.OpenUrl to %s", c.Actions, link)
	}
	if callBlock != calls {
		t.Errorf("teams calls block %v, want %v", callBlock, calls)
	}
}

// assertGeneric: exactly the Announcement fields, the moment's values and the link.
func assertGeneric(t *testing.T, b []byte, link string, calls bool) {
	t.Helper()
	var a Announcement
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("generic body: %v: %s", err, b)
	}
	m := formatMoment()
	if a.Type != AnnouncementType || a.Moment != m.ID || a.EnvelopeDigest != m.EnvelopeDigest || a.Synopsis != m.Synopsis ||
		a.Tool != m.Tool || a.Class != m.Class || a.Link != link || !a.Expires.Equal(m.Expires) || strings.Join(a.Principals, ",") != "alice,bob" {
		t.Errorf("generic announcement %+v", a)
	}
	if (len(a.Calls) == 2) != calls {
		t.Errorf("generic calls %+v, want present %v", a.Calls, calls)
	}
}
