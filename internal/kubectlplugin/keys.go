package kubectlplugin

import "unicode/utf8"

// Bytes a terminal in raw mode sends.
const (
	byteCtrlC     = 0x03
	byteCtrlD     = 0x04
	byteBackspace = 0x08
	byteLF        = '\n'
	byteCR        = '\r'
	byteEsc       = 0x1b
	byteDEL       = 0x7f
)

// decodeKeys turns what one read from a raw-mode terminal returned into keys. rest is a
// trailing incomplete UTF-8 sequence to prepend to the next read. Escape sequences (CSI
// "ESC [" and SS3 "ESC O") become keyUp/keyDown or keyOther; a lone ESC at the end of the read
// is keyEsc (terminals send a sequence in one write, so an ESC with nothing after it is the
// key itself); ESC before anything else is keyEsc and the next byte is decoded on its own.
// Invalid UTF-8, control characters, line separators and bidi overrides become keyOther, never a
// rune: none of them can reach the answer text.
func decodeKeys(b []byte) (keys []key, rest []byte) {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == byteEsc:
			if i+1 < len(b) && (b[i+1] == '[' || b[i+1] == 'O') {
				k, n := escapeSequence(b[i:])
				keys = append(keys, k)
				i += n
				continue
			}
			keys = append(keys, key{kind: keyEsc})
			i++
		case c == byteCR || c == byteLF:
			keys = append(keys, key{kind: keyEnter})
			// CR LF from one Enter is one key.
			if c == byteCR && i+1 < len(b) && b[i+1] == byteLF {
				i++
			}
			i++
		case c == byteDEL || c == byteBackspace:
			keys = append(keys, key{kind: keyBackspace})
			i++
		case c == byteCtrlC || c == byteCtrlD:
			keys = append(keys, key{kind: keyInterrupt})
			i++
		case c < 0x20:
			keys = append(keys, key{kind: keyOther})
			i++
		case c < utf8.RuneSelf:
			keys = append(keys, key{kind: keyRune, r: rune(c)})
			i++
		default:
			if !utf8.FullRune(b[i:]) {
				return keys, append([]byte(nil), b[i:]...)
			}
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError || unsafeRune(r) { // invalid, a C1 control, a line separator or a bidi override
				keys = append(keys, key{kind: keyOther})
			} else {
				keys = append(keys, key{kind: keyRune, r: r})
			}
			i += n
		}
	}
	return keys, nil
}

// escapeSequence decodes the sequence at the start of b (b[0] is ESC, b[1] is '[' or 'O') and
// returns its key and length. A CSI sequence runs to its final byte (0x40–0x7E); an SS3
// sequence is one byte after 'O'. A sequence cut off by the end of b is keyOther and consumes
// the rest.
func escapeSequence(b []byte) (key, int) {
	if b[1] == 'O' {
		if len(b) < 3 {
			return key{kind: keyOther}, len(b)
		}
		return arrowKey(b[2]), 3
	}
	for j := 2; j < len(b); j++ {
		if b[j] >= 0x40 && b[j] <= 0x7e {
			if j == 2 {
				return arrowKey(b[j]), 3
			}
			return key{kind: keyOther}, j + 1 // parameters (e.g. ESC [ 1 ; 5 A): not a plain arrow
		}
	}
	return key{kind: keyOther}, len(b)
}

func arrowKey(final byte) key {
	switch final {
	case 'A':
		return key{kind: keyUp}
	case 'B':
		return key{kind: keyDown}
	}
	return key{kind: keyOther}
}
