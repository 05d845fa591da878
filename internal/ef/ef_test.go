package ef

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestOnlyEF060IsRetryable(t *testing.T) {
	// tool-use-binding §23: retryable=true only for EF-060 timeout.
	for _, i := range All() {
		t.Run(string(i.Code), func(t *testing.T) {
			if got, want := i.Code.Retryable(), i.Code == EF060; got != want {
				t.Fatalf("Retryable() = %v, want %v", got, want)
			}
			if i.Description == "" {
				t.Fatal("empty description")
			}
			if !i.Code.Known() {
				t.Fatal("registered code not Known()")
			}
		})
	}
}

func TestLookupSpellings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want EFCode
		ok   bool
	}{
		{"EF-060", EF060, true},
		{"EF_060", EF060, true},
		{"EF_002", EF002, true},
		{"EF_SCOPE_MISMATCH", EFScopeMismatch, true},
		{"EF_999", "", false},
		{"", "", false},
		{"ef_002", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			i, ok := Lookup(tc.in)
			if ok != tc.ok || i.Code != tc.want {
				t.Fatalf("Lookup(%q) = %q,%v want %q,%v", tc.in, i.Code, ok, tc.want, tc.ok)
			}
		})
	}
	if EFCode("EF_999").Retryable() {
		t.Fatal("unknown code must not be retryable")
	}
}

func TestUniqueCodes(t *testing.T) {
	seen := map[EFCode]bool{}
	for _, i := range All() {
		if seen[i.Code] {
			t.Fatalf("duplicate %s", i.Code)
		}
		seen[i.Code] = true
	}
}

// TestEveryCodeInTheSpecIsNamed reads the binding's text and checks each EF code in it is a
// non-extension code here, so a newer spec revision that adds one fails this test.
func TestEveryCodeInTheSpecIsNamed(t *testing.T) {
	var found int
	for _, p := range []string{
		"../../../shared/specs/tool-use-binding-sectioned.txt",
		"../../../shared/specs/tool-use-binding-latest.txt",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("spec text not found at %s: %v", p, err)
		}
		for _, m := range regexp.MustCompile(`EF[-_][A-Z0-9_]+`).FindAllString(string(b), -1) {
			m = strings.TrimRight(m, "_")
			i, ok := Lookup(m)
			if !ok || i.Extension {
				t.Errorf("%s: spec code %s not registered as a spec code", p, m)
			}
			found++
		}
	}
	if found == 0 {
		t.Fatal("no EF codes found in the spec text")
	}
}
