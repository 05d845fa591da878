package sink

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const goodProposal = `{"synopsis":"Pay the capped amount.","findings":["f"],"recommendations":["r"],"offer":"o","stem":"How much?",
 "options":[{"label":"100","reasoning":"r","tool":"payout_create","server":"pay","args":{"amount":100}},
            {"label":"200","reasoning":"r","tool":"payout_create","args":{"amount":200}}],
 "recommended":1,"hatches":["free_text","dialogue"]}`

func TestMergePatch(t *testing.T) {
	// RFC 7396 Appendix A, with object targets and patches (the only shapes alternatives use).
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Numbers keep their text: no float round trip.
		{`{"amount":9007199254740991}`, `{"dry_run":true}`, `{"amount":9007199254740991,"dry_run":true}`},
	} {
		got, err := MergePatch(json.RawMessage(tc.target), json.RawMessage(tc.patch))
		if err != nil {
			t.Fatalf("%s + %s: %v", tc.target, tc.patch, err)
		}
		if string(got) != tc.want {
			t.Fatalf("%s + %s = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
	for _, bad := range [][2]string{{`[1]`, `{}`}, {`{}`, `"x"`}, {`{`, `{}`}, {`{}`, `{} {}`}} {
		if _, err := MergePatch(json.RawMessage(bad[0]), json.RawMessage(bad[1])); !errors.Is(err, errPatch) {
			t.Fatalf("%s + %s: %v", bad[0], bad[1], err)
		}
	}
}

func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"a":null,"b":{"c":2}}`))
	f.Add([]byte(`{}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, target, patch []byte) {
		out, err := MergePatch(target, patch)
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("result is not an object: %s", out)
		}
	})
}

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
