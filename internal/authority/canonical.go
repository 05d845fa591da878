package authority

import (
	"bytes"
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
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			if ms[i-1].key == m.key {
				return nil, fmt.Errorf("%w: duplicate member %q", ErrInvalid, m.key)
			}
			buf.WriteByte(',')
		}
		for j := 0; j < len(m.key); j++ {
			if m.key[j] >= utf8.RuneSelf {
				return nil, fmt.Errorf("%w: non-ASCII member name %q", ErrInvalid, m.key)
			}
		}
		if err := writeString(&buf, m.key); err != nil {
			return nil, err
		}
		buf.WriteByte(':')
		if m.isNum {
			if m.num > maxSafeInteger || m.num < -maxSafeInteger {
				return nil, fmt.Errorf("%w: %s = %d is outside ±(2^53-1)", ErrInvalid, m.key, m.num)
			}
			buf.WriteString(strconv.FormatInt(m.num, 10))
			continue
		}
		if err := writeString(&buf, m.str); err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func writeString(buf *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: string is not valid UTF-8", ErrInvalid)
	}
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			buf.WriteString(`\"`)
		case c == '\\':
			buf.WriteString(`\\`)
		case c == '\b':
			buf.WriteString(`\b`)
		case c == '\f':
			buf.WriteString(`\f`)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\r':
			buf.WriteString(`\r`)
		case c == '\t':
			buf.WriteString(`\t`)
		case c < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		default:
			buf.WriteByte(c)
		}
	}
	buf.WriteByte('"')
	return nil
}
