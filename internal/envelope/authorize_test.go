package envelope

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAuthorize(t *testing.T) {
	env, err := Build(paymentDraft())
	if err != nil {
		t.Fatal(err)
	}
	full := paymentDraft().Options[0]
	half := paymentDraft().Options[1]
	opt0, _ := env.Option(0)
	opt := func(i int) *Resolution {
		return &Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption, OptionIdx: i}
	}
	tests := []struct {
		name   string
		res    *Resolution
		tool   string
		args   string
		code   Code   // "" = authority granted
		detail string // must appear in the error
	}{
		{"option 0 with its own action", opt(0), full.Tool, string(full.Args), "", ""},
		{"option 1 with its own action", opt(1), half.Tool, string(half.Args), "", ""},
		{"same action, other key order and white space", opt(0),
			"payment.release", ` { "memo" : "invoice 7781", "beneficiary":"vendor@example.com", "amount_usd": 4000 } `, "", ""},
		{"same action, 4000.0 is the integer 4000 under the profile", opt(0),
			"payment.release", `{"amount_usd":4000.0,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`, "", ""},
		// §12.6 option-map substitution: an authentic selection of option 1 does not
		// authorise option 0's (larger) action, and vice versa.
		{"option 1 selected, option 0's action presented", opt(1), full.Tool, string(full.Args), CodeResActionMismatch, opt0.ActionDigest},
		{"option 0 selected, amount changed", opt(0),
			"payment.release", `{"amount_usd":40000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`, CodeResActionMismatch, ""},
		{"option 0 selected, other tool", opt(0), "payment.refund", string(full.Args), CodeResActionMismatch, ""},
		{"option 0 selected, extra argument", opt(0),
			"payment.release", `{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781","cc":"x@example.com"}`, CodeResActionMismatch, ""},
		{"action outside the strict profile", opt(0), "payment.release", `{"amount_usd":4000.5}`, CodeResActionNotBindable, "JCS_NUMBER_OUT_OF_PROFILE"},
		{"action with no tool", opt(0), "", string(full.Args), CodeResActionNotBindable, ""},
		// §7.3: only option is authority; the other three stay distinct and say which.
		{"answer", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindAnswer, Answer: "Pay in full but from the other account."}, full.Tool, string(full.Args), CodeResNotAuthority, `"answer"`},
		{"question", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindQuestion}, full.Tool, string(full.Args), CodeResNotAuthority, `"question"`},
		{"declined", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindDeclined}, full.Tool, string(full.Args), CodeResNotAuthority, `"declined"`},
		{"declined, and an action outside the profile", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindDeclined}, full.Tool, `{"x":0.5}`, CodeResNotAuthority, `"declined"`},
		// §12.5: a resolution names exactly one envelope.
		{"resolution of another envelope", &Resolution{EnvelopeDigest: exampleDigest, Kind: KindOption}, full.Tool, string(full.Args), CodeResEnvelopeMismatch, ""},
		{"option index beyond this envelope", opt(2), full.Tool, string(full.Args), CodeResOptionIdx, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := AuthorizeCall(env, tt.res, tt.tool, json.RawMessage(tt.args))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("AuthorizeCall: %v", err)
				}
				want, _ := env.Option(tt.res.OptionIdx)
				if g != (Grant{EnvelopeDigest: env.Digest(), OptionIdx: tt.res.OptionIdx, ActionDigest: want.ActionDigest}) {
					t.Fatalf("grant %+v", g)
				}
				// Authorize with the same call built by ToolCall grants the same.
				act, err := ToolCall(tt.tool, json.RawMessage(tt.args))
				if err != nil {
					t.Fatal(err)
				}
				if g2, err := Authorize(env, tt.res, act); err != nil || g2 != g {
					t.Fatalf("Authorize(ToolCall) = %+v, %v", g2, err)
				}
				return
			}
			if g != (Grant{}) {
				t.Fatalf("grant %+v returned with a refusal", g)
			}
			if ps := ProblemsOf(err); len(ps) != 1 || ps[0].Code != tt.code {
				t.Fatalf("err = %v, want only %s", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("err %q does not mention %q", err, tt.detail)
			}
		})
	}
	act, _ := ToolCall(full.Tool, full.Args)
	if _, err := Authorize(nil, opt(0), act); err == nil {
		t.Error("nil envelope authorised")
	}
	if _, err := Authorize(env, opt(0), Action{}); !HasCode(err, CodeResActionNotBindable) {
		t.Errorf("the zero Action: %v", err)
	}
}

// TestAuthorizeWorkedExample checks the worked example of envelope-04 §6.4: its actions are
// not tool calls, and each option is authority for its own action and for no other (§7.3).
// The actions are read both as printed in §6.4 (testdata/spec-6.4) and as their canonical
// bytes (testdata/conformance).
func TestAuthorizeWorkedExample(t *testing.T) {
	env, err := Parse(exampleRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	action := func(path string) Action {
		t.Helper()
		a, err := ParseAction(readFile(t, path))
		if err != nil {
			t.Fatalf("ParseAction(%s): %v", path, err)
		}
		return a
	}
	printedA, printedB := action("testdata/spec-6.4/action_a.json"), action("testdata/spec-6.4/action_b.json")
	canonA, canonB := action("testdata/conformance/action_a.canonical.json"), action("testdata/conformance/action_b.canonical.json")
	if printedA.Digest() != exampleActionA || canonA.Digest() != exampleActionA || printedB.Digest() != exampleActionB || canonB.Digest() != exampleActionB {
		t.Fatalf("action digests %s %s %s %s", printedA.Digest(), canonA.Digest(), printedB.Digest(), canonB.Digest())
	}
	// A tool call wrapping action_a's object is another action with another digest.
	wrapped, err := ToolCall("booking.share", json.RawMessage(readFile(t, "testdata/spec-6.4/action_a.json")))
	if err != nil {
		t.Fatal(err)
	}
	res := func(i int) *Resolution {
		return &Resolution{EnvelopeDigest: exampleDigest, Kind: KindOption, OptionIdx: i}
	}
	tests := []struct {
		name string
		res  *Resolution
		act  Action
		code Code // "" = authority granted
	}{
		{"option 0, action_a as printed", res(0), printedA, ""},
		{"option 0, action_a canonical", res(0), canonA, ""},
		{"option 1, action_b as printed", res(1), printedB, ""},
		{"option 1, action_b canonical", res(1), canonB, ""},
		{"option 0, action_b", res(0), printedB, CodeResActionMismatch},
		{"option 1, action_a", res(1), canonA, CodeResActionMismatch},
		{"option 0, action_a as a tool call", res(0), wrapped, CodeResActionMismatch},
		{"declined, action_a", &Resolution{EnvelopeDigest: exampleDigest, Kind: KindDeclined}, printedA, CodeResNotAuthority},
		{"option 2", res(2), printedA, CodeResOptionIdx},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Authorize(env, tt.res, tt.act)
			if tt.code == "" {
				want, _ := env.Option(tt.res.OptionIdx)
				if err != nil || g != (Grant{EnvelopeDigest: exampleDigest, OptionIdx: tt.res.OptionIdx, ActionDigest: want.ActionDigest}) {
					t.Fatalf("Authorize = %+v, %v", g, err)
				}
				return
			}
			if ps := ProblemsOf(err); len(ps) != 1 || ps[0].Code != tt.code || g != (Grant{}) {
				t.Fatalf("Authorize = %+v, %v; want only %s", g, err, tt.code)
			}
		})
	}
}

func TestParseAction(t *testing.T) {
	// A tool call is one JSON action among others: its digest as a whole object is
	// EP-TOOL-CALL-BINDING-v1 simple-payment, the same as ToolCall's.
	a, err := ParseAction([]byte(`{"args":{"memo":"invoice 7781","amount_usd":4000.0,"beneficiary":"vendor@example.com"},"tool":"payment.release"}`))
	if err != nil {
		t.Fatal(err)
	}
	const payment = "sha256:d0dfcc51d63932b0ca708ba87af799a97cc963d404d63e459c5fab9498845174"
	if string(a.Canonical()) != `{"args":{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"},"tool":"payment.release"}` || a.Digest() != payment {
		t.Fatalf("%s %s", a.Canonical(), a.Digest())
	}
	tc, err := ToolCall("payment.release", json.RawMessage(`{"beneficiary":"vendor@example.com","memo":"invoice 7781","amount_usd":4000}`))
	if err != nil || tc.Digest() != payment || string(tc.Canonical()) != string(a.Canonical()) {
		t.Fatalf("ToolCall: %s %s %v", tc.Canonical(), tc.Digest(), err)
	}
	// Any JSON value is an action (envelope-04 §5.6); these are accepted.
	for _, raw := range []string{`{"disclose":["travel_dates"],"recipient":"booking.example"}`, `{"tool":"t","arguments":{}}`, `{}`, `[1,2]`, `"t"`, `0`, `null`} {
		if _, err := ParseAction([]byte(raw)); err != nil {
			t.Errorf("ParseAction(%s): %v", raw, err)
		}
	}
	tests := []struct {
		name  string
		raw   string
		wants []want
	}{
		{"float", `{"tool":"t","args":{"x":1.5}}`, []want{{"JCS_NUMBER_OUT_OF_PROFILE", "$"}}},
		{"duplicate member", `{"tool":"t","tool":"u","args":{}}`, []want{{"JCS_DUPLICATE_MEMBER", "$"}}},
		{"duplicate after escape decoding", `{"recipient":"a","recipi\u0065nt":"b"}`, []want{{"JCS_DUPLICATE_MEMBER", "$"}}},
		{"unpaired surrogate", `{"disclose":["\ud800"]}`, []want{{"JCS_UNPAIRED_SURROGATE", "$"}}},
		{"nesting 65", strings.Repeat("[", 65) + strings.Repeat("]", 65), []want{{"JCS_DEPTH_EXCEEDED", "$"}}},
		{"not JSON", `{"disclose":`, []want{{"JCS_SYNTAX", "$"}}},
		{"empty", ``, []want{{"JCS_SYNTAX", "$"}}},
		{"too large", `{"a":"` + strings.Repeat("x", MaxActionBytes) + `"}`, []want{{CodeActTooLarge, "$"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseAction([]byte(tt.raw))
			if a.Digest() != "" {
				t.Fatalf("accepted with digest %s", a.Digest())
			}
			problemsEqual(t, err, tt.wants)
		})
	}
}

func TestToolCall(t *testing.T) {
	tests := []struct {
		name  string
		tool  string
		args  string
		wants []want
	}{
		{"float", "t", `{"x":1.5}`, []want{{"JCS_NUMBER_OUT_OF_PROFILE", "$.args"}}},
		{"duplicate", "t", `{"a":1,"\u0061":2}`, []want{{"JCS_DUPLICATE_MEMBER", "$.args"}}},
		{"not JSON", "t", `{"a":`, []want{{"JCS_SYNTAX", "$.args"}}},
		{"args array", "t", `[]`, []want{{CodeActWrongType, "$.args"}}},
		{"args missing", "t", ``, []want{{CodeActWrongType, "$.args"}}},
		{"tool empty", "", `{}`, []want{{CodeActToolName, "$.tool"}}},
		{"tool with a space", "payment release", `{}`, []want{{CodeActToolName, "$.tool"}}},
		{"tool with a newline", "pay\nment", `{}`, []want{{CodeActToolName, "$.tool"}}},
		{"tool too long", strings.Repeat("t", MaxToolNameBytes+1), `{}`, []want{{CodeActToolName, "$.tool"}}},
		{"too large", "t", `{"a":"` + strings.Repeat("x", MaxActionBytes) + `"}`, []want{{CodeActTooLarge, "$.args"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ToolCall(tt.tool, json.RawMessage(tt.args))
			if a.Digest() != "" {
				t.Fatalf("accepted with digest %s", a.Digest())
			}
			problemsEqual(t, err, tt.wants)
		})
	}
}
