package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	gowebpkijcs "github.com/gowebpki/jcs"
)

// referenceJCS canonicalizes a flat object with an independent RFC 8785 implementation.
func referenceJCS(t testing.TB, ms []member) []byte {
	t.Helper()
	obj := map[string]any{}
	for _, m := range ms {
		if m.isNum {
			obj[m.key] = m.num
		} else {
			obj[m.key] = m.str
		}
	}
	raw, err := json.Marshal(obj) // escapes <, >, &, U+2028 differently from JCS: Transform must undo it
	if err != nil {
		t.Fatal(err)
	}
	out, err := gowebpkijcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCanonicalObjectMatchesRFC8785(t *testing.T) {
	cases := []struct {
		name string
		ms   []member
	}{
		{"empty", nil},
		{"sorted output", []member{str("tool", "t"), str("act_id", "a"), num("issued_at_ms", 1785153600000)}},
		{"underscore before letters", []member{str("act_id", "1"), str("action_digest", "2"), str("act", "3")}},
		{"html characters stay literal", []member{str("destination", "https://x.example/a?b=1&c=<d>")}},
		{"quotes and backslashes", []member{str("k", `say "hi" \ bye`)}},
		{"short escapes", []member{str("k", "\b\f\n\r\t")}},
		{"other controls as \\u00xx", []member{str("k", "\x00\x01\x1f\x7f")}},
		{"line and paragraph separators literal", []member{str("k", "a\u2028b\u2029c")}},
		{"non-ASCII literal", []member{str("k", "Grüße, 世界, 😀")}},
		{"negative and zero integers", []member{num("a", -1), num("b", 0), num("c", maxSafeInteger), num("d", -maxSafeInteger)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canonicalObject(tc.ms)
			if err != nil {
				t.Fatal(err)
			}
			if want := referenceJCS(t, tc.ms); !bytes.Equal(got, want) {
				t.Fatalf("canonicalObject = %s\nRFC 8785 reference = %s", got, want)
			}
		})
	}
}

func TestCanonicalObjectRejects(t *testing.T) {
	cases := []struct {
		name string
		ms   []member
	}{
		{"invalid UTF-8", []member{str("k", "a\xffb")}},
		{"duplicate member", []member{str("k", "a"), str("k", "b")}},
		{"integer above 2^53-1", []member{num("k", maxSafeInteger+1)}},
		{"integer below -(2^53-1)", []member{num("k", -maxSafeInteger-1)}},
		{"non-ASCII key", []member{str("ké", "a")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := canonicalObject(tc.ms); !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v, want ErrInvalid", err)
			}
		})
	}
}

// FuzzCanonicalObject checks canonicalObject against the reference implementation for arbitrary
// string values.
func FuzzCanonicalObject(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f", "<&>", "\u2028", "é😀", "a\xffb"} {
		f.Add(s, s+"x", int64(42))
	}
	f.Fuzz(func(t *testing.T, a, b string, n int64) {
		ms := []member{str("b", b), str("a", a), num("n", n)}
		got, err := canonicalObject(ms)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if want := referenceJCS(t, ms); !bytes.Equal(got, want) {
			t.Fatalf("canonicalObject = %q\nRFC 8785 reference = %q", got, want)
		}
	})
}
