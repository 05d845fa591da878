package logfield

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	for _, tc := range []struct {
		name, in string
		whole    bool
	}{
		{"short", "send_payment", true},
		{"at the limit", strings.Repeat("x", MaxBytes), true},
		{"one over", strings.Repeat("x", MaxBytes+1), false},
		{"1 MiB", long, false},
		{"newline", "a\nlevel=ERROR msg=forged", false},
		{"bidi override", "pay\u202eevil", false},
		{"invalid UTF-8", "a\xffb", false},
		{"non-ASCII", "überweisung", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Bound(tc.in)
			if (got == tc.in) != tc.whole {
				t.Fatalf("Bound(%.40q) = %q, whole=%v", tc.in, got, got == tc.in)
			}
			if !tc.whole {
				if len(got) > prefixBytes+64 || !strings.Contains(got, " bytes sha256:") || !utf8.ValidString(got) {
					t.Fatalf("Bound = %q (%d bytes)", got, len(got))
				}
				if strings.ContainsAny(got, "\n\r\u202e") {
					t.Fatalf("Bound kept an unprintable character: %q", got)
				}
			}
		})
	}
	if Bound(long) == Bound(long+"b") {
		t.Error("two different long values are not told apart")
	}
}

func FuzzBound(f *testing.F) {
	for _, s := range []string{"", "tool", strings.Repeat("é", 100), "\x00\n\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Bound(s)
		if len(got) > MaxBytes+64 || !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r") {
			t.Fatalf("Bound(%q) = %q", s, got)
		}
	})
}
