package envelope

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

// paymentDraft is a gate-style draft whose options are concrete tool calls.
func paymentDraft() Draft {
	return Draft{
		Synopsis:        "Pay invoice 7781 in full today; the bank details match the contract.",
		Findings:        []string{"Invoice 7781 is for USD 4,000 and falls due tomorrow.", "A late payment adds a 2% fee."},
		Recommendations: []string{"Release USD 4,000 to vendor@example.com now."},
		Offer:           "Ask for detail on any item.",
		Stem:            "How should invoice 7781 be paid?",
		Options: []DraftOption{
			{Label: "Pay in full now", Reasoning: "Avoids the late fee.", Tool: "payment.release",
				Args: json.RawMessage(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`)},
			{Label: "Pay half now", Reasoning: "Keeps leverage until delivery.", Tool: "payment.release",
				Args: json.RawMessage(`{"amount_usd":2000,"beneficiary":"vendor@example.com","memo":"invoice 7781, part 1"}`)},
		},
		RecommendedIdx: 0,
	}
}

func TestBuildComputesActionDigests(t *testing.T) {
	d := paymentDraft()
	env, err := Build(d)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for i, o := range d.Options {
		want, err := action.Digest(o.Tool, o.Args, jcs.Strict)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := env.Option(i)
		if got.ActionDigest != want || got.Label != o.Label || got.Reasoning != o.Reasoning {
			t.Errorf("option %d = %+v, want digest %s", i, got, want)
		}
	}
	// EP-TOOL-CALL-BINDING-v1 vector "simple-payment": strict and full agree in profile.
	if got, _ := env.Option(0); got.ActionDigest != "sha256:d0dfcc51d63932b0ca708ba87af799a97cc963d404d63e459c5fab9498845174" {
		t.Errorf("option 0 digest %s differs from the EP-TOOL-CALL-BINDING-v1 vector", got.ActionDigest)
	}
	// Hatches are open unless closed (§5.8, §12.3).
	if env.Hatches() != (Hatches{FreeText: true, Dialogue: true}) {
		t.Errorf("hatches %+v", env.Hatches())
	}
	again, err := Parse(env.Canonical())
	if err != nil || again.Digest() != env.Digest() {
		t.Fatalf("built envelope does not re-parse: %v", err)
	}
	d.CloseDialogue = true
	closed, err := Build(d)
	if err != nil || closed.Hatches() != (Hatches{FreeText: true}) || closed.Digest() == env.Digest() {
		t.Fatalf("CloseDialogue: %+v %v", closed, err)
	}
}

func TestBuildRejects(t *testing.T) {
	const o = "$.question.options"
	tests := []struct {
		name  string
		edit  func(d *Draft)
		wants []want
	}{
		{"float argument", func(d *Draft) { d.Options[1].Args = json.RawMessage(`{"amount_usd":2000.5}`) }, []want{{CodeActionNotBindable, o + "[1]"}}},
		{"huge integer argument", func(d *Draft) { d.Options[0].Args = json.RawMessage(`{"amount_usd":9007199254740993}`) }, []want{{CodeActionNotBindable, o + "[0]"}}},
		{"args not an object", func(d *Draft) { d.Options[0].Args = json.RawMessage(`[1,2]`) }, []want{{CodeActionNotBindable, o + "[0]"}}},
		{"args missing", func(d *Draft) { d.Options[0].Args = nil }, []want{{CodeActionNotBindable, o + "[0]"}}},
		{"args duplicate member", func(d *Draft) { d.Options[0].Args = json.RawMessage(`{"a":1,"a":2}`) }, []want{{CodeActionNotBindable, o + "[0]"}}},
		{"empty tool", func(d *Draft) { d.Options[0].Tool = "" }, []want{{CodeActionNotBindable, o + "[0]"}}},
		{"tool with a space", func(d *Draft) { d.Options[0].Tool = "payment release" }, []want{{CodeActionNotBindable, o + "[0]"}}},
		{"same call twice", func(d *Draft) { d.Options[1].Tool, d.Options[1].Args = d.Options[0].Tool, d.Options[0].Args }, []want{{CodeDuplicateAction, o + "[1].action_digest"}}},
		{"same call, other key order", func(d *Draft) {
			d.Options[1].Args = json.RawMessage(`{"memo":"invoice 7781","beneficiary":"vendor@example.com","amount_usd":4000.0}`)
		}, []want{{CodeDuplicateAction, o + "[1].action_digest"}}},
		{"one option with bad args, and too many findings", func(d *Draft) {
			d.Options = d.Options[:1]
			d.Options[0].Args = json.RawMessage(`{"x":0.1}`)
			d.Findings = strings.Split(strings.Repeat("A finding.|", MaxFindings+1), "|")[:MaxFindings+1]
		}, []want{{CodeActionNotBindable, o + "[0]"}, {CodeArrayLength, "$.findings"}, {CodeOptionCount, o}}},
		{"control character in a finding", func(d *Draft) { d.Findings[1] = "Fee\x1b[2J" }, []want{{CodeStringControl, "$.findings[1]"}}},
		{"same label twice", func(d *Draft) { d.Options[1].Label = d.Options[0].Label }, []want{{CodeDuplicateLabel, o + "[1].label"}}},
		{"recommended out of range", func(d *Draft) { d.RecommendedIdx = 2 }, []want{{CodeRecommendedIdx, "$.question.recommended_idx"}}},
		{"invalid UTF-8 is refused, not replaced", func(d *Draft) { d.Synopsis = "Pay \xff now." }, []want{{"JCS_INVALID_UTF8", "$.synopsis"}}},
		{"hedged, empty stem", func(d *Draft) { d.Stem = "" }, []want{{CodeStringEmpty, "$.question.stem"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := paymentDraft()
			tt.edit(&d)
			env, err := Build(d)
			if env != nil {
				t.Fatalf("built %s", env.Digest())
			}
			problemsEqual(t, err, tt.wants)
		})
	}
}

// TestBuildWithoutFindings: no findings and no recommendations are well formed (envelope-04
// §5.2, §5.3 recommend entries without requiring them) and within the actgate profile, so
// a gate builds, sends and renders such an envelope.
func TestBuildWithoutFindings(t *testing.T) {
	d := paymentDraft()
	d.Findings, d.Recommendations = nil, []string{}
	env, err := Build(d)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !strings.Contains(string(env.Canonical()), `"findings":[],`) || !strings.Contains(string(env.Canonical()), `"recommendations":[]`) {
		t.Fatalf("canonical %s", env.Canonical())
	}
	if c := env.Content(); c.Findings == nil || len(c.Findings) != 0 {
		t.Fatalf("findings %#v", c.Findings)
	}
	var b strings.Builder
	if err := (TextRenderer{}).Render(&b, env); err != nil || !strings.Contains(b.String(), "Findings:\n  (none)\n") {
		t.Fatalf("render %v:\n%s", err, b.String())
	}
}

func TestBuildMessageNamesTheProfileCode(t *testing.T) {
	d := paymentDraft()
	d.Options[0].Args = json.RawMessage(`{"rate":1.5}`)
	_, err := Build(d)
	if !strings.Contains(err.Error(), "JCS_NUMBER_OUT_OF_PROFILE") {
		t.Errorf("error does not name the profile code: %v", err)
	}
}

func TestSlotText(t *testing.T) {
	if got := SlotText("a\u202Eb\nc", 10); got != "abc" {
		t.Errorf("control and bidi characters kept: %q", got)
	}
	if got := SlotText(strings.Repeat("x", 20), 10); got != strings.Repeat("x", 9)+"…" {
		t.Errorf("not cut to 10 runes: %q", got)
	}
	if got := SlotText("\n\t", 10); got != "-" {
		t.Errorf("empty text: %q", got)
	}
}
