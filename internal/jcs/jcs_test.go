package jcs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	gowebpki "github.com/gowebpki/jcs"
)

// TestRejects is the table of bad input: each case gives the code and the
// byte offset Canonicalize must report, in both modes unless fullOK says
// Full accepts it (with the given output).
func TestRejects(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	cases := []struct {
		name   string
		in     string
		code   Code
		offset int
		full   string // non-empty: Full accepts and gives this
		fullCd Code   // non-empty: Full rejects with this code instead
	}{
		// Syntax (RFC 8259).
		{name: "empty", in: "", code: CodeSyntax, offset: 0},
		{name: "only whitespace", in: " \n\t\r", code: CodeSyntax, offset: 4},
		{name: "leading BOM", in: "\xEF\xBB\xBF{}", code: CodeSyntax, offset: 0},
		{name: "trailing garbage", in: `{"a":1}x`, code: CodeSyntax, offset: 7},
		{name: "two values", in: `1 2`, code: CodeSyntax, offset: 2},
		{name: "trailing comma in object", in: `{"a":1,}`, code: CodeSyntax, offset: 7},
		{name: "trailing comma in array", in: `[1,]`, code: CodeSyntax, offset: 3},
		{name: "missing colon", in: `{"a" 1}`, code: CodeSyntax, offset: 5},
		{name: "unquoted name", in: `{a:1}`, code: CodeSyntax, offset: 1},
		{name: "single quotes", in: `{'a':1}`, code: CodeSyntax, offset: 1},
		{name: "unclosed object", in: `{"a":1`, code: CodeSyntax, offset: 6},
		{name: "unclosed array", in: `[1,2`, code: CodeSyntax, offset: 4},
		{name: "unclosed string", in: `"abc`, code: CodeSyntax, offset: 4},
		{name: "raw newline in string", in: "\"a\nb\"", code: CodeSyntax, offset: 2},
		{name: "raw NUL in string", in: "\"a\x00\"", code: CodeSyntax, offset: 2},
		{name: "bad escape", in: `"\x41"`, code: CodeSyntax, offset: 1},
		{name: "short unicode escape", in: `"\u12"`, code: CodeSyntax, offset: 1},
		{name: "non-hex unicode escape", in: `"\u12g4"`, code: CodeSyntax, offset: 1},
		{name: "escape at end", in: `"\`, code: CodeSyntax, offset: 2},
		{name: "bad literal", in: `tru`, code: CodeSyntax, offset: 0},
		{name: "capital literal", in: `True`, code: CodeSyntax, offset: 0},
		{name: "NaN", in: `NaN`, code: CodeSyntax, offset: 0},
		{name: "Infinity", in: `-Infinity`, code: CodeSyntax, offset: 1},
		{name: "leading zero", in: `012`, code: CodeSyntax, offset: 0},
		{name: "negative leading zero", in: `-012`, code: CodeSyntax, offset: 0},
		{name: "plus sign", in: `+1`, code: CodeSyntax, offset: 0},
		{name: "bare minus", in: `-`, code: CodeSyntax, offset: 1},
		{name: "dot without digits", in: `1.`, code: CodeSyntax, offset: 2},
		{name: "leading dot", in: `.5`, code: CodeSyntax, offset: 0},
		{name: "exponent without digits", in: `1e+`, code: CodeSyntax, offset: 3},
		{name: "hex number", in: `0x10`, code: CodeSyntax, offset: 1},
		{name: "comment", in: `{"a":1 /* c */}`, code: CodeSyntax, offset: 7},
		{name: "vertical tab whitespace", in: "\v1", code: CodeSyntax, offset: 0},
		{name: "non-breaking space whitespace", in: "\u00a01", code: CodeSyntax, offset: 0},

		// UTF-8 (RFC 8259 §8.1).
		{name: "invalid byte in string", in: "\"a\xffb\"", code: CodeInvalidUTF8, offset: 2},
		{name: "truncated sequence in string", in: "\"\xc3\"", code: CodeInvalidUTF8, offset: 1},
		{name: "overlong slash", in: "\"\xc0\xaf\"", code: CodeInvalidUTF8, offset: 1},
		{name: "above U+10FFFF", in: "\"\xf4\x90\x80\x80\"", code: CodeInvalidUTF8, offset: 1},
		{name: "invalid byte outside string", in: "[1,\xff]", code: CodeInvalidUTF8, offset: 3},
		{name: "invalid byte in member name", in: "{\"\xfe\":1}", code: CodeInvalidUTF8, offset: 2},
		{name: "invalid byte after escape", in: "\"\\n\xff\"", code: CodeInvalidUTF8, offset: 3},

		// Unpaired surrogates (envelope-04 §6.3).
		{name: "lone high escape", in: `"\ud800"`, code: CodeUnpairedSurrogate, offset: 1},
		{name: "lone low escape", in: `"x\uDC00"`, code: CodeUnpairedSurrogate, offset: 2},
		{name: "high then text", in: `"\ud83dA"`, code: CodeUnpairedSurrogate, offset: 1},
		{name: "high then high", in: `"\ud83d\ud83d"`, code: CodeUnpairedSurrogate, offset: 1},
		{name: "high at end of string", in: `"\ud83d"`, code: CodeUnpairedSurrogate, offset: 1},
		{name: "high then short escape", in: `"\ud83d\u12"`, code: CodeSyntax, offset: 7},
		{name: "raw UTF-8 encoded high surrogate", in: "\"\xed\xa0\x80\"", code: CodeUnpairedSurrogate, offset: 1},
		{name: "raw UTF-8 encoded low surrogate", in: "\"ab\xed\xbf\xbf\"", code: CodeUnpairedSurrogate, offset: 3},
		{name: "raw CESU-8 pair", in: "\"\xed\xa0\xbd\xed\xb8\x80\"", code: CodeUnpairedSurrogate, offset: 1},
		{name: "raw surrogate in name", in: "{\"\xed\xa0\x80\":1}", code: CodeUnpairedSurrogate, offset: 2},

		// Duplicate member names (envelope-04 §6.3), reported at the
		// second occurrence.
		{name: "duplicate", in: `{"a":1,"a":2}`, code: CodeDuplicateMember, offset: 7},
		{name: "duplicate via escape", in: `{"a":1,"\u0061":2}`, code: CodeDuplicateMember, offset: 7},
		{name: "duplicate via solidus escape", in: `{"/":1,"\/":2}`, code: CodeDuplicateMember, offset: 7},
		{name: "duplicate among many", in: `{"c":1,"b":2,"a":3,"b":4}`, code: CodeDuplicateMember, offset: 19},
		{name: "earliest duplicate reported", in: `{"z":1,"y":1,"z":2,"y":2}`, code: CodeDuplicateMember, offset: 13},
		{name: "duplicate in array element", in: `[{"k":1,"k":1}]`, code: CodeDuplicateMember, offset: 8},
		{name: "duplicate empty name", in: `{"":1,"":2}`, code: CodeDuplicateMember, offset: 6},

		// Numbers (envelope-04 §6.3 in Strict; RFC 8785 §3.2.2.3 in Full).
		{name: "fraction", in: `[1.5]`, code: CodeNumberOutOfProfile, offset: 1, full: `[1.5]`},
		{name: "2^53", in: `9007199254740992`, code: CodeNumberOutOfProfile, offset: 0, full: `9007199254740992`},
		{name: "-2^53", in: `-9007199254740992`, code: CodeNumberOutOfProfile, offset: 0, full: `-9007199254740992`},
		{name: "1e21", in: `1e21`, code: CodeNumberOutOfProfile, offset: 0, full: `1e+21`},
		{name: "1e16", in: `1E16`, code: CodeNumberOutOfProfile, offset: 0, full: `10000000000000000`},
		{name: "tiny", in: `1e-7`, code: CodeNumberOutOfProfile, offset: 0, full: `1e-7`},
		{name: "rounds to 1 but is not 1", in: `1.0000000000000000001`, code: CodeNumberOutOfProfile, offset: 0, full: `1`},
		{name: "underflows to 0", in: `1e-400`, code: CodeNumberOutOfProfile, offset: 0, full: `0`},
		{name: "1e400", in: `{"n":1e400}`, code: CodeNumberOutOfProfile, offset: 5, fullCd: CodeNumberNotFinite},
		{name: "-1e400", in: `-1e400`, code: CodeNumberOutOfProfile, offset: 0, fullCd: CodeNumberNotFinite},
		{name: "huge exponent", in: `1e99999999999999999999999`, code: CodeNumberOutOfProfile, offset: 0, fullCd: CodeNumberNotFinite},
		{name: "huge negative exponent", in: `1e-99999999999999999999999`, code: CodeNumberOutOfProfile, offset: 0, full: `0`},

		// Depth (root counts as 1).
		{name: "65 arrays", in: deep(65, "[", "]"), code: CodeDepthExceeded, offset: 64, full: deep(65, "[", "]")},
		{name: "65 mixed", in: strings.Repeat(`[{"a":`, 32) + `[0]` + strings.Repeat(`}]`, 32), code: CodeDepthExceeded, offset: 32 * 6, full: strings.Repeat(`[{"a":`, 32) + `[0]` + strings.Repeat(`}]`, 32)},
		{name: "1001 arrays", in: deep(MaxDepthFull+1, "[", "]"), code: CodeDepthExceeded, offset: 64, fullCd: CodeDepthExceeded},
		{name: "a million open brackets", in: strings.Repeat("[", 1_000_000), code: CodeDepthExceeded, offset: 64, fullCd: CodeDepthExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []Mode{Strict, Full} {
				got, err := Canonicalize([]byte(tc.in), mode)
				wantCode, wantOffset := tc.code, tc.offset
				if mode == Full {
					if tc.full != "" {
						if err != nil || string(got) != tc.full {
							t.Fatalf("Full = %q, %v; want %q", got, err, tc.full)
						}
						continue
					}
					if tc.fullCd != "" {
						wantCode = tc.fullCd
						if wantCode == CodeDepthExceeded {
							wantOffset = MaxDepthFull
						}
					}
				}
				if err == nil {
					t.Fatalf("%v accepted %q as %q", mode, tc.in, got)
				}
				if got != nil {
					t.Errorf("%v returned output %q with an error", mode, got)
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%v: error %v is not a *jcs.Error", mode, err)
				}
				if e.Code != wantCode || e.Offset != wantOffset {
					t.Fatalf("%v: got %s at %d (%v), want %s at %d", mode, e.Code, e.Offset, err, wantCode, wantOffset)
				}
			}
		})
	}
}

// TestAccepts pins canonical output for inputs worth naming, in both modes.
func TestAccepts(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"scalar root string", ` "x" `, `"x"`},
		{"scalar root number", "\n-0\n", `0`},
		{"literals", `[true , false,null]`, `[true,false,null]`},
		{"empty containers", `{ "a" : [ ] , "b" : { } }`, `{"a":[],"b":{}}`},
		{"integer forms", `[1.0,1e0,10E-1,-0,-0.0,0e5,100e-2,1.5e1,9007199254740991,-9007199254740991,9.007199254740991e15]`,
			`[1,1,1,0,0,0,1,15,9007199254740991,-9007199254740991,9007199254740991]`},
		{"escapes decoded", `"\u0041\/\"\\\b\f\n\r\t\u001F\u007f\u00e9\ud83d\ude00"`, "\"A/\\\"\\\\\\b\\f\\n\\r\\t\\u001f\x7f\u00e9\U0001F600\""},
		{"raw non-ASCII kept", "\"\u2028\u00e9\U0001F600\"", "\"\u2028\u00e9\U0001F600\""},
		{"keys sorted", `{"b":1,"a":2,"c":{"z":1,"y":2}}`, `{"a":2,"b":1,"c":{"y":2,"z":1}}`},
		{"keys sorted by decoded value", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"escaped key re-escaped", `{"\u000a":1,"\"":2,"\\":3}`, `{"\n":1,"\"":2,"\\":3}`},
		{"utf16 order astral before U+FF61", "{\"\uff61\":1,\"\U0001F600\":2,\"\u00e9\":3}", "{\"\u00e9\":3,\"\U0001F600\":2,\"\uff61\":1}"},
		{"prefix sorts first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"64 deep", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 64) + strings.Repeat("]", 64)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []Mode{Strict, Full} {
				got, err := Canonicalize([]byte(tc.in), mode)
				if err != nil || string(got) != tc.want {
					t.Fatalf("%v: got %q, %v; want %q", mode, got, err, tc.want)
				}
			}
		})
	}
}

func TestCompareUTF16(t *testing.T) {
	ordered := []string{"", "\x00", "A", "a", "ab", "\u00e9", "\u07ff", "\u0800", "\ud7ff", "\U00010000", "\U0001F600", "\U0010FFFF", "\ue000", "\uff61", "\uffff"}
	for i := range ordered {
		for j := range ordered {
			got := compareUTF16([]byte(ordered[i]), []byte(ordered[j]))
			if (i < j) != (got < 0) || (i == j) != (got == 0) {
				t.Errorf("compareUTF16(%q, %q) = %d", ordered[i], ordered[j], got)
			}
		}
	}
}

func TestErrorFormatAndCodeOf(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a":1,"b":2,"\u0061":2}`), Strict)
	if got, want := err.Error(), `JCS_DUPLICATE_MEMBER: offset 13: duplicate member name (equal after escape decoding to the name at offset 1)`; got != want {
		t.Fatalf("Error() = %s, want %s", got, want)
	}
	wrapped := fmt.Errorf("envelope: %w", err)
	if code, ok := CodeOf(wrapped); !ok || code != CodeDuplicateMember {
		t.Fatalf("CodeOf(wrapped) = %s, %v", code, ok)
	}
	if code, ok := CodeOf(errors.New("other")); ok || code != "" {
		t.Fatalf("CodeOf(other) = %s, %v", code, ok)
	}
	if code, ok := CodeOf(nil); ok || code != "" {
		t.Fatalf("CodeOf(nil) = %s, %v", code, ok)
	}
}

// TestErrorDetailQuotesNoContent: error text may be logged, and logs carry
// digests, never raw tool arguments (docs/architecture.md "Privacy").
func TestErrorDetailQuotesNoContent(t *testing.T) {
	cases := map[string]Code{
		`{"secret-name":1,"secret-name":2}`:  CodeDuplicateMember,
		`{"secret":1234567.25}`:              CodeNumberOutOfProfile,
		`{"secret":12345678901234567890123}`: CodeNumberOutOfProfile,
		`{"secret":"ok","x":1234567e400}`:    CodeNumberOutOfProfile,
		`{"secret":"123456\ud800"}`:          CodeUnpairedSurrogate,
		"{\"secret\":\"123456\xff\"}":        CodeInvalidUTF8,
		`{"secret":"1234567`:                 CodeSyntax,
	}
	for in, code := range cases {
		_, err := Canonicalize([]byte(in), Strict)
		if got, _ := CodeOf(err); got != code {
			t.Fatalf("%q: got %v, want %s", in, err, code)
		}
		if msg := err.Error(); strings.Contains(msg, "secret") || strings.Contains(msg, "1234") {
			t.Errorf("error for %q quotes its content: %s", in, msg)
		}
	}
}

// TestCanonicalizeNested: a value embedded in enclosing containers is held
// to the depth bound of the document it will end up in.
func TestCanonicalizeNested(t *testing.T) {
	at := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if _, err := CanonicalizeNested(at(63), Strict, 1); err != nil {
		t.Fatalf("63 deep inside 1: %v", err)
	}
	_, err := CanonicalizeNested(at(64), Strict, 1)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDepthExceeded || e.Offset != 63 {
		t.Fatalf("64 deep inside 1: got %v, want %s at offset 63", err, CodeDepthExceeded)
	}
	if _, err := CanonicalizeNested(at(64), Full, 1); err != nil {
		t.Fatalf("Full, 64 deep inside 1: %v", err)
	}
	if out, err := CanonicalizeNested([]byte(" 1.0 "), Strict, MaxDepth); err != nil || string(out) != "1" {
		t.Fatalf("scalar at the bound: %q, %v", out, err)
	}
	if out, err := CanonicalizeNested(at(2), Strict, -5); err != nil || string(out) != "[[]]" {
		t.Fatalf("negative enclosing: %q, %v", out, err)
	}
}

func TestUnknownMode(t *testing.T) {
	out, err := Canonicalize([]byte(`1`), Mode(7))
	if err == nil || out != nil {
		t.Fatalf("unknown mode accepted: %q", out)
	}
}

func TestDigest(t *testing.T) {
	// SHA-256 of the empty string.
	const empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got := Digest(nil); got != empty {
		t.Fatalf("Digest(nil) = %s", got)
	}
	if !IsDigest(empty) {
		t.Fatal("IsDigest rejected a digest")
	}
	bad := []string{
		"",
		"sha256:",
		strings.ToUpper(empty),
		"sha256:E3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"SHA256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		empty[:len(empty)-1],
		empty + "0",
		empty[:len(empty)-1] + "g",
		" " + empty[1:],
		"sha256:ff91e3166e64...",
	}
	for _, s := range bad {
		if IsDigest(s) {
			t.Errorf("IsDigest(%q) = true", s)
		}
	}
	canon, digest, err := CanonicalDigest([]byte(`{"b":1,"a":2}`), Strict)
	if err != nil || string(canon) != `{"a":2,"b":1}` || digest != Digest(canon) || !IsDigest(digest) {
		t.Fatalf("CanonicalDigest = %s, %s, %v", canon, digest, err)
	}
	if c, d, err := CanonicalDigest([]byte(`{`), Strict); err == nil || c != nil || d != "" {
		t.Fatalf("CanonicalDigest of bad input = %q, %q, %v", c, d, err)
	}
}

func TestAppendString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"payment.release", `"payment.release"`},
		{"a\"b\\c\n\x01\x7f\u2028\U0001F600", "\"a\\\"b\\\\c\\n\\u0001\x7f\u2028\U0001F600\""},
	}
	for _, tc := range cases {
		got, err := AppendString([]byte("x"), tc.in)
		if err != nil || string(got) != "x"+tc.want {
			t.Errorf("AppendString(%q) = %q, %v; want %q", tc.in, got, err, "x"+tc.want)
		}
		// It must agree with canonicalizing the same string as JSON text.
		canon, err := Canonicalize(got[1:], Strict)
		if err != nil || !bytes.Equal(canon, got[1:]) {
			t.Errorf("Canonicalize(AppendString(%q)) = %q, %v", tc.in, canon, err)
		}
	}
	for in, code := range map[string]Code{"a\xff": CodeInvalidUTF8, "ab\xed\xa0\x80": CodeUnpairedSurrogate} {
		got, err := AppendString([]byte("x"), in)
		var e *Error
		if !errors.As(err, &e) || e.Code != code || string(got) != "x" {
			t.Errorf("AppendString(%q) = %q, %v; want %s", in, got, err, code)
		}
	}
}

func TestPlain8(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			w := uint64(0)
			for i := 7; i >= 0; i-- {
				w = w<<8 | uint64(b[i])
			}
			want := c < 0x80 && safeASCII[c]
			if got := plain8(w); got != want {
				t.Fatalf("plain8 with byte 0x%02x at %d = %v, want %v", c, pos, got, want)
			}
		}
	}
}

// TestNestedReordering checks objects to be reordered inside objects to be
// reordered, inside arrays and sorted objects, against gowebpki/jcs.
func TestNestedReordering(t *testing.T) {
	cases := []string{
		strings.Repeat(`{"b":0,"a":`, 40) + `"leaf"` + strings.Repeat(`}`, 40),
		strings.Repeat(`{"b":[{"d":1,"c":2},`, 20) + `0` + strings.Repeat(`],"a":{"z":{"y":1,"x":2}}}`, 20),
		`{"a":{"c":1,"b":{"f":[{"h":1,"g":2}],"e":3}},"z":[{"y":1,"x":{"w":1,"v":2}}]}`,
		`[{"b":1,"a":2},{"a":1,"b":{"d":1,"c":2}},{"b":{"d":[{"f":1,"e":2}],"c":2},"a":1}]`,
		`{"\u0062":{"b":1,"a":2},"a":[{"b":1,"a":2}],"":{"":{"b":1,"a":2}}}`,
	}
	for i, in := range cases {
		want, err := gowebpki.Transform([]byte(in))
		if err != nil {
			t.Fatalf("case %d: gowebpki: %v", i, err)
		}
		for _, mode := range []Mode{Strict, Full} {
			got, err := Canonicalize([]byte(in), mode)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("case %d %v:\n got %s, %v\nwant %s", i, mode, got, err, want)
			}
		}
	}
}

// TestRandomDocumentsAgainstGowebpki generates deterministic random
// documents of nested objects (members in random order, some names escaped
// or non-ASCII) and arrays, and compares both modes with gowebpki/jcs.
func TestRandomDocumentsAgainstGowebpki(t *testing.T) {
	state := uint64(1)
	rnd := func(n int) int {
		state = state*6364136223846793005 + 1442695040888963407
		return int((state >> 33) % uint64(n))
	}
	names := []string{"a", "b", "ab", "", "\\u0063", "é", "\U0001F600", "\uff61", "z", "A", "\\n"}
	var gen func(b *strings.Builder, depth int)
	gen = func(b *strings.Builder, depth int) {
		switch k := rnd(10); {
		case depth < 12 && k < 4:
			b.WriteString("{ ")
			perm := make([]int, len(names))
			for i := range perm {
				perm[i] = i
			}
			for i := len(perm) - 1; i > 0; i-- {
				j := rnd(i + 1)
				perm[i], perm[j] = perm[j], perm[i]
			}
			for i, n := range perm[:rnd(6)] {
				if i > 0 {
					b.WriteString(" , ")
				}
				b.WriteString(`"` + names[n] + `" :`)
				gen(b, depth+1)
			}
			b.WriteString("}")
		case depth < 12 && k < 6:
			b.WriteString("[")
			for i := range rnd(4) {
				if i > 0 {
					b.WriteString(",")
				}
				gen(b, depth+1)
			}
			b.WriteString("]")
		case k < 8:
			b.WriteString(strconv.Itoa(rnd(2000) - 1000))
		default:
			b.WriteString(`"s` + strconv.Itoa(rnd(100)) + `\t"`)
		}
	}
	for i := range 3000 {
		var b strings.Builder
		gen(&b, 0)
		in := []byte(b.String())
		want, err := gowebpki.Transform(in)
		if err != nil {
			t.Fatalf("doc %d: gowebpki: %v\n%s", i, err, in)
		}
		for _, mode := range []Mode{Strict, Full} {
			got, err := Canonicalize(in, mode)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("doc %d %v:\n  in %s\n got %s, %v\nwant %s", i, mode, in, got, err, want)
			}
		}
	}
}
