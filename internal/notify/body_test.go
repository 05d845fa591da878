package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestBodyGolden pins the Slack-compatible body (a renderer: golden file).
func TestBodyGolden(t *testing.T) {
	b, err := Body(testMoment(), ConsoleLink("http://127.0.0.1:8787/console", "m-7f3a"))
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	golden := filepath.Join("testdata", "body.golden.json")
	if *update {
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("body differs from %s (go test -run TestBodyGolden -update):\n%s", golden, pretty.Bytes())
	}
}

// TestBodyContent checks the body's shape and content field by field: Slack `text` plus
// `blocks`, every fact of the moment, the console link, and mrkdwn escaping of hostile text.
func TestBodyContent(t *testing.T) {
	m := testMoment()
	m.Synopsis = "Pay <!channel> & <https://evil.example|your bank> now"
	b, err := Body(m, "https://console.example/moments/{id}")
	if err != nil {
		t.Fatal(err)
	}
	msg := decode(t, b)
	if msg.Text == "" || len(msg.Blocks) < 3 {
		t.Fatalf("want text and blocks: %s", b)
	}
	all := string(b)
	for _, want := range []string{"alice, bob", "agent-1", "bank/send_payment", "FINANCIAL", "m-7f3a", m.EnvelopeDigest, "2026-11-29T18:15:00Z", "payments"} {
		if !strings.Contains(all, want) {
			t.Errorf("body lacks %q: %s", want, b)
		}
	}
	for _, forbidden := range []string{"<!channel>", "<https://evil.example"} {
		if strings.Contains(msg.Text, forbidden) || strings.Contains(*blockText(msg, "synopsis"), forbidden) {
			t.Errorf("unescaped %q in the body", forbidden)
		}
	}
	if got := *blockText(msg, "synopsis"); got != "Pay &lt;!channel&gt; &amp; &lt;https://evil.example|your bank&gt; now" {
		t.Errorf("synopsis block %q", got)
	}
	var button string
	for _, bl := range msg.Blocks {
		if bl.Type == "actions" && len(bl.Elements) == 1 {
			button = bl.Elements[0].URL
		}
	}
	if button != "https://console.example/moments/{id}" {
		// Body takes the link as given; ConsoleLink renders the template.
		t.Errorf("button URL %q", button)
	}
	if !strings.Contains(msg.Text, button) {
		t.Errorf("fallback text lacks the link: %q", msg.Text)
	}

	t.Run("no link", func(t *testing.T) {
		b, _ := Body(m, "")
		for _, bl := range decode(t, b).Blocks {
			if bl.Type == "actions" {
				t.Errorf("an actions block without a console URL: %s", b)
			}
		}
	})
	t.Run("long synopsis is cut within Slack's limits", func(t *testing.T) {
		m := testMoment()
		m.Synopsis = strings.Repeat("é", 5000)
		b, err := Body(m, "")
		if err != nil {
			t.Fatal(err)
		}
		msg := decode(t, b)
		if s := *blockText(msg, "synopsis"); len(s) > maxSectionText || !strings.HasSuffix(s, "…") {
			t.Errorf("synopsis block %d bytes", len(s))
		}
		if len(msg.Text) > maxFallback {
			t.Errorf("text %d bytes", len(msg.Text))
		}
	})
}

func blockText(m message, id string) *string {
	for _, b := range m.Blocks {
		if b.BlockID == id && b.Text != nil {
			return &b.Text.Text
		}
	}
	empty := ""
	return &empty
}

func TestConsoleLink(t *testing.T) {
	cases := []struct{ tmpl, id, want string }{
		{"", "m-1", ""},
		{"http://127.0.0.1:8787/console", "m-1", "http://127.0.0.1:8787/console#moment-m-1"},
		{"https://approve.example/", "payments/bm-1", "https://approve.example/#moment-payments/bm-1"},
		{"https://c.example/console?moment={id}", "m-1", "https://c.example/console?moment=m-1"},
		{"https://c.example/m/{id}", "ns/name x", "https://c.example/m/ns%2Fname%20x"},
	}
	for _, c := range cases {
		if got := ConsoleLink(c.tmpl, c.id); got != c.want {
			t.Errorf("ConsoleLink(%q, %q) = %q, want %q", c.tmpl, c.id, got, c.want)
		}
	}
}

// A distinctive value of the call's arguments; it must never reach a webhook.
const secretArg = "ZEBRA-7731-account-PRIVATE"

const gatePolicy = `
podSelector: {}
sink:
  id: notify-test
servers:
- name: bank
  url: https://bank.example/mcp
rules:
- name: payments
  tools: [send_payment]
  consequenceClass: FINANCIAL
  evidence:
    role: HumanAuthorization
    principals: [alice]
  alternatives:
  - label: Pay the usual payee
    reasoning: The payee on file.
    args:
      payee: ` + secretArg + `-alt
- name: tickets
  tools: [ticket_create]
  evidence:
    role: PolicyPermit
`

// TestNoArgumentsReachTheWebhook runs a real gate with the Notifier as its Observer: a direct
// call of a human-gated tool (gate-authored moment) and an agent-proposed moment whose options
// carry the distinctive argument value. The receiver gets both announcements, and no request
// body contains the value (envelope-04 §8.4: the announcement is not the envelope).
func TestNoArgumentsReachTheWebhook(t *testing.T) {
	r := newReceiver(t)
	var s sleeps
	n := newNotifier(t, testOptions(&s, r.srv.URL))
	n.Start(context.Background())
	g := newGate(t, n)
	ctx := context.Background()

	args := `{"payee":"` + secretArg + `","amount":987654321}`
	res, err := g.Handle(ctx, sink.Call{Session: "s-1", Agent: "agent-1", Server: "bank", Destination: "https://bank.example/mcp", Tool: "send_payment", Args: json.RawMessage(args), Vendor: act.VendorMCP},
		func(context.Context, string) (sink.InvokeResult, error) {
			t.Fatal("the upstream was invoked for a human-gated call")
			return sink.InvokeResult{}, nil
		})
	if err != nil || res.Allowed || res.Moment == nil {
		t.Fatalf("Handle: %+v, %v: want an escalation with a moment", res, err)
	}
	res, err = g.RequestMoment(ctx, "s-1", "agent-1", sink.Proposal{
		Synopsis:        "Choose how to pay the supplier.",
		Findings:        []string{"The invoice is due today."},
		Recommendations: []string{"Pay in full."},
		Stem:            "Which payment should run?",
		Options: []sink.Option{
			{Label: "Pay in full", Reasoning: "Clears the invoice.", Tool: "send_payment", Args: json.RawMessage(args)},
			{Label: "Open a ticket", Reasoning: "Let finance check.", Tool: "ticket_create", Args: json.RawMessage(`{"note":"` + secretArg + `"}`)},
		},
	})
	if err != nil || !res.Allowed || res.Moment == nil {
		t.Fatalf("RequestMoment: %+v, %v", res, err)
	}
	ctxStop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Stop(ctxStop); err != nil {
		t.Fatal(err)
	}
	reqs := r.requests()
	if len(reqs) != 2 {
		t.Fatalf("receiver got %d announcements, want 2 (gate-authored and proposed)", len(reqs))
	}
	for i, q := range reqs {
		for _, leak := range []string{secretArg, "987654321", "payee", "amount"} {
			if bytes.Contains(q.body, []byte(leak)) {
				t.Errorf("announcement %d carries %q: %s", i, leak, q.body)
			}
		}
		if !bytes.Contains(q.body, []byte("alice")) || !bytes.Contains(q.body, []byte("send_payment")) {
			t.Errorf("announcement %d lacks the principal or tool: %s", i, q.body)
		}
	}
}

func newGate(t *testing.T, obs sink.Observer) *sink.Gate {
	t.Helper()
	spec, err := policy.ParseSpec([]byte(gatePolicy))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := policy.Compile("default/notify-test", spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, signer := testutil.SeededStore(t, "notify tests")
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sink.New(sink.Options{SinkID: "notify-test", Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st, Signer: signer, IDs: ids, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
