package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/jcs"
)

type bindingVector struct {
	ID           string          `json:"id"`
	Tool         string          `json:"tool"`
	Args         json.RawMessage `json:"args"`
	ExpectedCAID string          `json:"expected_caid"`
}

func loadBindingVectors(t *testing.T) []bindingVector {
	t.Helper()
	raw, err := os.ReadFile("testdata/tool-call-binding.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Version string          `json:"@version"`
		Vectors []bindingVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &suite); err != nil {
		t.Fatal(err)
	}
	if suite.Version != "EP-TOOL-CALL-BINDING-v1" || len(suite.Vectors) != 6 {
		t.Fatalf("unexpected suite %q with %d vectors", suite.Version, len(suite.Vectors))
	}
	return suite.Vectors
}

// TestToolCallBindingVectors: every EP-TOOL-CALL-BINDING-v1 vector, under
// full RFC 8785 as the suite pins, gives its expected digest; Canonical
// agrees with canonicalizing Material; and under Strict every vector but
// numeric-forms (rate 1.5) gives the same bytes, while numeric-forms is
// refused as out of profile.
func TestToolCallBindingVectors(t *testing.T) {
	for _, v := range loadBindingVectors(t) {
		t.Run(v.ID, func(t *testing.T) {
			prefix := v.Tool + ":"
			if !strings.HasPrefix(v.ExpectedCAID, prefix) {
				t.Fatalf("expected_caid %q does not start with %q", v.ExpectedCAID, prefix)
			}
			want := strings.TrimPrefix(v.ExpectedCAID, prefix)

			digest, err := Digest(v.Tool, v.Args, jcs.Full)
			if err != nil {
				t.Fatalf("Full: %v", err)
			}
			if digest != want {
				t.Fatalf("Full digest %s, want %s", digest, want)
			}
			// DigestOfCanonical over the canonicalizer's output of the args alone is the same
			// digest (the hot path canonicalizes once).
			ca, err := jcs.CanonicalizeNested(v.Args, jcs.Full, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := DigestOfCanonical(v.Tool, ca); err != nil || d != want {
				t.Fatalf("DigestOfCanonical = %s, %v; want %s", d, err, want)
			}
			canon, err := Canonical(v.Tool, v.Args, jcs.Full)
			if err != nil {
				t.Fatal(err)
			}
			viaMaterial, err := jcs.Canonicalize(Material(v.Tool, v.Args), jcs.Full)
			if err != nil || !bytes.Equal(canon, viaMaterial) {
				t.Fatalf("Canonical = %s; jcs.Canonicalize(Material) = %s, %v", canon, viaMaterial, err)
			}

			strict, err := Canonical(v.Tool, v.Args, jcs.Strict)
			if v.ID != "numeric-forms" {
				if err != nil || !bytes.Equal(strict, canon) {
					t.Fatalf("Strict = %s, %v; want %s", strict, err, canon)
				}
				return
			}
			if strict != nil {
				t.Fatalf("Strict returned %s for an out-of-profile action", strict)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeOutOfProfile || e.Tool != v.Tool {
				t.Fatalf("Strict: got %v, want %s", err, CodeOutOfProfile)
			}
			var je *jcs.Error
			if !errors.As(err, &je) || je.Code != jcs.CodeNumberOutOfProfile {
				t.Fatalf("Strict: %v does not wrap %s", err, jcs.CodeNumberOutOfProfile)
			}
			if at := bytes.Index(v.Args, []byte("1.5")); je.Offset != at {
				t.Fatalf("offset %d, want %d (the 1.5 in args %s)", je.Offset, at, v.Args)
			}
			msg := err.Error()
			for _, must := range []string{"ACTION_OUT_OF_PROFILE", `"ledger.post"`, "cannot be put in front of a human", "§5.6", "§6.3", "as strings"} {
				if !strings.Contains(msg, must) {
					t.Errorf("message lacks %q: %s", must, msg)
				}
			}
			if d, err := Digest(v.Tool, v.Args, jcs.Strict); d != "" || err == nil {
				t.Fatalf("Strict Digest = %q, %v", d, err)
			}
		})
	}
}

func TestRejects(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	cases := []struct {
		name       string
		tool, args string
		strict     Code // "" = accepted
		full       Code
		jcsCode    jcs.Code // wrapped code under Strict, if any
	}{
		{name: "empty tool", tool: "", args: `{}`, strict: CodeEmptyTool, full: CodeEmptyTool},
		{name: "tool invalid UTF-8", tool: "pay\xff", args: `{}`, strict: CodeInvalidTool, full: CodeInvalidTool, jcsCode: jcs.CodeInvalidUTF8},
		{name: "tool with surrogate", tool: "pay\xed\xa0\x80", args: `{}`, strict: CodeInvalidTool, full: CodeInvalidTool, jcsCode: jcs.CodeUnpairedSurrogate},
		{name: "nil args", tool: "t", args: "", strict: CodeArgsNotObject, full: CodeArgsNotObject},
		{name: "whitespace args", tool: "t", args: " \n", strict: CodeArgsNotObject, full: CodeArgsNotObject},
		{name: "array args", tool: "t", args: `[1]`, strict: CodeArgsNotObject, full: CodeArgsNotObject},
		{name: "null args", tool: "t", args: `null`, strict: CodeArgsNotObject, full: CodeArgsNotObject},
		{name: "string args", tool: "t", args: `"x"`, strict: CodeArgsNotObject, full: CodeArgsNotObject},
		{name: "smuggled member", tool: "t", args: `1,"zzz":2`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeSyntax},
		{name: "smuggled tool", tool: "t", args: `{},"tool":"evil"`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeSyntax},
		{name: "two objects", tool: "t", args: `{"a":1}{"b":2}`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeSyntax},
		{name: "duplicate", tool: "t", args: `{"a":1,"\u0061":2}`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeDuplicateMember},
		{name: "lone surrogate", tool: "t", args: `{"a":"\udc00"}`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeUnpairedSurrogate},
		{name: "decimal", tool: "t", args: `{"amount":12.50}`, strict: CodeOutOfProfile, jcsCode: jcs.CodeNumberOutOfProfile},
		{name: "2^53", tool: "t", args: `{"n":9007199254740992}`, strict: CodeOutOfProfile, jcsCode: jcs.CodeNumberOutOfProfile},
		{name: "not finite", tool: "t", args: `{"n":1e400}`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeNumberNotFinite},
		{name: "decimal then duplicate", tool: "t", args: `{"n":1.5,"n":2}`, strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeDuplicateMember},
		{name: "63 deep in args", tool: "t", args: nest(63)},
		{name: "64 deep in args", tool: "t", args: nest(64), strict: CodeOutOfProfile, jcsCode: jcs.CodeDepthExceeded},
		{name: "999 deep in args", tool: "t", args: nest(jcs.MaxDepthFull - 1), strict: CodeOutOfProfile, jcsCode: jcs.CodeDepthExceeded},
		{name: "1000 deep in args", tool: "t", args: nest(jcs.MaxDepthFull), strict: CodeMalformedArgs, full: CodeMalformedArgs, jcsCode: jcs.CodeDepthExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []struct {
				mode jcs.Mode
				want Code
			}{{jcs.Strict, tc.strict}, {jcs.Full, tc.full}} {
				out, err := Canonical(tc.tool, json.RawMessage(tc.args), m.mode)
				// Whatever Canonical decides, canonicalizing the assembled
				// material must agree whenever args is one JSON value.
				viaMaterial, mErr := jcs.Canonicalize(Material(tc.tool, json.RawMessage(tc.args)), m.mode)
				if m.want == "" {
					if err != nil {
						t.Fatalf("%v: %v", m.mode, err)
					}
					if mErr != nil || !bytes.Equal(out, viaMaterial) {
						t.Fatalf("%v: Canonical %s, via Material %s, %v", m.mode, out, viaMaterial, mErr)
					}
					continue
				}
				if out != nil {
					t.Fatalf("%v: returned %s with error %v", m.mode, out, err)
				}
				if code, _ := CodeOf(err); code != m.want {
					t.Fatalf("%v: got %v, want %s", m.mode, err, m.want)
				}
				if tc.jcsCode != "" && m.mode == jcs.Strict {
					if code, _ := jcs.CodeOf(err); code != tc.jcsCode {
						t.Fatalf("%v: %v does not wrap %s", m.mode, err, tc.jcsCode)
					}
				}
				if (m.want == CodeMalformedArgs || m.want == CodeOutOfProfile) && json.Valid([]byte(tc.args)) && mErr == nil {
					t.Fatalf("%v: Canonical refused %s but the assembled material canonicalizes", m.mode, tc.args)
				}
			}
		})
	}
}

// TestMaterial pins the non-canonical material shape and shows why binding
// must go through Canonical: Material copies args verbatim.
func TestMaterial(t *testing.T) {
	got := Material("payment.release", json.RawMessage(`{"b":1, "a":2}`))
	if want := `{"tool":"payment.release","args":{"b":1, "a":2}}`; string(got) != want {
		t.Fatalf("Material = %s, want %s", got, want)
	}
	if got := Material("a\"b\\c\n", json.RawMessage(`{}`)); string(got) != `{"tool":"a\"b\\c\u000a","args":{}}` {
		t.Fatalf("Material escaping = %s", got)
	}
	// A verbatim args that is not one value smuggles a member into the
	// material; Canonical refuses it (TestRejects "smuggled member").
	smuggled := Material("t", json.RawMessage(`1,"zzz":2`))
	if _, err := jcs.Canonicalize(smuggled, jcs.Strict); err != nil {
		t.Fatalf("expected the smuggled material to be valid JSON: %v", err)
	}
}

func TestCanonicalShape(t *testing.T) {
	out, err := Canonical("a\"\u00e9\U0001F600", json.RawMessage(" {\"z\":[1.0,-0],\"a\":\"\\u0041\"} "), jcs.Strict)
	if want := "{\"args\":{\"a\":\"A\",\"z\":[1,0]},\"tool\":\"a\\\"\u00e9\U0001F600\"}"; err != nil || string(out) != want {
		t.Fatalf("Canonical = %s, %v; want %s", out, err, want)
	}
	d, err := Digest("record.delete", json.RawMessage(`{}`), jcs.Strict)
	if err != nil || !jcs.IsDigest(d) {
		t.Fatalf("Digest = %q, %v", d, err)
	}
	if d2 := jcs.Digest([]byte(`{"args":{},"tool":"record.delete"}`)); d != d2 {
		t.Fatalf("Digest %s, want %s", d, d2)
	}
}

func TestErrorMessages(t *testing.T) {
	_, err := Canonical("", json.RawMessage(`{}`), jcs.Strict)
	if got := err.Error(); got != "ACTION_EMPTY_TOOL: tool name is empty" {
		t.Fatalf("got %q", got)
	}
	_, err = Canonical("t", json.RawMessage(`{"secret":"12345678","n":0.5}`), jcs.Strict)
	if msg := err.Error(); strings.Contains(msg, "secret") || strings.Contains(msg, "1234") || strings.Contains(msg, "0.5") {
		t.Fatalf("message quotes the arguments: %s", msg)
	}
	if code, ok := CodeOf(errors.Join(errors.New("x"), err)); !ok || code != CodeOutOfProfile {
		t.Fatalf("CodeOf = %s, %v", code, ok)
	}
	if _, ok := CodeOf(errors.New("x")); ok {
		t.Fatal("CodeOf found a code in a plain error")
	}
}

func TestDigestOfCanonicalRefuses(t *testing.T) {
	for _, tc := range []struct {
		tool, args string
		code       Code
	}{
		{"", `{}`, CodeEmptyTool},
		{"t", ``, CodeArgsNotObject},
		{"t", `[]`, CodeArgsNotObject},
		{"t", `"x"`, CodeArgsNotObject},
		{"bad\xff", `{}`, CodeInvalidTool},
	} {
		tool := tc.tool
		if d, err := DigestOfCanonical(tool, []byte(tc.args)); d != "" || err == nil {
			t.Fatalf("DigestOfCanonical(%q, %s) = %q, %v", tool, tc.args, d, err)
		} else if code, _ := CodeOf(err); code != tc.code {
			t.Fatalf("DigestOfCanonical(%q, %s): code %s, want %s", tool, tc.args, code, tc.code)
		}
	}
	// A large action (beyond the stack buffer) digests like Digest.
	big := `{"a":"` + strings.Repeat("x", 5000) + `"}`
	d1, err1 := DigestOfCanonical("t", []byte(big))
	d2, err2 := Digest("t", []byte(big), jcs.Strict)
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("large: %s %v / %s %v", d1, err1, d2, err2)
	}
}
