package moment

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const goodProposal = `{"synopsis":"Pay the capped amount.","findings":["f"],"recommendations":["r"],"offer":"o","stem":"How much?",
 "options":[{"label":"100","reasoning":"r","tool":"payout_create","server":"pay","args":{"amount":100}},
            {"label":"200","reasoning":"r","tool":"payout_create","args":{"amount":200}}],
 "recommended":1,"hatches":["free_text","dialogue"]}`

func TestParseProposal(t *testing.T) {
	p, err := ParseProposal([]byte(goodProposal))
	if err != nil {
		t.Fatal(err)
	}
	if p.Synopsis != "Pay the capped amount." || len(p.Options) != 2 || p.Recommended != 1 || p.Options[0].Server != "pay" ||
		p.Options[1].Server != "" || string(p.Options[1].Args) != `{"amount":200}` || len(p.Hatches) != 2 || p.Offer != "o" {
		t.Fatalf("parsed %+v", p)
	}
	// Re-parsing what it kept gives the same proposal.
	again, err := ParseProposal(p.Raw)
	if err != nil || string(again.Raw) != string(p.Raw) {
		t.Fatalf("re-parse: %v", err)
	}
}

func TestParseProposalBadInput(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(goodProposal, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(goodProposal, old, new, 1)
	}
	for _, tc := range []struct {
		name, in string
	}{
		{"empty", ``},
		{"not JSON", `synopsis`},
		{"array", `[1,2]`},
		{"trailing data", goodProposal + `{}`},
		{"duplicate member", edit(`"stem":"How much?"`, `"stem":"How much?","stem":"Pay?"`)},
		{"unknown member", edit(`"stem":`, `"urgency":"high","stem":`)},
		{"agent-supplied digest", edit(`"label":"100",`, `"label":"100","action_digest":"sha256:00",`)},
		{"no synopsis", edit(`"synopsis":"Pay the capped amount.",`, ``)},
		{"null synopsis", edit(`"synopsis":"Pay the capped amount."`, `"synopsis":null`)},
		{"no stem", edit(`"stem":"How much?",`, ``)},
		{"no options", edit(`"options":[`, `"x":[`)},
		{"no recommended", edit(`"recommended":1,`, ``)},
		{"negative recommended", edit(`"recommended":1`, `"recommended":-1`)},
		{"recommended out of range", edit(`"recommended":1`, `"recommended":2`)},
		{"fractional recommended", edit(`"recommended":1`, `"recommended":1.5`)},
		{"huge recommended", edit(`"recommended":1`, `"recommended":9007199254740993`)},
		{"option without tool", edit(`"tool":"payout_create","server":"pay",`, ``)},
		{"option without args", edit(`,"args":{"amount":200}`, ``)},
		{"option without label", edit(`"label":"100",`, ``)},
		{"empty decision_class", edit(`"stem":`, `"meta":{"decision_class":""},"stem":`)},
		{"empty calibration_note", edit(`"stem":`, `"meta":{"calibration_note":""},"stem":`)},
		{"unknown meta member", edit(`"stem":`, `"meta":{"urgency":"high"},"stem":`)},
		{"meta not an object", edit(`"stem":`, `"meta":"consent","stem":`)},
		{"args not an object", edit(`"args":{"amount":200}`, `"args":[200]`)},
		{"args a string", edit(`"args":{"amount":200}`, `"args":"{}"`)},
		{"fractional argument", edit(`"amount":200`, `"amount":2.5`)},
		{"unpaired surrogate", edit(`"f"`, `"\ud800"`)},
		{"invalid UTF-8", edit(`"f"`, "\"\xff\"")},
		{"unknown hatch", edit(`"free_text","dialogue"`, `"free_text","exit"`)},
		{"repeated hatch", edit(`"free_text","dialogue"`, `"dialogue","dialogue"`)},
		{"finding not a string", edit(`["f"]`, `[1]`)},
		{"deep nesting", edit(`{"amount":200}`, `{"a":`+strings.Repeat("[", 70)+strings.Repeat("]", 70)+`}`)},
		{"too large", `{"synopsis":"` + strings.Repeat("x", MaxProposalBytes) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProposal([]byte(tc.in))
			if !errors.Is(err, ErrProposal) {
				t.Fatalf("err = %v, want ErrProposal", err)
			}
		})
	}
}

func TestProposalSchemaIsJSON(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(ProposalSchema(), &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != "object" || m["additionalProperties"] != false {
		t.Fatalf("schema %v", m)
	}
	props := m["properties"].(map[string]any)
	for _, k := range []string{"synopsis", "findings", "recommendations", "offer", "stem", "options", "recommended", "hatches"} {
		if _, ok := props[k]; !ok {
			t.Fatalf("schema lacks %s", k)
		}
	}
}

func FuzzParseProposal(f *testing.F) {
	f.Add([]byte(goodProposal))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"synopsis":"s","stem":"q","options":[],"recommended":0}`))
	f.Add([]byte(`{"synopsis":"s","stem":"q","options":[{"label":"a","tool":"t","args":{}}],"recommended":0,"hatches":["dialogue"]}`))
	f.Add([]byte(`{"synopsis":"\ud800","stem":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseProposal(raw)
		if err != nil {
			if !errors.Is(err, ErrProposal) {
				t.Fatalf("error does not wrap ErrProposal: %v", err)
			}
			return
		}
		if p.Recommended < 0 || p.Recommended >= len(p.Options) {
			t.Fatalf("recommended %d of %d options", p.Recommended, len(p.Options))
		}
		for _, o := range p.Options {
			if len(o.Args) == 0 || o.Args[0] != '{' {
				t.Fatalf("args %s", o.Args)
			}
		}
		again, err := ParseProposal(p.Raw)
		if err != nil || string(again.Raw) != string(p.Raw) {
			t.Fatalf("not stable: %v", err)
		}
	})
}
