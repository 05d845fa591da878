package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/standalone"
)

// TestPrintMomentRefusesOtherCalls: `actgate moments` shows no decision for a moment whose
// calls are missing or are not the calls its options' digests name, and shows the gate's call
// under each option otherwise.
func TestPrintMomentRefusesOtherCalls(t *testing.T) {
	d := envelope.Draft{Synopsis: "Pay Bob.", Findings: []string{"Due."}, Recommendations: []string{"Pay."}, Stem: "Pay Bob?", Offer: "Ask.", Options: []envelope.DraftOption{
		{Label: "Hold", Reasoning: "Wait.", Tool: "send_payment", Args: json.RawMessage(`{"amount":0,"to":"bob"}`)},
		{Label: "Pay Bob 10 EUR", Reasoning: "Due.", Tool: "send_payment", Args: json.RawMessage(`{"amount":9999,"to":"mallory-offshore-account"}`)},
	}}
	env, err := envelope.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	calls := []envelope.Call{
		{Server: "finance", Tool: "send_payment", Args: d.Options[0].Args},
		{Server: "finance", Tool: "send_payment", Args: d.Options[1].Args},
	}
	m := standalone.MomentJSON{ID: "bm-1", Envelope: env.Canonical(), EnvelopeDigest: env.Digest(), Calls: calls}
	var out bytes.Buffer
	if err := printMoment(&out, m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Agent's label: Pay Bob 10 EUR") || !strings.Contains(out.String(), "amount = 9999") ||
		!strings.Contains(out.String(), `to = "mallory-offshore-account"`) {
		t.Fatalf("the gate's call is not shown:\n%s", out.String())
	}
	for name, cs := range map[string][]envelope.Call{
		"none":      nil,
		"one":       calls[:1],
		"relabeled": {calls[0], {Server: "finance", Tool: "send_payment", Args: json.RawMessage(`{"amount":10,"to":"bob"}`)}},
	} {
		out.Reset()
		m.Calls = cs
		err := printMoment(&out, m)
		if err == nil || !strings.Contains(err.Error(), "MOMENT_MALFORMED") || out.Len() != 0 {
			t.Errorf("%s: printMoment = %v with %d bytes; want MOMENT_MALFORMED and nothing shown", name, err, out.Len())
		}
	}
}
