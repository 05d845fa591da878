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
		act    Action
		code   Code   // "" = authority granted
		detail string // must appear in the error
	}{
		{"option 0 with its own action", opt(0), Action{full.Tool, full.Args}, "", ""},
		{"option 1 with its own action", opt(1), Action{half.Tool, half.Args}, "", ""},
		{"same action, other key order and white space", opt(0),
			Action{"payment.release", json.RawMessage(` { "memo" : "invoice 7781", "beneficiary":"vendor@example.com", "amount_usd": 4000 } `)}, "", ""},
		{"same action, 4000.0 is the integer 4000 under the profile", opt(0),
			Action{"payment.release", json.RawMessage(`{"amount_usd":4000.0,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`)}, "", ""},
		// §12.6 option-map substitution: an authentic selection of option 1 does not
		// authorise option 0's (larger) action, and vice versa.
		{"option 1 selected, option 0's action presented", opt(1), Action{full.Tool, full.Args}, CodeResActionMismatch, opt0.ActionDigest},
		{"option 0 selected, amount changed", opt(0),
			Action{"payment.release", json.RawMessage(`{"amount_usd":40000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`)}, CodeResActionMismatch, ""},
		{"option 0 selected, other tool", opt(0), Action{"payment.refund", full.Args}, CodeResActionMismatch, ""},
		{"option 0 selected, extra argument", opt(0),
			Action{"payment.release", json.RawMessage(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781","cc":"x@example.com"}`)}, CodeResActionMismatch, ""},
		{"action outside the strict profile", opt(0), Action{"payment.release", json.RawMessage(`{"amount_usd":4000.5}`)}, CodeResActionNotBindable, "JCS_NUMBER_OUT_OF_PROFILE"},
		{"action with no tool", opt(0), Action{"", full.Args}, CodeResActionNotBindable, ""},
		// §7.3: only option is authority; the other three stay distinct and say which.
		{"answer", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindAnswer, Answer: "Pay in full but from the other account."}, Action{full.Tool, full.Args}, CodeResNotAuthority, `"answer"`},
		{"question", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindQuestion}, Action{full.Tool, full.Args}, CodeResNotAuthority, `"question"`},
		{"declined", &Resolution{EnvelopeDigest: env.Digest(), Kind: KindDeclined}, Action{full.Tool, full.Args}, CodeResNotAuthority, `"declined"`},
		// §12.5: a resolution names exactly one envelope.
		{"resolution of another envelope", &Resolution{EnvelopeDigest: exampleDigest, Kind: KindOption}, Action{full.Tool, full.Args}, CodeResEnvelopeMismatch, ""},
		{"option index beyond this envelope", opt(2), Action{full.Tool, full.Args}, CodeResOptionIdx, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Authorize(env, tt.res, tt.act)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Authorize: %v", err)
				}
				want, _ := env.Option(tt.res.OptionIdx)
				if g != (Grant{EnvelopeDigest: env.Digest(), OptionIdx: tt.res.OptionIdx, ActionDigest: want.ActionDigest}) {
					t.Fatalf("grant %+v", g)
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
	if _, err := AuthorizeCall(env, opt(0), full.Tool, full.Args); err != nil {
		t.Errorf("AuthorizeCall: %v", err)
	}
	if _, err := Authorize(nil, opt(0), Action{full.Tool, full.Args}); err == nil {
		t.Error("nil envelope authorised")
	}
}

func TestParseAction(t *testing.T) {
	a, err := ParseAction([]byte(`{"args":{"memo":"invoice 7781","amount_usd":4000.0,"beneficiary":"vendor@example.com"},"tool":"payment.release"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Tool != "payment.release" || string(a.Args) != `{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}` {
		t.Fatalf("%+v (args %s)", a, a.Args)
	}
	if d, _ := a.Digest(); d != "sha256:d0dfcc51d63932b0ca708ba87af799a97cc963d404d63e459c5fab9498845174" {
		t.Errorf("digest %s", d)
	}
	tests := []struct {
		name  string
		raw   string
		wants []want
	}{
		{"float", `{"tool":"t","args":{"x":1.5}}`, []want{{"JCS_NUMBER_OUT_OF_PROFILE", "$"}}},
		{"duplicate tool", `{"tool":"t","tool":"u","args":{}}`, []want{{"JCS_DUPLICATE_MEMBER", "$"}}},
		{"arguments spelled out", `{"tool":"t","arguments":{}}`, []want{{CodeActUnknownMember, "$.arguments"}, {CodeActMissingMember, "$.args"}}},
		{"args array", `{"tool":"t","args":[]}`, []want{{CodeActWrongType, "$.args"}}},
		{"tool number", `{"tool":1,"args":{}}`, []want{{CodeActWrongType, "$.tool"}}},
		{"tool empty", `{"tool":"","args":{}}`, []want{{CodeActToolName, "$.tool"}}},
		{"not an object", `"t"`, []want{{CodeActWrongType, "$"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseAction([]byte(tt.raw))
			problemsEqual(t, err, tt.wants)
		})
	}
}
