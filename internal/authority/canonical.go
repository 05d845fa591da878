package authority

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// member is one member of a flat JSON object whose values are strings or integers.
type member struct {
	key   string
	str   string
	num   int64
	isNum bool
}

func str(k, v string) member { return member{key: k, str: v} }
func num(k string, v int64) member {
	return member{key: k, num: v, isNum: true}
}

// maxSafeInteger is 2^53-1: larger integers do not survive an IEEE 754 double, which RFC 8785
// §3.2.2.3 uses for every number.
const maxSafeInteger = 1<<53 - 1

// canonicalObject returns the RFC 8785 (JCS) serialization of a flat object of string and integer
// members. For such objects JCS reduces to: members sorted by key (keys here are ASCII, so byte
// order equals the UTF-16 code-unit order of §3.2.3), no whitespace, strings escaped per
// §3.2.2.2 (only '"', '\\' and controls below U+0020 are escaped; everything else is literal
// UTF-8) and integers in plain decimal (§3.2.2.3 for integral values within ±2^53-1). The tests
// check the output byte for byte against an independent RFC 8785 implementation.
func canonicalObject(ms []member) ([]byte, error) {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	// One allocation in the common case: every member's key and value, quoted, plus the
	// separators, and room for a few escapes.
	size := 2
	for _, m := range ms {
		size += len(m.key) + len(m.str) + 8
		if m.isNum {
			size += 16
		}
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	var err error
	for i, m := range ms {
		if i > 0 {
			if ms[i-1].key == m.key {
				return nil, fmt.Errorf("%w: duplicate member %q", ErrInvalid, m.key)
			}
			buf = append(buf, ',')
		}
		for j := 0; j < len(m.key); j++ {
			if m.key[j] >= utf8.RuneSelf {
				return nil, fmt.Errorf("%w: non-ASCII member name %q", ErrInvalid, m.key)
			}
		}
		if buf, err = appendString(buf, m.key); err != nil {
			return nil, err
		}
		buf = append(buf, ':')
		if m.isNum {
			if m.num > maxSafeInteger || m.num < -maxSafeInteger {
				return nil, fmt.Errorf("%w: %s = %d is outside ±(2^53-1)", ErrInvalid, m.key, m.num)
			}
			buf = strconv.AppendInt(buf, m.num, 10)
			continue
		}
		if buf, err = appendString(buf, m.str); err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
	}
	return append(buf, '}'), nil
}

// appendString appends s as a JCS string: quoted, with '"', '\\' and the controls below U+0020
// escaped (the short forms where JSON has them) and every other byte copied as it is. Runs of
// bytes that need no escape are copied at once.
func appendString(buf []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: string is not valid UTF-8", ErrInvalid)
	}
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		start = i + 1
		switch c {
		case '"':
			buf = append(buf, `\"`...)
		case '\\':
			buf = append(buf, `\\`...)
		case '\b':
			buf = append(buf, `\b`...)
		case '\f':
			buf = append(buf, `\f`...)
		case '\n':
			buf = append(buf, `\n`...)
		case '\r':
			buf = append(buf, `\r`...)
		case '\t':
			buf = append(buf, `\t`...)
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"'), nil
}
