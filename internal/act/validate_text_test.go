package act

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// slowToken and slowOptText are the rune-by-rune rules of checkToken and checkOptText without
// their ASCII fast paths; the tests below check that the fast paths answer the same.
func slowToken(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func slowOptText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return false
		}
	}
	return true
}

func TestTextChecksMatchTheRuneRules(t *testing.T) {
	inputs := []string{"a", "tool_name", "https://bank.example/mcp", "with space", "tab\there", "nl\n",
		"del\x7f", "nul\x00", "\x1f", "~!", "é", "a\u00a0b", "a\u2028b", "a\u200bb", "\xff", "a\xed\xa0\x80", "日本語", "a\u0085"}
	for b := 0; b < 256; b++ {
		inputs = append(inputs, "x"+string(rune(b)), "x"+string([]byte{byte(b)}))
	}
	for _, s := range inputs {
		if got, want := checkToken("f", s, 1<<20) == nil, slowToken(s); got != want {
			t.Errorf("checkToken(%q) ok=%v, the rune rule says %v", s, got, want)
		}
		if got, want := checkOptText("f", s, 1<<20) == nil, slowOptText(s); got != want {
			t.Errorf("checkOptText(%q) ok=%v, the rune rule says %v", s, got, want)
		}
	}
}

func FuzzTextChecksMatchTheRuneRules(f *testing.F) {
	for _, s := range []string{"tool", "a b", "\x7f", "é", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := checkToken("f", s, 1<<20) == nil, s != "" && slowToken(s); got != want {
			t.Errorf("checkToken(%q) ok=%v, the rune rule says %v", s, got, want)
		}
		if got, want := checkOptText("f", s, 1<<20) == nil, slowOptText(s); got != want {
			t.Errorf("checkOptText(%q) ok=%v, the rune rule says %v", s, got, want)
		}
	})
}
