package notify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/sink"
)

// TestCallsOnlyToOptedInWebhooks: an announcement carries the calls the options run only to a
// webhook with IncludeCalls; every other receives no argument value at all.
func TestCallsOnlyToOptedInWebhooks(t *testing.T) {
	plain, opted := newReceiver(t, response{status: 200}), newReceiver(t, response{status: 200})
	var s sleeps
	o := testOptions(&s, plain.srv.URL, opted.srv.URL)
	o.Webhooks[1].IncludeCalls = true
	n := newNotifier(t, o)
	m := FromEvent(sink.MomentEvent{ID: "m-1", EnvelopeDigest: "sha256:" + strings.Repeat("0", 64), Synopsis: "Pay Bob 10 EUR.",
		Principals: []string{"alice"}, Calls: []envelope.Call{
			{Server: "pay", Tool: "send_payment", Args: json.RawMessage(`{"amount":0,"to":"bob"}`)},
			{Server: "pay", Tool: "send_payment", Args: json.RawMessage(`{"amount":9999,"card":"` + argmask.Placeholder + `","to":"mallory-offshore-account"}`), Masked: []string{"/card"}},
		}})
	if err := n.Deliver(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	pb, ob := string(plain.requests()[0].body), string(opted.requests()[0].body)
	for _, v := range []string{"9999", "mallory", "send_payment on server"} {
		if strings.Contains(pb, v) {
			t.Errorf("a webhook without includeCalls received %q:\n%s", v, pb)
		}
		if !strings.Contains(ob, v) {
			t.Errorf("the includeCalls webhook lacks %q:\n%s", v, ob)
		}
	}
	if !strings.Contains(ob, "verified by actgate") || !strings.Contains(ob, "card = ••• masked by policy") {
		t.Errorf("the calls section is not marked as actgate's or shows a masked value:\n%s", ob)
	}
}

// TestCallsTextBounded: a very long call keeps the section within Slack's limit and says what
// it cut.
func TestCallsTextBounded(t *testing.T) {
	long := envelope.Call{Server: "mail", Tool: "email_send", Args: json.RawMessage(`{"body":"` + strings.Repeat("x", 20000) + `","to":"eve@example.com"}`)}
	got := callsText([]envelope.Call{long, long, long, long})
	if len(got) > maxSectionText || !strings.Contains(got, "TRUNCATED") || !strings.Contains(got, "eve@example.com") {
		t.Fatalf("%d bytes, truncation marked %v, later argument shown %v", len(got), strings.Contains(got, "TRUNCATED"), strings.Contains(got, "eve@example.com"))
	}
}
