package envelope

import (
	"strings"
	"unicode/utf8"
)

// SlotText makes a gate-written string fit a text slot: the runes ForbiddenRune reports and
// U+FFFD dropped, cut to max runes with "…" marking the cut, and "-" for what is left empty.
// The envelope refuses rather than repairs (Build), so a gate repairs its own text before
// handing it over.
func SlotText(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, c := range s {
		if ForbiddenRune(c) || c == utf8.RuneError {
			continue
		}
		if n == max-1 && utf8.RuneCountInString(s) > max {
			b.WriteRune('…')
			break
		}
		b.WriteRune(c)
		n++
	}
	out := b.String()
	if strings.TrimSpace(out) == "" {
		return "-"
	}
	return out
}
