package metrics

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecisionClassLabel: meta.decision_class is written by the agent (envelope-04 §5.9) and
// becomes a label value; whatever it is, the label is one of a bounded set (never a panic):
// "none", "other", or at most MaxDecisionClassLen characters of [a-z0-9_.-], and a process
// never holds more than MaxDecisionClasses distinct values besides those two.
func FuzzDecisionClassLabel(f *testing.F) {
	for _, s := range []string{"", "consent", "Permission-Delta", "recompute.v2", "has space", "naïve", "\x00", "none", "other",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "\xff\xfe", "{{policy}}", `"}`} {
		f.Add(s)
	}
	l := newLabels()
	f.Fuzz(func(t *testing.T, s string) {
		got := l.decisionClass(s)
		if got == DecisionClassNone || got == DecisionClassOther {
			return
		}
		if len(got) == 0 || len(got) > MaxDecisionClassLen || !utf8.ValidString(got) {
			t.Fatalf("decisionClass(%q) = %q", s, got)
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
				t.Fatalf("decisionClass(%q) = %q has %q", s, got, r)
			}
		}
		if got != strings.ToLower(s) {
			t.Fatalf("decisionClass(%q) = %q, not the class lower-cased", s, got)
		}
		l.mu.Lock()
		n := len(l.decisions)
		l.mu.Unlock()
		if n > MaxDecisionClasses {
			t.Fatalf("%d distinct decision classes held", n)
		}
	})
}
