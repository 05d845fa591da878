package envelope

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func wrap(inner string) []byte {
	return []byte(`{"binding_moment_resolution":` + inner + `}`)
}

func TestParseResolutionAccepts(t *testing.T) {
	d := exampleDigest
	tests := []struct {
		name string
		raw  []byte
		want Resolution
	}{
		{"option", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":1}`), Resolution{EnvelopeDigest: d, Kind: KindOption, OptionIdx: 1}},
		{"option 0 as 0.0", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":0.0}`), Resolution{EnvelopeDigest: d, Kind: KindOption}},
		{"answer", wrap(`{"envelope_digest":"` + d + `","resolution":"answer","answer":"Share the dates,\nand ask why they want the passport."}`),
			Resolution{EnvelopeDigest: d, Kind: KindAnswer, Answer: "Share the dates,\nand ask why they want the passport."}},
		{"question", wrap(`{"envelope_digest":"` + d + `","resolution":"question"}`), Resolution{EnvelopeDigest: d, Kind: KindQuestion}},
		{"declined", wrap(`{"resolution":"declined","envelope_digest":"` + d + `"}`), Resolution{EnvelopeDigest: d, Kind: KindDeclined}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResolution(tt.raw)
			if err != nil {
				t.Fatalf("ParseResolution: %v", err)
			}
			if *r != tt.want {
				t.Fatalf("got %+v, want %+v", *r, tt.want)
			}
			// The wire form round-trips, with only the members its kind allows.
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseResolution(b)
			if err != nil || *again != *r {
				t.Fatalf("round trip %s: %+v %v", b, again, err)
			}
			if strings.Contains(r.String(), "passport") {
				t.Errorf("String() echoes the answer: %q", r.String())
			}
		})
	}
}

func TestParseResolutionRejects(t *testing.T) {
	d := exampleDigest
	const p = "$.binding_moment_resolution"
	tests := []struct {
		name  string
		raw   []byte
		wants []want
	}{
		{"duplicate resolution member", wrap(`{"envelope_digest":"` + d + `","resolution":"declined","resolution":"option","option_idx":0}`), []want{{"JCS_DUPLICATE_MEMBER", "$"}}},
		{"float option_idx", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":0.5}`), []want{{"JCS_NUMBER_OUT_OF_PROFILE", "$"}}},
		{"not JSON", []byte(`option 1`), []want{{"JCS_SYNTAX", "$"}}},
		{"too large", append(wrap(`{}`), []byte(strings.Repeat(" ", MaxResolutionBytes))...), []want{{CodeResTooLarge, "$"}}},
		{"array", []byte(`[]`), []want{{CodeResWrongType, "$"}}},
		// envelope-04 §7.3: exactly the member binding_moment_resolution; the inner object
		// on its own is not a resolution, whatever it holds.
		{"bare inner object", []byte(`{"envelope_digest":"` + d + `","resolution":"declined"}`), []want{
			{CodeResUnknownMember, "$.envelope_digest"}, {CodeResUnknownMember, "$.resolution"}, {CodeResMissingMember, p}}},
		{"bare inner option", []byte(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":0}`), []want{
			{CodeResUnknownMember, "$.envelope_digest"}, {CodeResUnknownMember, "$.option_idx"}, {CodeResUnknownMember, "$.resolution"}, {CodeResMissingMember, p}}},
		{"empty object", []byte(`{}`), []want{{CodeResMissingMember, p}}},
		{"null", []byte(`null`), []want{{CodeResWrongType, "$"}}},
		{"string", []byte(`"option"`), []want{{CodeResWrongType, "$"}}},
		{"wrapper null", wrap(`null`), []want{{CodeResWrongType, p}}},
		{"wrapper twice", wrap(`{"binding_moment_resolution":{"envelope_digest":"` + d + `","resolution":"declined"}}`), []want{
			{CodeResUnknownMember, p + ".binding_moment_resolution"}, {CodeResMissingMember, p + ".envelope_digest"}, {CodeResMissingMember, p + ".resolution"}}},
		{"inner members beside the wrapper", []byte(`{"binding_moment_resolution":{"envelope_digest":"` + d + `","resolution":"declined"},"envelope_digest":"` + d + `","resolution":"option","option_idx":0}`), []want{
			{CodeResUnknownMember, "$.envelope_digest"}, {CodeResUnknownMember, "$.option_idx"}, {CodeResUnknownMember, "$.resolution"}}},
		{"wrapper with a sibling", []byte(`{"binding_moment_resolution":{"envelope_digest":"` + d + `","resolution":"declined"},"note":"x"}`), []want{{CodeResUnknownMember, "$.note"}}},
		{"wrapper not an object", wrap(`"declined"`), []want{{CodeResWrongType, p}}},
		{"empty", wrap(`{}`), []want{{CodeResMissingMember, p + ".envelope_digest"}, {CodeResMissingMember, p + ".resolution"}}},
		{"unknown member", wrap(`{"envelope_digest":"` + d + `","resolution":"declined","reason":"no"}`), []want{{CodeResUnknownMember, p + ".reason"}}},
		{"unknown kind", wrap(`{"envelope_digest":"` + d + `","resolution":"approve"}`), []want{{CodeResKind, p + ".resolution"}}},
		{"kind case matters", wrap(`{"envelope_digest":"` + d + `","resolution":"Option","option_idx":0}`), []want{{CodeResKind, p + ".resolution"}}},
		{"kind not a string", wrap(`{"envelope_digest":"` + d + `","resolution":1}`), []want{{CodeResWrongType, p + ".resolution"}}},
		{"digest form", wrap(`{"envelope_digest":"sha256:0DB384","resolution":"declined"}`), []want{{CodeResDigestForm, p + ".envelope_digest"}}},
		{"digest not a string", wrap(`{"envelope_digest":null,"resolution":"declined"}`), []want{{CodeResWrongType, p + ".envelope_digest"}}},
		{"option without option_idx", wrap(`{"envelope_digest":"` + d + `","resolution":"option"}`), []want{{CodeResMissingMember, p + ".option_idx"}}},
		{"option with answer", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":0,"answer":"yes"}`), []want{{CodeResMemberNotAllowed, p + ".answer"}}},
		{"option_idx negative", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":-1}`), []want{{CodeResOptionIdx, p + ".option_idx"}}},
		{"option_idx beyond any envelope", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":4}`), []want{{CodeResOptionIdx, p + ".option_idx"}}},
		{"option_idx string", wrap(`{"envelope_digest":"` + d + `","resolution":"option","option_idx":"0"}`), []want{{CodeResWrongType, p + ".option_idx"}}},
		{"answer without answer", wrap(`{"envelope_digest":"` + d + `","resolution":"answer"}`), []want{{CodeResMissingMember, p + ".answer"}}},
		{"answer with option_idx", wrap(`{"envelope_digest":"` + d + `","resolution":"answer","answer":"x","option_idx":0}`), []want{{CodeResMemberNotAllowed, p + ".option_idx"}}},
		{"answer empty", wrap(`{"envelope_digest":"` + d + `","resolution":"answer","answer":"  "}`), []want{{CodeResAnswer, p + ".answer"}}},
		{"answer too long", wrap(`{"envelope_digest":"` + d + `","resolution":"answer","answer":"` + strings.Repeat("a", MaxAnswerRunes+1) + `"}`), []want{{CodeResAnswer, p + ".answer"}}},
		{"answer with escape sequence", wrap(`{"envelope_digest":"` + d + `","resolution":"answer","answer":"ok\u001b[2J"}`), []want{{CodeResAnswer, p + ".answer"}}},
		{"answer not a string", wrap(`{"envelope_digest":"` + d + `","resolution":"answer","answer":["a"]}`), []want{{CodeResWrongType, p + ".answer"}}},
		{"question with option_idx", wrap(`{"envelope_digest":"` + d + `","resolution":"question","option_idx":0}`), []want{{CodeResMemberNotAllowed, p + ".option_idx"}}},
		{"question with answer", wrap(`{"envelope_digest":"` + d + `","resolution":"question","answer":"wrong question"}`), []want{{CodeResMemberNotAllowed, p + ".answer"}}},
		{"declined with option_idx", wrap(`{"envelope_digest":"` + d + `","resolution":"declined","option_idx":1}`), []want{{CodeResMemberNotAllowed, p + ".option_idx"}}},
		{"declined with both", wrap(`{"envelope_digest":"` + d + `","resolution":"declined","option_idx":1,"answer":"no"}`),
			[]want{{CodeResMemberNotAllowed, p + ".option_idx"}, {CodeResMemberNotAllowed, p + ".answer"}}},
		{"everything wrong", wrap(`{"envelope_digest":"md5:1","resolution":"maybe","option_idx":-2,"answer":"","x":1}`), []want{
			{CodeResUnknownMember, p + ".x"}, {CodeResDigestForm, p + ".envelope_digest"}, {CodeResKind, p + ".resolution"},
			{CodeResOptionIdx, p + ".option_idx"}, {CodeResAnswer, p + ".answer"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResolution(tt.raw)
			if r != nil {
				t.Fatalf("accepted %+v", *r)
			}
			problemsEqual(t, err, tt.wants)
			// ParseResolutionSpec reports the same less the answer's profile, and accepts
			// what only the profile refused (envelope-04 §7.3: the answer is a string).
			var spec []want
			for _, w := range tt.wants {
				if !w.code.Profile() {
					spec = append(spec, w)
				}
			}
			sr, serr := ParseResolutionSpec(tt.raw)
			if len(spec) > 0 {
				if sr != nil {
					t.Fatalf("ParseResolutionSpec accepted %+v", *sr)
				}
				problemsEqual(t, serr, spec)
				return
			}
			if serr != nil || sr.Kind != KindAnswer {
				t.Fatalf("ParseResolutionSpec = %+v, %v", sr, serr)
			}
			if ve := (*ValidationError)(nil); !errors.As(err, &ve) || !ve.ProfileOnly() {
				t.Errorf("ProfileOnly false: %v", err)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	env, err := Parse(exampleRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	other := exampleActionA // a well-formed digest that names some other envelope
	tests := []struct {
		name  string
		r     Resolution
		codes []Code
	}{
		{"option in range", Resolution{EnvelopeDigest: exampleDigest, Kind: KindOption, OptionIdx: 1}, nil},
		{"declined", Resolution{EnvelopeDigest: exampleDigest, Kind: KindDeclined}, nil},
		{"another envelope", Resolution{EnvelopeDigest: other, Kind: KindOption}, []Code{CodeResEnvelopeMismatch}},
		{"option out of range for this envelope", Resolution{EnvelopeDigest: exampleDigest, Kind: KindOption, OptionIdx: 2}, []Code{CodeResOptionIdx}},
		{"unknown kind", Resolution{EnvelopeDigest: exampleDigest, Kind: "veto"}, []Code{CodeResKind}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(env, &tt.r)
			var got []Code
			for _, p := range ProblemsOf(err) {
				got = append(got, p.Code)
			}
			if !reflect.DeepEqual(got, tt.codes) || (err == nil) != (tt.codes == nil) {
				t.Errorf("Verify = %v, want %v", err, tt.codes)
			}
		})
	}
}

// TestVerifyClosedHatch: a resolution through a hatch the envelope closed is refused (§5.8):
// the emitter removed that veto path, so no surface offers it and none may record it.
func TestVerifyClosedHatch(t *testing.T) {
	for _, tc := range []struct {
		name                string
		closeFree, closeDlg bool
		kind                Kind
		answer              string
		refused             bool
	}{
		{"answer, free_text open", false, false, KindAnswer, "Pay 1,000.", false},
		{"answer, free_text closed", true, false, KindAnswer, "Pay 1,000.", true},
		{"question, dialogue open", true, false, KindQuestion, "", false},
		{"question, dialogue closed", false, true, KindQuestion, "", true},
		{"declined, both closed", true, true, KindDeclined, "", false},
		{"option, both closed", true, true, KindOption, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := paymentDraft()
			d.CloseFreeText, d.CloseDialogue = tc.closeFree, tc.closeDlg
			env, err := Build(d)
			if err != nil {
				t.Fatal(err)
			}
			err = Verify(env, &Resolution{EnvelopeDigest: env.Digest(), Kind: tc.kind, Answer: tc.answer})
			var got []Code
			for _, p := range ProblemsOf(err) {
				got = append(got, p.Code)
			}
			if tc.refused != (err != nil) || (tc.refused && !reflect.DeepEqual(got, []Code{CodeResHatchClosed})) {
				t.Fatalf("Verify = %v (codes %v), refused want %v", err, got, tc.refused)
			}
		})
	}
}
