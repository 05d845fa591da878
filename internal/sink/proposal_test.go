package sink

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const goodProposal = `{"synopsis":"Pay the capped amount.","findings":["f"],"recommendations":["r"],"offer":"o","stem":"How much?",
 "options":[{"label":"100","reasoning":"r","tool":"payout_create","server":"pay","args":{"amount":100}},
            {"label":"200","reasoning":"r","tool":"payout_create","args":{"amount":200}}],
 "recommended":1,"hatches":["free_text","dialogue"]}`

// TestProposalMeta: the optional meta slot (envelope-04 §5.9) reaches the envelope and the
// Observer, so the calibration_note rate can be monitored (§5.9 "SHOULD monitor").
func TestProposalMeta(t *testing.T) {
	in := strings.Replace(goodProposal, `"stem":`, `"meta":{"calibration_note":"Earlier I said the refund was optional; it is not.","decision_class":"consent"},"stem":`, 1)
	p, err := ParseProposal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if p.DecisionClass != "consent" || p.CalibrationNote == "" {
		t.Fatalf("meta not parsed: %+v", p)
	}
	if p2, err := ParseProposal([]byte(strings.Replace(goodProposal, `"stem":`, `"meta":{},"stem":`, 1))); err != nil || p2.DecisionClass != "" || p2.CalibrationNote != "" {
		t.Fatalf("empty meta: %+v %v", p2, err)
	}
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Observer = rec })
	capped := Option{Label: "Pay 100 now", Reasoning: "Settles the urgent part.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100,"to":"acct-9"}`)}
	none := Option{Label: "Search first", Reasoning: "Looks up the invoice before paying.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	pr := proposal(capped, none)
	pr.DecisionClass, pr.CalibrationNote = p.DecisionClass, p.CalibrationNote
	res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, pr)
	if err != nil || res.Moment == nil {
		t.Fatalf("request: %+v %v", res, err)
	}
	c := res.Moment.Envelope.Content()
	if c.Meta == nil || c.Meta.DecisionClass != "consent" || c.Meta.CalibrationNote != p.CalibrationNote {
		t.Fatalf("envelope meta: %+v", c.Meta)
	}
	if len(rec.emitted) != 1 || !rec.emitted[0].CalibrationNote || rec.emitted[0].DecisionClass != "consent" {
		t.Fatalf("observed: %+v", rec.emitted)
	}
}
