package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/jcs"
)

// The worked example of envelope-04 §6.4, from testdata/conformance (see its README).
const (
	exampleDigest  = "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1"
	exampleActionA = "sha256:ff91e3166e64b892004d4b43b05ad6ed7ff0819463da80c72f27f47039c033fa"
	exampleActionB = "sha256:49be14ae6e74b950c0c7b790fa22538d45fb4853bb0f3b242b28204bee232945"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exampleRaw(t testing.TB) []byte {
	return readFile(t, "testdata/conformance/envelope.canonical.json")
}

func TestWorkedExample(t *testing.T) {
	// envelope-04 §6.4: 895 canonical bytes and the printed digest.
	raw := exampleRaw(t)
	env, err := Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := len(env.Canonical()); got != 895 {
		t.Errorf("canonical length = %d, want 895", got)
	}
	if !bytes.Equal(env.Canonical(), raw) {
		t.Errorf("canonical bytes differ from the conformance file")
	}
	if env.Digest() != exampleDigest {
		t.Errorf("digest = %s, want %s", env.Digest(), exampleDigest)
	}
	// The options carry the digests of the two actions shown in §6.4.
	for i, file := range []string{"action_a", "action_b"} {
		c := readFile(t, "testdata/conformance/"+file+".canonical.json")
		opt, _ := env.Option(i)
		if d := jcs.Digest(c); d != opt.ActionDigest {
			t.Errorf("option %d action_digest = %s, digest of %s = %s", i, opt.ActionDigest, file, d)
		}
	}
	if opt, _ := env.Option(0); opt.ActionDigest != exampleActionA {
		t.Errorf("option 0 = %s", opt.ActionDigest)
	}
}

func TestParseWhitespaceAndOrderDoNotChangeDigest(t *testing.T) {
	// §6.1: the digest is over JCS(binding_moment), so member order, white space and
	// escapes in the delivered text do not matter.
	var m map[string]any
	if err := json.Unmarshal(exampleRaw(t), &m); err != nil {
		t.Fatal(err)
	}
	pretty, _ := json.MarshalIndent(m, "", "    ")
	escaped := bytes.Replace(pretty, []byte(`"synopsis"`), []byte(`"syn\u006fpsis"`), 1)
	for name, raw := range map[string][]byte{"indented": pretty, "escaped key": escaped} {
		env, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if env.Digest() != exampleDigest {
			t.Errorf("%s: digest %s", name, env.Digest())
		}
	}
}

// mutate decodes the worked example, applies f, and re-encodes it.
func mutate(t testing.TB, f func(m map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(exampleRaw(t)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func qm(m map[string]any) map[string]any         { return m["question"].(map[string]any) }
func opts(m map[string]any) []any                { return qm(m)["options"].([]any) }
func opt(m map[string]any, i int) map[string]any { return opts(m)[i].(map[string]any) }
func hatches(m map[string]any) map[string]any {
	return qm(m)["hatches"].(map[string]any)
}

type want struct {
	code Code
	path string
}

func problemsEqual(t *testing.T, err error, wants []want) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error = %v (%T), want *ValidationError", err, err)
	}
	var got []want
	for _, p := range ve.Problems {
		got = append(got, want{p.Code, p.Path})
		if p.Message == "" {
			t.Errorf("problem %s %s has no message", p.Code, p.Path)
		}
	}
	if !reflect.DeepEqual(got, wants) {
		t.Errorf("problems:\n got  %v\n want %v\n(%v)", got, wants, err)
	}
}

func TestParseRejects(t *testing.T) {
	long := strings.Repeat("x", MaxTextRunes+1)
	fiveOptions := func(m map[string]any) {
		o := opts(m)
		for i := 0; i < 3; i++ {
			o = append(o, map[string]any{"label": "Extra " + string(rune('a'+i)), "reasoning": "r", "action_digest": "sha256:" + strings.Repeat(string(rune('a'+i)), 64)})
		}
		qm(m)["options"] = o
	}
	tests := []struct {
		name  string
		raw   []byte
		wants []want
	}{
		// envelope-04 §6.3 profile bounds, on raw bytes, codes passed through from internal/jcs.
		{"duplicate member", []byte(`{"synopsis":"a","synopsis":"b"}`), []want{{"JCS_DUPLICATE_MEMBER", "$"}}},
		{"duplicate after escape decoding", bytes.Replace(exampleRaw(t), []byte(`"offer":`), []byte(`"offer":"x","off\u0065r":`), 1), []want{{"JCS_DUPLICATE_MEMBER", "$"}}},
		{"unpaired surrogate", bytes.Replace(exampleRaw(t), []byte(`"Ask for`), []byte(`"\ud800Ask for`), 1), []want{{"JCS_UNPAIRED_SURROGATE", "$"}}},
		{"non-integer recommended_idx", bytes.Replace(exampleRaw(t), []byte(`"recommended_idx":0`), []byte(`"recommended_idx":0.5`), 1), []want{{"JCS_NUMBER_OUT_OF_PROFILE", "$"}}},
		{"2^53 recommended_idx", bytes.Replace(exampleRaw(t), []byte(`"recommended_idx":0`), []byte(`"recommended_idx":9007199254740992`), 1), []want{{"JCS_NUMBER_OUT_OF_PROFILE", "$"}}},
		{"nesting 65", []byte(strings.Repeat("[", 65) + strings.Repeat("]", 65)), []want{{"JCS_DEPTH_EXCEEDED", "$"}}},
		{"invalid UTF-8", bytes.Replace(exampleRaw(t), []byte(`Ask for`), []byte("Ask \xff for"), 1), []want{{"JCS_INVALID_UTF8", "$"}}},
		{"not JSON", []byte(`{"synopsis":`), []want{{"JCS_SYNTAX", "$"}}},
		{"trailing data", append(exampleRaw(t), []byte(` {}`)...), []want{{"JCS_SYNTAX", "$"}}},
		{"empty input", nil, []want{{"JCS_SYNTAX", "$"}}},
		{"too large", append(exampleRaw(t), bytes.Repeat([]byte(" "), MaxDocumentBytes)...), []want{{CodeTooLarge, "$"}}},

		// §4 member set and types.
		{"array", []byte(`[]`), []want{{CodeWrongType, "$"}}},
		{"null", []byte(`null`), []want{{CodeWrongType, "$"}}},
		{"unknown top-level member", mutate(t, func(m map[string]any) { m["urgency"] = "high" }), []want{{CodeUnknownMember, "$.urgency"}}},
		{"unknown member with odd name", mutate(t, func(m map[string]any) { m["a.b[0]"] = 1 }), []want{{CodeUnknownMember, `$["a.b[0]"]`}}},
		{"unknown question member", mutate(t, func(m map[string]any) { qm(m)["default"] = 0 }), []want{{CodeUnknownMember, "$.question.default"}}},
		{"unknown option member", mutate(t, func(m map[string]any) { opt(m, 1)["tool"] = "x" }), []want{{CodeUnknownMember, "$.question.options[1].tool"}}},
		{"unknown hatch", mutate(t, func(m map[string]any) { hatches(m)["skip"] = true }), []want{{CodeUnknownMember, "$.question.hatches.skip"}}},
		{"unknown meta member", mutate(t, func(m map[string]any) { m["meta"] = map[string]any{"priority": "p1"} }), []want{{CodeUnknownMember, "$.meta.priority"}}},
		{"binding_moment inside a bare envelope", mutate(t, func(m map[string]any) { m["binding_moment"] = map[string]any{} }), []want{{CodeUnknownMember, "$.binding_moment"}}},
		{"missing every briefing slot", mutate(t, func(m map[string]any) {
			delete(m, "synopsis")
			delete(m, "findings")
			delete(m, "recommendations")
			delete(m, "offer")
		}), []want{{CodeMissingMember, "$.synopsis"}, {CodeMissingMember, "$.findings"}, {CodeMissingMember, "$.recommendations"}, {CodeMissingMember, "$.offer"}}},
		{"missing question", mutate(t, func(m map[string]any) { delete(m, "question") }), []want{{CodeMissingMember, "$.question"}}},
		{"missing stem and options", mutate(t, func(m map[string]any) { delete(qm(m), "stem"); delete(qm(m), "options") }), []want{{CodeMissingMember, "$.question.stem"}, {CodeMissingMember, "$.question.options"}}},
		{"missing action_digest", mutate(t, func(m map[string]any) { delete(opt(m, 0), "action_digest") }), []want{{CodeMissingMember, "$.question.options[0].action_digest"}}},
		{"missing reasoning", mutate(t, func(m map[string]any) { delete(opt(m, 1), "reasoning") }), []want{{CodeMissingMember, "$.question.options[1].reasoning"}}},
		{"missing free_text hatch", mutate(t, func(m map[string]any) { delete(hatches(m), "free_text") }), []want{{CodeMissingMember, "$.question.hatches.free_text"}}},
		{"missing dialogue hatch", mutate(t, func(m map[string]any) { delete(hatches(m), "dialogue") }), []want{{CodeMissingMember, "$.question.hatches.dialogue"}}},
		{"missing hatches", mutate(t, func(m map[string]any) { delete(qm(m), "hatches") }), []want{{CodeMissingMember, "$.question.hatches"}}},
		{"synopsis number", mutate(t, func(m map[string]any) { m["synopsis"] = 1 }), []want{{CodeWrongType, "$.synopsis"}}},
		{"findings string", mutate(t, func(m map[string]any) { m["findings"] = "one" }), []want{{CodeWrongType, "$.findings"}}},
		{"finding not a string", mutate(t, func(m map[string]any) { m["findings"].([]any)[1] = true }), []want{{CodeWrongType, "$.findings[1]"}}},
		{"question array", mutate(t, func(m map[string]any) { m["question"] = []any{} }), []want{{CodeWrongType, "$.question"}}},
		{"options object", mutate(t, func(m map[string]any) { qm(m)["options"] = map[string]any{} }), []want{{CodeWrongType, "$.question.options"}}},
		{"option string", mutate(t, func(m map[string]any) { opts(m)[0] = "Share dates only" }), []want{{CodeWrongType, "$.question.options[0]"}}},
		{"hatch string true", mutate(t, func(m map[string]any) { hatches(m)["dialogue"] = "true" }), []want{{CodeWrongType, "$.question.hatches.dialogue"}}},
		{"hatch null", mutate(t, func(m map[string]any) { hatches(m)["free_text"] = nil }), []want{{CodeWrongType, "$.question.hatches.free_text"}}},
		{"meta string", mutate(t, func(m map[string]any) { m["meta"] = "consent" }), []want{{CodeWrongType, "$.meta"}}},

		// §5.6 option count.
		{"zero options", mutate(t, func(m map[string]any) { qm(m)["options"] = []any{} }), []want{{CodeOptionCount, "$.question.options"}, {CodeRecommendedIdx, "$.question.recommended_idx"}}},
		{"one option", mutate(t, func(m map[string]any) { qm(m)["options"] = opts(m)[:1] }), []want{{CodeOptionCount, "$.question.options"}}},
		{"five options", mutate(t, fiveOptions), []want{{CodeOptionCount, "$.question.options"}}},

		// §5.7 recommended_idx.
		{"recommended_idx absent", mutate(t, func(m map[string]any) { delete(qm(m), "recommended_idx") }), []want{{CodeMissingMember, "$.question.recommended_idx"}}},
		{"recommended_idx negative", mutate(t, func(m map[string]any) { qm(m)["recommended_idx"] = -1 }), []want{{CodeRecommendedIdx, "$.question.recommended_idx"}}},
		{"recommended_idx out of range", mutate(t, func(m map[string]any) { qm(m)["recommended_idx"] = 2 }), []want{{CodeRecommendedIdx, "$.question.recommended_idx"}}},
		{"recommended_idx string", mutate(t, func(m map[string]any) { qm(m)["recommended_idx"] = "0" }), []want{{CodeWrongType, "$.question.recommended_idx"}}},
		{"recommended_idx null", mutate(t, func(m map[string]any) { qm(m)["recommended_idx"] = nil }), []want{{CodeWrongType, "$.question.recommended_idx"}}},

		// §5.6 and §6.2 action_digest form.
		{"digest uppercase hex", mutate(t, func(m map[string]any) {
			opt(m, 0)["action_digest"] = strings.ToUpper(exampleActionA[:7]) + strings.ToUpper(exampleActionA[7:])
		}), []want{{CodeActionDigestForm, "$.question.options[0].action_digest"}}},
		{"digest uppercase prefix", mutate(t, func(m map[string]any) { opt(m, 0)["action_digest"] = "SHA256:" + exampleActionA[7:] }), []want{{CodeActionDigestForm, "$.question.options[0].action_digest"}}},
		{"digest bare hex", mutate(t, func(m map[string]any) { opt(m, 0)["action_digest"] = exampleActionA[7:] }), []want{{CodeActionDigestForm, "$.question.options[0].action_digest"}}},
		{"digest truncated as in the draft's display", mutate(t, func(m map[string]any) { opt(m, 1)["action_digest"] = "sha256:49be14ae6e74..." }), []want{{CodeActionDigestForm, "$.question.options[1].action_digest"}}},
		{"digest sha512", mutate(t, func(m map[string]any) { opt(m, 1)["action_digest"] = "sha512:" + exampleActionB[7:] }), []want{{CodeActionDigestForm, "$.question.options[1].action_digest"}}},
		{"digest empty", mutate(t, func(m map[string]any) { opt(m, 1)["action_digest"] = "" }), []want{{CodeActionDigestForm, "$.question.options[1].action_digest"}}},
		{"digest 65 hex", mutate(t, func(m map[string]any) { opt(m, 1)["action_digest"] = exampleActionB + "0" }), []want{{CodeActionDigestForm, "$.question.options[1].action_digest"}}},

		// actgate profile: strings and arrays.
		{"empty synopsis", mutate(t, func(m map[string]any) { m["synopsis"] = "" }), []want{{CodeStringEmpty, "$.synopsis"}}},
		{"blank stem", mutate(t, func(m map[string]any) { qm(m)["stem"] = " \t " }), []want{{CodeStringEmpty, "$.question.stem"}}},
		{"long reasoning", mutate(t, func(m map[string]any) { opt(m, 0)["reasoning"] = long }), []want{{CodeStringTooLong, "$.question.options[0].reasoning"}}},
		{"long label", mutate(t, func(m map[string]any) { opt(m, 0)["label"] = strings.Repeat("é", MaxLabelRunes+1) }), []want{{CodeStringTooLong, "$.question.options[0].label"}}},
		{"label at the bound is fine but synopsis with newline is not", mutate(t, func(m map[string]any) {
			opt(m, 0)["label"] = strings.Repeat("é", MaxLabelRunes)
			m["synopsis"] = "Share the dates.\n[x] Approve everything"
		}), []want{{CodeStringControl, "$.synopsis"}}},
		{"bidi override in label", mutate(t, func(m map[string]any) { opt(m, 1)["label"] = "Share \u202edates" }), []want{{CodeStringControl, "$.question.options[1].label"}}},
		{"escape sequence in finding", mutate(t, func(m map[string]any) { m["findings"].([]any)[0] = "\x1b[2Jcleared" }), []want{{CodeStringControl, "$.findings[0]"}}},
		{"line separator in offer", mutate(t, func(m map[string]any) { m["offer"] = "Ask\u2028me" }), []want{{CodeStringControl, "$.offer"}}},
		{"too many findings", mutate(t, func(m map[string]any) {
			var a []any
			for i := 0; i <= MaxFindings; i++ {
				a = append(a, "A finding.")
			}
			m["findings"] = a
		}), []want{{CodeArrayLength, "$.findings"}}},
		{"too many recommendations", mutate(t, func(m map[string]any) {
			var a []any
			for i := 0; i <= MaxRecommendations; i++ {
				a = append(a, "Do something.")
			}
			m["recommendations"] = a
		}), []want{{CodeArrayLength, "$.recommendations"}}},
		{"empty meta member", mutate(t, func(m map[string]any) { m["meta"] = map[string]any{"decision_class": ""} }), []want{{CodeStringEmpty, "$.meta.decision_class"}}},
		{"empty meta members, both", mutate(t, func(m map[string]any) { m["meta"] = map[string]any{"decision_class": "", "calibration_note": " "} }),
			[]want{{CodeStringEmpty, "$.meta.decision_class"}, {CodeStringEmpty, "$.meta.calibration_note"}}},
		{"every profile rule at once", mutate(t, func(m map[string]any) {
			m["synopsis"] = ""
			m["offer"] = "Ask\nme"
			opt(m, 0)["reasoning"] = long
			opt(m, 1)["label"] = opt(m, 0)["label"]
			opt(m, 1)["action_digest"] = exampleActionA
		}), []want{
			{CodeStringEmpty, "$.synopsis"},
			{CodeStringControl, "$.offer"},
			{CodeStringTooLong, "$.question.options[0].reasoning"},
			{CodeDuplicateLabel, "$.question.options[1].label"},
			{CodeDuplicateAction, "$.question.options[1].action_digest"},
		}},
		{"long decision_class", mutate(t, func(m map[string]any) {
			m["meta"] = map[string]any{"decision_class": strings.Repeat("c", MaxDecisionClassRunes+1)}
		}), []want{{CodeStringTooLong, "$.meta.decision_class"}}},
		{"duplicate label", mutate(t, func(m map[string]any) { opt(m, 1)["label"] = opt(m, 0)["label"] }), []want{{CodeDuplicateLabel, "$.question.options[1].label"}}},
		{"duplicate action", mutate(t, func(m map[string]any) { opt(m, 1)["action_digest"] = exampleActionA }), []want{{CodeDuplicateAction, "$.question.options[1].action_digest"}}},

		// Every reason is listed, in document order.
		{"many problems at once", mutate(t, func(m map[string]any) {
			m["extra"] = 1
			delete(m, "offer")
			m["synopsis"] = ""
			qm(m)["options"] = opts(m)[:1]
			qm(m)["recommended_idx"] = 3
			opt(m, 0)["action_digest"] = "sha256:abc"
			delete(hatches(m), "dialogue")
			m["meta"] = map[string]any{"mood": "x"}
		}), []want{
			{CodeUnknownMember, "$.extra"},
			{CodeMissingMember, "$.offer"},
			{CodeStringEmpty, "$.synopsis"},
			{CodeOptionCount, "$.question.options"},
			{CodeActionDigestForm, "$.question.options[0].action_digest"},
			{CodeRecommendedIdx, "$.question.recommended_idx"},
			{CodeMissingMember, "$.question.hatches.dialogue"},
			{CodeUnknownMember, "$.meta.mood"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Parse(tt.raw)
			if env != nil {
				t.Fatalf("Parse accepted the envelope (digest %s)", env.Digest())
			}
			problemsEqual(t, err, tt.wants)
			// ParseSpec reports the same problems less the actgate profile's.
			var spec []want
			for _, w := range tt.wants {
				if !w.code.Profile() {
					spec = append(spec, w)
				}
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.ProfileOnly() != (len(spec) == 0) {
				t.Errorf("ProfileOnly() = %v with %d spec problems", ve != nil && ve.ProfileOnly(), len(spec))
			}
			senv, serr := ParseSpec(tt.raw)
			if len(spec) > 0 {
				if senv != nil {
					t.Fatalf("ParseSpec accepted the envelope (digest %s)", senv.Digest())
				}
				problemsEqual(t, serr, spec)
				return
			}
			checkProfileOnlyRefusal(t, tt.raw, senv, serr, tt.wants)
		})
	}
}

// checkProfileOnlyRefusal asserts what holds of a well-formed envelope outside the actgate
// profile: ParseSpec accepts and digests it, CheckProfile reports the profile problems
// wants, and no renderer renders it as a decision.
func checkProfileOnlyRefusal(t *testing.T, raw []byte, env *Envelope, err error, wants []want) {
	t.Helper()
	if err != nil {
		t.Fatalf("ParseSpec refused a well-formed envelope: %v", err)
	}
	canonical, cerr := jcs.Canonicalize(raw, jcs.Strict)
	if cerr != nil || env.Digest() != jcs.Digest(canonical) || !bytes.Equal(env.Canonical(), canonical) {
		t.Fatalf("ParseSpec digest %s, canonical %v", env.Digest(), cerr)
	}
	// The content reproduces the digested bytes.
	viaContent, _ := json.Marshal(env.Content())
	if again, err := ParseSpec(viaContent); err != nil || again.Digest() != env.Digest() {
		t.Fatalf("content re-parse: %v", err)
	}
	problemsEqual(t, env.CheckProfile(), wants)
	var b bytes.Buffer
	if rerr := (TextRenderer{}).Render(&b, env); rerr == nil || b.Len() != 0 {
		t.Fatalf("rendered an envelope outside the profile (%v):\n%s", rerr, b.String())
	} else {
		problemsEqual(t, rerr, wants)
	}
	b.Reset()
	if err := (TextRenderer{}).RenderFallback(&b, "", ProblemsOf(env.CheckProfile())); err != nil ||
		!strings.HasPrefix(b.String(), "BINDING MOMENT NOT RENDERED: the envelope is well formed") || strings.Contains(b.String(), "malformed") {
		t.Fatalf("fallback:\n%s", b.String())
	}
}

func TestParseJCSErrorUnwraps(t *testing.T) {
	_, err := Parse([]byte(`{"a":1,"a":1}`))
	if c, ok := jcs.CodeOf(err); !ok || c != jcs.CodeDuplicateMember {
		t.Errorf("jcs.CodeOf = %q, %v", c, ok)
	}
	if !HasCode(err, Code(jcs.CodeDuplicateMember)) {
		t.Errorf("HasCode false: %v", err)
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name  string
		raw   []byte
		check func(t *testing.T, env *Envelope)
	}{
		{"integer-valued 1.0 is 1 under the profile", bytes.Replace(
			mutate(t, func(m map[string]any) { qm(m)["recommended_idx"] = 1 }),
			[]byte(`"recommended_idx":1`), []byte(`"recommended_idx":1.0`), 1),
			func(t *testing.T, env *Envelope) {
				if env.RecommendedIdx() != 1 || bytes.Contains(env.Canonical(), []byte("1.0")) {
					t.Errorf("recommended_idx %d, canonical %s", env.RecommendedIdx(), env.Canonical())
				}
			}},
		{"four options, last recommended", mutate(t, func(m map[string]any) {
			o := opts(m)
			o = append(o,
				map[string]any{"label": "Share nothing", "reasoning": "Keeps everything private.", "action_digest": "sha256:" + strings.Repeat("1", 64)},
				map[string]any{"label": "Ask the service why", "reasoning": "Learn what the number is for.", "action_digest": "sha256:" + strings.Repeat("2", 64)})
			qm(m)["options"] = o
			qm(m)["recommended_idx"] = 3
		}), func(t *testing.T, env *Envelope) {
			if env.NumOptions() != 4 || env.RecommendedIdx() != 3 {
				t.Errorf("options %d recommended %d", env.NumOptions(), env.RecommendedIdx())
			}
		}},
		// envelope-04 §5.2 and §5.3 recommend 3–6 findings and 2–4 recommendations; neither
		// is required, and an empty list is well formed and within the actgate profile.
		{"no findings", mutate(t, func(m map[string]any) { m["findings"] = []any{} }),
			func(t *testing.T, env *Envelope) {
				if c := env.Content(); c.Findings == nil || len(c.Findings) != 0 || !bytes.Contains(env.Canonical(), []byte(`"findings":[],`)) {
					t.Errorf("findings %#v, canonical %s", c.Findings, env.Canonical())
				}
			}},
		{"no findings and no recommendations", mutate(t, func(m map[string]any) { m["findings"] = []any{}; m["recommendations"] = []any{} }),
			func(t *testing.T, env *Envelope) {
				if c := env.Content(); len(c.Findings)+len(c.Recommendations) != 0 {
					t.Errorf("content %+v", c)
				}
			}},
		{"findings at the profile's bound", mutate(t, func(m map[string]any) {
			var a []any
			for i := 0; i < MaxFindings; i++ {
				a = append(a, "Finding "+string(rune('a'+i))+".")
			}
			m["findings"] = a
		}), func(t *testing.T, env *Envelope) {
			if len(env.Content().Findings) != MaxFindings {
				t.Errorf("findings %d", len(env.Content().Findings))
			}
		}},
		{"hatches closed", mutate(t, func(m map[string]any) { hatches(m)["free_text"] = false; hatches(m)["dialogue"] = false }),
			func(t *testing.T, env *Envelope) {
				if env.Hatches() != (Hatches{}) {
					t.Errorf("hatches %+v", env.Hatches())
				}
			}},
		{"meta with both members", mutate(t, func(m map[string]any) {
			m["meta"] = map[string]any{"decision_class": "consent", "calibration_note": "Earlier I called this minor; it is not."}
		}), func(t *testing.T, env *Envelope) {
			if c := env.Content(); c.Meta == nil || c.Meta.DecisionClass != "consent" || c.Meta.CalibrationNote == "" {
				t.Errorf("meta %+v", c.Meta)
			}
		}},
		{"empty meta is kept, and digested", mutate(t, func(m map[string]any) { m["meta"] = map[string]any{} }),
			func(t *testing.T, env *Envelope) {
				if env.Content().Meta == nil || !bytes.Contains(env.Canonical(), []byte(`"meta":{}`)) || env.Digest() == exampleDigest {
					t.Errorf("meta lost: %s", env.Canonical())
				}
			}},
		{"HTML-significant characters survive re-marshalling", mutate(t, func(m map[string]any) { m["offer"] = `Ask about <b>any</b> item & "quote" \\ it.` }),
			func(t *testing.T, env *Envelope) {
				if !bytes.Contains(env.Canonical(), []byte(`<b>any</b> item & \"quote\" \\\\ it.`)) {
					t.Errorf("canonical %s", env.Canonical())
				}
			}},
		{"non-ASCII text and LRM", mutate(t, func(m map[string]any) { m["synopsis"] = "Partager les dates \u200e— pas le passeport 🛂." }),
			func(t *testing.T, env *Envelope) {
				if !strings.Contains(env.Content().Synopsis, "🛂") {
					t.Error("synopsis lost")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Parse(tt.raw)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, env)
			// What Parse accepts, ParseSpec accepts with the same digest, and it renders.
			if senv, err := ParseSpec(tt.raw); err != nil || senv.Digest() != env.Digest() {
				t.Fatalf("ParseSpec: %v", err)
			}
			if err := env.CheckProfile(); err != nil {
				t.Fatalf("CheckProfile: %v", err)
			}
			if err := (TextRenderer{}).Render(io.Discard, env); err != nil {
				t.Fatalf("Render: %v", err)
			}
			// Re-marshalling through the canonical bytes gives the same envelope (§6.1).
			again, err := Parse(env.Canonical())
			if err != nil || again.Digest() != env.Digest() {
				t.Fatalf("re-parse: %v", err)
			}
			viaContent, _ := json.Marshal(env.Content())
			if again, err := Parse(viaContent); err != nil || again.Digest() != env.Digest() {
				t.Fatalf("content re-parse: %v", err)
			}
		})
	}
}

func TestEnvelopeIsImmutable(t *testing.T) {
	env, err := Parse(exampleRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	c := env.Content()
	c.Synopsis = "Share everything."
	c.Findings[0] = "changed"
	c.Question.Options[0].ActionDigest = exampleActionB
	can := env.Canonical()
	can[0] = 'X'
	if got := env.Content(); got.Synopsis == "Share everything." || got.Findings[0] == "changed" || got.Question.Options[0].ActionDigest != exampleActionA {
		t.Errorf("envelope content changed through a copy: %+v", got)
	}
	if !bytes.Equal(env.Canonical(), exampleRaw(t)) {
		t.Error("canonical bytes changed through a copy")
	}
	m, _ := json.Marshal(env)
	if !bytes.Equal(m, exampleRaw(t)) {
		t.Errorf("MarshalJSON = %s", m)
	}
	if _, ok := env.Option(2); ok {
		t.Error("Option(2) ok on a two-option envelope")
	}
	if _, ok := env.Option(-1); ok {
		t.Error("Option(-1) ok")
	}
}

func TestProblemStringAndError(t *testing.T) {
	_, err := Parse(mutate(t, func(m map[string]any) { m["x\ny"] = 1; delete(m, "offer") }))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatal(err)
	}
	for _, p := range ve.Problems {
		s := p.String()
		if !strings.HasPrefix(s, string(p.Code)+" ") || strings.Contains(s, "\n") {
			t.Errorf("problem line %q", s)
		}
	}
	if !reflect.DeepEqual(ve.Codes(), []Code{CodeUnknownMember, CodeMissingMember}) {
		t.Errorf("codes %v", ve.Codes())
	}
	if !strings.HasPrefix(err.Error(), "envelope rejected: ENV_UNKNOWN_MEMBER") {
		t.Errorf("Error() = %q", err.Error())
	}
}

// TestMetaJSON: Meta marshals as the plain struct would, and keeps a member received
// present and empty, which is well formed (envelope-04 §5.9).
func TestMetaJSON(t *testing.T) {
	b, err := json.Marshal(Meta{DecisionClass: "consent", CalibrationNote: "note"})
	if err != nil || string(b) != `{"decision_class":"consent","calibration_note":"note"}` {
		t.Errorf("Meta = %s %v", b, err)
	}
	if b, _ := json.Marshal(Meta{}); string(b) != `{}` {
		t.Errorf("empty Meta = %s", b)
	}
	raw := mutate(t, func(m map[string]any) { m["meta"] = map[string]any{"decision_class": "", "calibration_note": "note"} })
	env, err := ParseSpec(raw)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(env.Content().Meta); string(b) != `{"decision_class":"","calibration_note":"note"}` {
		t.Errorf("received Meta = %s", b)
	}
}

func TestJSONRoundTripThroughStructs(t *testing.T) {
	// An *Envelope or Resolution embedded in a decoded structure is validated on the way in.
	type carrier struct {
		Env *Envelope  `json:"env"`
		Res Resolution `json:"res"`
	}
	in := []byte(`{"env":` + string(exampleRaw(t)) + `,"res":{"binding_moment_resolution":{"envelope_digest":"` + exampleDigest + `","resolution":"question"}}}`)
	var c carrier
	if err := json.Unmarshal(in, &c); err != nil {
		t.Fatal(err)
	}
	if c.Env.Digest() != exampleDigest || c.Res.Kind != KindQuestion {
		t.Fatalf("decoded %s %+v", c.Env.Digest(), c.Res)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var again carrier
	if err := json.Unmarshal(out, &again); err != nil || again.Env.Digest() != exampleDigest || again.Res != c.Res {
		t.Fatalf("round trip: %v", err)
	}
	bad := bytes.Replace(in, []byte(`"recommended_idx":0`), []byte(`"recommended_idx":5`), 1)
	if err := json.Unmarshal(bad, &c); !HasCode(err, CodeRecommendedIdx) {
		t.Fatalf("malformed envelope decoded: %v", err)
	}
	dup := bytes.Replace(in, []byte(`"resolution":"question"`), []byte(`"resolution":"question","resolution":"option"`), 1)
	if err := json.Unmarshal(dup, &c); !HasCode(err, "JCS_DUPLICATE_MEMBER") {
		t.Fatalf("duplicate member decoded: %v", err)
	}
}
