package jcs

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// safeASCII[c] is true for the ASCII bytes a JSON string may carry raw and
// that RFC 8785 §3.2.2.2 also writes raw: everything from U+0020 except '"'
// and '\'.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (p *parser) str() (rawStart, rawEnd int, err error) {
	rawStart, rawEnd, _, err = p.strRaw()
	return rawStart, rawEnd, err
}

// strRaw parses the string whose opening quote is at p.pos, appends its
// canonical serialisation (RFC 8785 §3.2.2.2) to p.out, and returns the
// input range of its contents (between the quotes) and whether that range
// holds any escape sequence. Without escapes the canonical contents are the
// raw bytes themselves, so the common case is a validated copy.
func (p *parser) strRaw() (rawStart, rawEnd int, escaped bool, err error) {
	in := p.in
	start := p.pos + 1
	i := start
	for i < len(in) {
		// Skip eight plain ASCII bytes at a time while there are any.
		for i+8 <= len(in) && plain8(binary.LittleEndian.Uint64(in[i:])) {
			i += 8
		}
		if i >= len(in) {
			break
		}
		c := in[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			if c == '"' {
				p.out = append(p.out, '"')
				p.out = append(p.out, in[start:i]...)
				p.out = append(p.out, '"')
				p.pos = i + 1
				return start, i, false, nil
			}
			if c == '\\' {
				return p.strEscaped(start, i)
			}
			return 0, 0, false, p.errAt(CodeSyntax, i, "control character 0x"+hex2(c)+" in string must be escaped")
		}
		size, err := p.utf8At(i)
		if err != nil {
			return 0, 0, false, err
		}
		i += size
	}
	return 0, 0, false, p.errAt(CodeSyntax, len(in), "unexpected end of input: unterminated string starting at offset "+strconv.Itoa(p.pos))
}

// plain8 reports whether all eight bytes of w are safeASCII: none has the
// high bit set, none is below 0x20, none is '"' or '\'. It is the
// "has zero byte" / "has byte less than n" technique (Hacker's Delight
// §6-1), exact when it answers true.
func plain8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	special := (quote - ones) &^ quote
	special |= (backslash - ones) &^ backslash
	special |= (w - ones*0x20) &^ w
	return (special|w)&highs == 0
}

// utf8At validates the non-ASCII UTF-8 sequence at in[i] and returns its
// length. utf8.DecodeRune already rejects overlong forms, code points above
// U+10FFFF and encoded surrogates; the last are reported as unpaired
// surrogates because that is what they are (UTF-8 has no way to pair them).
func (p *parser) utf8At(i int) (int, error) {
	in := p.in
	r, size := utf8.DecodeRune(in[i:])
	if r != utf8.RuneError || size != 1 {
		return size, nil
	}
	if in[i] == 0xED && i+2 < len(in) && in[i+1] >= 0xA0 && in[i+1] <= 0xBF && in[i+2]&0xC0 == 0x80 {
		s := rune(in[i]&0x0F)<<12 | rune(in[i+1]&0x3F)<<6 | rune(in[i+2]&0x3F)
		return 0, p.errAt(CodeUnpairedSurrogate, i, "UTF-8 encoding of surrogate U+"+hex4(s)+" (surrogates have no UTF-8 encoding)")
	}
	return 0, p.errAt(CodeInvalidUTF8, i, "byte 0x"+hex2(in[i])+" does not start a well-formed UTF-8 sequence")
}

// strEscaped continues strRaw from the first backslash at esc, decoding
// escapes and re-serialising every character canonically.
func (p *parser) strEscaped(start, esc int) (rawStart, rawEnd int, escaped bool, err error) {
	in := p.in
	p.out = append(p.out, '"')
	p.out = append(p.out, in[start:esc]...)
	i := esc
	for i < len(in) {
		c := in[i]
		if c < utf8.RuneSelf {
			switch {
			case safeASCII[c]:
				p.out = append(p.out, c)
				i++
			case c == '"':
				p.out = append(p.out, '"')
				p.pos = i + 1
				return start, i, true, nil
			case c == '\\':
				r, n, err := p.escape(i)
				if err != nil {
					return 0, 0, false, err
				}
				p.out = appendCanonicalRune(p.out, r)
				i += n
			default:
				return 0, 0, false, p.errAt(CodeSyntax, i, "control character 0x"+hex2(c)+" in string must be escaped")
			}
			continue
		}
		size, err := p.utf8At(i)
		if err != nil {
			return 0, 0, false, err
		}
		p.out = append(p.out, in[i:i+size]...)
		i += size
	}
	return 0, 0, false, p.errAt(CodeSyntax, len(in), "unexpected end of input: unterminated string starting at offset "+strconv.Itoa(start-1))
}

// escape decodes the escape sequence at in[i] (a backslash) and returns the
// character and the number of input bytes it used. A \u escape of a high
// surrogate must be followed at once by a \u escape of a low surrogate; any
// other surrogate is unpaired (envelope-04 §6.3).
func (p *parser) escape(i int) (rune, int, error) {
	in := p.in
	if i+1 >= len(in) {
		return 0, 0, p.errAt(CodeSyntax, len(in), "unexpected end of input in escape sequence")
	}
	switch in[i+1] {
	case '"':
		return '"', 2, nil
	case '\\':
		return '\\', 2, nil
	case '/':
		return '/', 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
	default:
		return 0, 0, p.errAt(CodeSyntax, i, "invalid escape sequence: backslash followed by "+describe(in[i+1:]))
	}
	r, err := p.hex4At(i)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case r < 0xD800 || r > 0xDFFF:
		return r, 6, nil
	case r >= 0xDC00:
		return 0, 0, p.errAt(CodeUnpairedSurrogate, i, "unpaired low surrogate \\u"+hex4(r))
	}
	if i+7 < len(in) && in[i+6] == '\\' && in[i+7] == 'u' {
		lo, err := p.hex4At(i + 6)
		if err != nil {
			return 0, 0, err
		}
		if lo >= 0xDC00 && lo <= 0xDFFF {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
		}
	}
	return 0, 0, p.errAt(CodeUnpairedSurrogate, i, "high surrogate \\u"+hex4(r)+" is not followed by a low surrogate escape")
}

// hex4At decodes the four hex digits of the \u escape at in[i].
func (p *parser) hex4At(i int) (rune, error) {
	in := p.in
	if i+6 > len(in) {
		return 0, p.errAt(CodeSyntax, i, "truncated \\u escape")
	}
	var r rune
	for _, c := range in[i+2 : i+6] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, p.errAt(CodeSyntax, i, "invalid \\u escape: expected four hexadecimal digits")
		}
		r = r<<4 | rune(v)
	}
	return r, nil
}

func hex4(r rune) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[r>>12&0xf], digits[r>>8&0xf], digits[r>>4&0xf], digits[r&0xf]})
}

// appendCanonicalRune serialises one character of a string per RFC 8785
// §3.2.2.2 (ECMAScript JSON.stringify): the two-character escapes for '"',
// '\', and \b \t \n \f \r; \u00xx with lowercase hex for the other C0
// controls; every other character as raw UTF-8.
func appendCanonicalRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	if r < 0x20 {
		const digits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', digits[r>>4], digits[r&0xf])
	}
	if r < utf8.RuneSelf {
		return append(dst, byte(r))
	}
	return utf8.AppendRune(dst, r)
}

// appendDecoded appends the decoded contents of a string already validated
// by strEscaped (so no error is possible here).
func appendDecoded(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			dst = append(dst, raw[i])
			i++
			continue
		}
		var r rune
		switch raw[i+1] {
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			r = hexValue(raw[i+2 : i+6])
			i += 6
			if r >= 0xD800 && r <= 0xDBFF {
				r = 0x10000 + (r-0xD800)<<10 + (hexValue(raw[i+2:i+6]) - 0xDC00)
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			r = rune(raw[i+1])
		}
		dst = append(dst, byte(r))
		i += 2
	}
	return dst
}

func hexValue(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

// AppendString appends the RFC 8785 canonical serialisation of s, quotes
// included, to dst. It is for building canonical material around values
// that are already Go strings (a tool name, say). s must be well-formed
// UTF-8 without surrogates; otherwise dst is returned unchanged with an
// *Error whose Offset is a byte offset into s.
func AppendString(dst []byte, s string) ([]byte, error) {
	n := len(dst)
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !safeASCII[c] {
				dst = appendCanonicalRune(dst, rune(c))
				i++
				continue
			}
			// Copy the whole run of bytes that need no escaping at once.
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf && safeASCII[s[j]] {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			code, detail := CodeInvalidUTF8, "byte 0x"+hex2(c)+" does not start a well-formed UTF-8 sequence"
			if c == 0xED && i+1 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF {
				code, detail = CodeUnpairedSurrogate, "UTF-8 encoding of a surrogate (surrogates have no UTF-8 encoding)"
			}
			return dst[:n], &Error{Code: code, Offset: i, Detail: detail}
		}
		dst = append(dst, s[i:i+size]...)
		i += size
	}
	return append(dst, '"'), nil
}
