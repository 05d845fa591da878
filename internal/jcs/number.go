package jcs

import (
	"math"
	"strconv"
)

// number parses the number token at p.pos (RFC 8259 §6) and appends its
// canonical form.
//
// Strict mode decides "integer of magnitude at most 2^53-1" (envelope-04
// §6.3) on the exact decimal value of the token, not on its nearest double:
// 1.0, 1e0 and -0 are integers and give 1, 1 and 0, while
// 1.0000000000000000001 is not an integer even though it rounds to 1. Every
// token accepted this way is exactly representable as a double, so an
// implementation that checks the parsed double instead accepts it too and
// produces the same bytes; the only tokens on which the two can differ are
// ones this package rejects (fail closed), never ones whose bytes differ.
//
// Full mode serialises the token's nearest double as ECMAScript's
// Number.prototype.toString does (RFC 8785 §3.2.2.3). Safe integers take the
// same exact path as in Strict mode, so whatever Strict accepts, Full
// serialises identically.
func (p *parser) number() error {
	in := p.in
	start := p.pos
	i := start
	if in[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i >= len(in):
		return p.errAt(CodeSyntax, i, "unexpected end of input: expected a digit")
	case in[i] == '0':
		i++
		if i < len(in) && isDigit(in[i]) {
			return p.errAt(CodeSyntax, start, "leading zeros are not allowed in numbers")
		}
	case isDigit(in[i]):
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	default:
		return p.errAt(CodeSyntax, i, "expected a digit after '-'")
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		fracStart = i
		for i < len(in) && isDigit(in[i]) {
			i++
		}
		if i == fracStart {
			return p.errAt(CodeSyntax, i, "expected a digit after the decimal point")
		}
		fracEnd = i
	}
	var exp int64
	hasExp := false
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		hasExp = true
		i++
		expNeg := false
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			expNeg = in[i] == '-'
			i++
		}
		digits := i
		for i < len(in) && isDigit(in[i]) {
			// Clamp: any exponent this large already decides the outcome,
			// and the clamp keeps the arithmetic below from overflowing.
			if exp < 1<<40 {
				exp = exp*10 + int64(in[i]-'0')
			}
			i++
		}
		if i == digits {
			return p.errAt(CodeSyntax, i, "expected a digit in the exponent")
		}
		if expNeg {
			exp = -exp
		}
	}
	p.pos = i
	tok := in[start:i]
	intDigits, frac := in[intStart:intEnd], in[fracStart:fracEnd]

	// Fast path: a plain integer token of at most 15 digits is below 2^53
	// and, having no leading zeros, is already canonical (except -0).
	if len(frac) == 0 && !hasExp && len(intDigits) <= 15 {
		if intDigits[0] == '0' {
			p.out = append(p.out, '0')
		} else {
			p.out = append(p.out, tok...)
		}
		return nil
	}

	v, integer, safe := exactInteger(intDigits, frac, exp)
	if integer && safe {
		if v != 0 && in[start] == '-' {
			p.out = append(p.out, '-')
		}
		p.out = strconv.AppendUint(p.out, v, 10)
		return nil
	}
	if p.strict {
		why := "is not an integer"
		if integer {
			why = "has a magnitude greater than 2^53-1"
		}
		return p.errAt(CodeNumberOutOfProfile, start, "number "+why+
			"; the strict profile (envelope-04 §6.3) admits only integers of magnitude at most 2^53-1: encode such values as strings")
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if math.IsInf(f, 0) {
		return p.errAt(CodeNumberNotFinite, start, "number is outside the range of an IEEE-754 double (RFC 8785 §3.2.2.3)")
	}
	if err != nil {
		// Unreachable for a token that matched the grammar above; kept so
		// that a surprise is a rejection, not a wrong digest.
		return p.errAt(CodeSyntax, start, "invalid number")
	}
	p.out = appendES6(p.out, f)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// exactInteger examines the exact decimal value of a number token given
// its integer digits, fraction digits and (clamped) exponent. integer
// reports whether that value is a whole number; safe whether it is one of
// magnitude at most 2^53-1, in which case v is the magnitude.
func exactInteger(intDigits, frac []byte, exp int64) (v uint64, integer, safe bool) {
	n := len(intDigits) + len(frac)
	digit := func(k int) byte {
		if k < len(intDigits) {
			return intDigits[k]
		}
		return frac[k-len(intDigits)]
	}
	first := 0
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		return 0, true, true // every zero spelling, whatever its exponent
	}
	last := n - 1
	for digit(last) == '0' {
		last--
	}
	// value = digits[first..last] * 10^e, with no trailing zero left in the
	// digits, so the value is whole exactly when e >= 0.
	e := exp - int64(len(frac)) + int64(n-1-last)
	if e < 0 {
		return 0, false, false
	}
	if int64(last-first+1)+e > 16 { // 2^53-1 has 16 digits
		return 0, true, false
	}
	for k := first; k <= last; k++ {
		v = v*10 + uint64(digit(k)-'0')
	}
	for ; e > 0; e-- {
		v *= 10
	}
	return v, true, v <= MaxSafeInteger
}

// appendES6 appends the ECMAScript Number.prototype.toString form of a
// finite f (ECMA-262 Number::toString, RFC 8785 §3.2.2.3): the shortest
// digits that round-trip, in fixed notation for 1e-6 <= |f| < 1e21 and
// exponent notation otherwise, with no "+0" padding of the exponent and -0
// written as 0. It mirrors github.com/gowebpki/jcs NumberToJSON (which the
// tests check it against) but appends instead of allocating a string.
func appendES6(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	if f >= 1e-6 && f < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes at least two exponent digits ("1e-07"); ECMAScript does not.
	for i := len(dst) - 1; i > start; i-- {
		if dst[i] == 'e' {
			if dst[i+2] == '0' {
				dst = append(dst[:i+2], dst[i+3:]...)
			}
			break
		}
	}
	return dst
}
