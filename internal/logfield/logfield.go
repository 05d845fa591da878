package logfield

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is the longest value Bound logs whole.
const MaxBytes = 128

// prefixBytes is how much of a longer value is kept before the marker.
const prefixBytes = 64

// Bound returns s as a log field: s itself when it is at most MaxBytes of printable UTF-8;
// otherwise at most prefixBytes of it (unprintable characters replaced by U+FFFD) followed by
// "…[N bytes sha256:HEX]", where N is len(s) and HEX the first 16 hex digits of its digest.
func Bound(s string) string {
	if len(s) <= MaxBytes && printable(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i >= prefixBytes || b.Len()+utf8.RuneLen(r) > prefixBytes {
			break
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	sum := sha256.Sum256([]byte(s))
	b.WriteString("…[")
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteString(" bytes sha256:")
	b.WriteString(hex.EncodeToString(sum[:8]))
	b.WriteString("]")
	return b.String()
}

// printable reports whether s is valid UTF-8 of printable characters only (unicode.IsPrint:
// no controls, line breaks, format characters such as bidi overrides, or unassigned code
// points; the ASCII space is printable).
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
