package jcs

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// parser is a single-pass recursive-descent tokenizer over the raw input
// that writes the canonical form of every token to out as it goes, members
// of objects in input order. Every non-empty object is recorded in objs and,
// when its member names are not already in canonical order, its members'
// spans of out are recorded in canonical order; if there are any, assemble
// copies out once into canonical order. Moving members in place instead would move a large value
// once per enclosing object to be reordered: quadratic work on hostile
// input. Nothing is decoded through encoding/json, so a duplicate name or a
// lone surrogate is seen as written (envelope-04 §6.3: "the check MUST be
// applied at the parse boundary").
type parser struct {
	in       []byte
	pos      int
	out      []byte
	strict   bool
	maxDepth int
	// enclosing is the number of containers the caller will wrap the
	// output in; they count toward maxDepth.
	enclosing int

	// members is a stack shared by all open objects: each object owns
	// members[base:] while it is being parsed and pops them when it closes.
	members []member
	// keys holds the decoded form of member names that contained escapes;
	// names without escapes are compared straight from the input.
	keys []byte
	// objs holds every non-empty object in order of its opening brace, so
	// the objects nested in one directly follow it; reordered counts those
	// whose members need reordering. spans holds the members of those, each
	// object's contiguous and in canonical order.
	objs      []object
	reordered int
	spans     []span
}

// span is a member, `"name":value`, in out[start:end]; objs[firstObj] is
// the first object that can lie inside it.
type span struct{ start, end, firstObj int }

// object is a non-empty object in out[start:end], from '{' to just past
// '}'. next is the index in objs of the first object not inside it. If its
// members need reordering they are spans[lo:hi], in canonical order;
// otherwise lo is -1.
type object struct {
	start, end, next, lo, hi int
}

// member records one object member while its object is open. It holds no
// pointers, so that growing and sorting the stack costs no write barriers.
type member struct {
	// The decoded name, for ordering and duplicate detection, is
	// in[nameStart:nameEnd], or keys[nameStart:nameEnd] when the name held
	// escapes.
	nameStart, nameEnd int
	nameInKeys         bool
	offset             int // input offset of the name's opening quote
	start, end         int // canonical `"name":value` in out, without separators
	firstObj           int // len(objs) when the member started
}

func (p *parser) name(m *member) []byte {
	if m.nameInKeys {
		return p.keys[m.nameStart:m.nameEnd]
	}
	return p.in[m.nameStart:m.nameEnd]
}

func (p *parser) errAt(code Code, off int, detail string) *Error {
	return &Error{Code: code, Offset: off, Detail: detail}
}

// document parses exactly one JSON text (RFC 8259 §2): optional whitespace,
// one value, optional whitespace, end of input.
func (p *parser) document() error {
	if len(p.in) >= 3 && p.in[0] == 0xEF && p.in[1] == 0xBB && p.in[2] == 0xBF {
		// RFC 8259 §8.1: a byte order mark MUST NOT be added; an
		// implementation MAY ignore it. Ignoring input bytes is not
		// canonicalization, so reject.
		return p.errAt(CodeSyntax, 0, "leading byte order mark (U+FEFF) is not allowed")
	}
	p.skipWS()
	if p.pos >= len(p.in) {
		return p.errAt(CodeSyntax, p.pos, "empty input: expected a JSON value")
	}
	if err := p.value(p.enclosing); err != nil {
		return err
	}
	p.skipWS()
	if p.pos < len(p.in) {
		if err := p.badByte(p.pos); err.Code != CodeSyntax {
			return err
		}
		return p.errAt(CodeSyntax, p.pos, "trailing data after the JSON value")
	}
	return nil
}

func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// badByte reports an unexpected byte at off outside a string. A byte that
// starts no well-formed UTF-8 sequence is reported as such; anything else is
// a syntax error.
func (p *parser) badByte(off int) *Error {
	c := p.in[off]
	if c >= utf8.RuneSelf {
		if r, size := utf8.DecodeRune(p.in[off:]); r == utf8.RuneError && size == 1 {
			return p.errAt(CodeInvalidUTF8, off, "byte 0x"+hex2(c)+" is not valid UTF-8")
		}
	}
	return p.errAt(CodeSyntax, off, "unexpected "+describe(p.in[off:]))
}

func (p *parser) eof(what string) *Error {
	return p.errAt(CodeSyntax, len(p.in), "unexpected end of input: expected "+what)
}

// describe names the byte (or UTF-8 character) at the start of b.
func describe(b []byte) string {
	c := b[0]
	if c >= 0x20 && c < 0x7f {
		return "character " + strconv.QuoteRune(rune(c))
	}
	if c >= utf8.RuneSelf {
		r, _ := utf8.DecodeRune(b)
		return "character " + strconv.QuoteRune(r)
	}
	return "byte 0x" + hex2(c)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// value parses one value starting at p.pos (whitespace already skipped).
// depth is the number of containers enclosing it.
func (p *parser) value(depth int) error {
	if p.pos >= len(p.in) {
		return p.eof("a JSON value")
	}
	switch c := p.in[p.pos]; c {
	case '{':
		return p.object(depth + 1)
	case '[':
		return p.array(depth + 1)
	case '"':
		_, _, err := p.str()
		return err
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.number()
		}
		return p.badByte(p.pos)
	}
}

func (p *parser) literal(lit string) error {
	end := p.pos + len(lit)
	if end > len(p.in) || string(p.in[p.pos:end]) != lit {
		return p.errAt(CodeSyntax, p.pos, "invalid literal: expected "+lit)
	}
	p.out = append(p.out, lit...)
	p.pos = end
	return nil
}

func (p *parser) depthError() error {
	limit := "the full-mode bound MaxDepthFull"
	if p.strict {
		limit = "the strict profile bound (envelope-04 §6.3)"
	}
	return p.errAt(CodeDepthExceeded, p.pos, "nesting deeper than "+strconv.Itoa(p.maxDepth)+" containers exceeds "+limit)
}

func (p *parser) array(depth int) error {
	if depth > p.maxDepth {
		return p.depthError()
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		p.skipWS()
		if err := p.value(depth); err != nil {
			return err
		}
		p.skipWS()
		if p.pos >= len(p.in) {
			return p.eof("',' or ']'")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return nil
		default:
			if err := p.badByte(p.pos); err.Code != CodeSyntax {
				return err
			}
			return p.errAt(CodeSyntax, p.pos, "expected ',' or ']' after array element, found "+describe(p.in[p.pos:]))
		}
	}
}

func (p *parser) object(depth int) error {
	if depth > p.maxDepth {
		return p.depthError()
	}
	p.pos++ // '{'
	open := len(p.out)
	p.out = append(p.out, '{')
	base := len(p.members)
	keysBase := len(p.keys)
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return nil
	}
	if p.objs == nil {
		p.objs = make([]object, 0, max(8, len(p.in)/128))
	}
	slot := len(p.objs)
	p.objs = append(p.objs, object{start: open, lo: -1})
	for {
		p.skipWS()
		if p.pos >= len(p.in) {
			return p.eof("a member name")
		}
		if p.in[p.pos] != '"' {
			if err := p.badByte(p.pos); err.Code != CodeSyntax {
				return err
			}
			return p.errAt(CodeSyntax, p.pos, "expected a member name string, found "+describe(p.in[p.pos:]))
		}
		m := member{offset: p.pos, start: len(p.out), firstObj: len(p.objs)}
		rawStart, rawEnd, escaped, err := p.strRaw()
		if err != nil {
			return err
		}
		if escaped {
			m.nameStart, m.nameInKeys = len(p.keys), true
			p.keys = appendDecoded(p.keys, p.in[rawStart:rawEnd])
			m.nameEnd = len(p.keys)
		} else {
			m.nameStart, m.nameEnd = rawStart, rawEnd
		}
		p.skipWS()
		if p.pos >= len(p.in) {
			return p.eof("':'")
		}
		if p.in[p.pos] != ':' {
			if err := p.badByte(p.pos); err.Code != CodeSyntax {
				return err
			}
			return p.errAt(CodeSyntax, p.pos, "expected ':' after member name, found "+describe(p.in[p.pos:]))
		}
		p.pos++
		p.out = append(p.out, ':')
		p.skipWS()
		if err := p.value(depth); err != nil {
			return err
		}
		m.end = len(p.out)
		p.members = append(p.members, m)
		p.skipWS()
		if p.pos >= len(p.in) {
			return p.eof("',' or '}'")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case '}':
			p.pos++
			err := p.closeObject(slot, base)
			p.members = p.members[:base]
			p.keys = p.keys[:keysBase]
			return err
		default:
			if err := p.badByte(p.pos); err.Code != CodeSyntax {
				return err
			}
			return p.errAt(CodeSyntax, p.pos, "expected ',' or '}' after object member, found "+describe(p.in[p.pos:]))
		}
	}
}

// closeObject finds the RFC 8785 §3.2.3 order of the members of the object
// recorded in objs[slot] (by UTF-16 code units of the decoded names),
// rejects duplicate names (envelope-04 §6.3), writes the closing brace and,
// if the order differs from the input's, records it for assemble.
func (p *parser) closeObject(slot, base int) error {
	p.out = append(p.out, '}')
	o := &p.objs[slot]
	o.end, o.next = len(p.out), len(p.objs)
	ms := p.members[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		if compareUTF16(p.name(&ms[i-1]), p.name(&ms[i])) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	// Stable, so that among equal names input order is kept and the
	// duplicate reported is deterministic: the earliest repeated name.
	slices.SortStableFunc(ms, func(a, b member) int { return compareUTF16(p.name(&a), p.name(&b)) })
	dup := -1
	for i := 1; i < len(ms); i++ {
		if compareUTF16(p.name(&ms[i-1]), p.name(&ms[i])) == 0 && (dup < 0 || ms[i].offset < ms[dup].offset) {
			dup = i
		}
	}
	if dup >= 0 {
		first := dup - 1
		for first > 0 && compareUTF16(p.name(&ms[first-1]), p.name(&ms[dup])) == 0 {
			first--
		}
		return p.errAt(CodeDuplicateMember, ms[dup].offset, "duplicate member name (equal after escape decoding to the name at offset "+
			strconv.Itoa(ms[first].offset)+")")
	}
	if p.spans == nil {
		// Sized from the input once, rather than grown from small, for
		// documents full of unsorted objects (typical tool arguments).
		p.spans = make([]span, 0, max(len(ms), len(p.in)/64))
	}
	o.lo = len(p.spans)
	for _, m := range ms {
		p.spans = append(p.spans, span{m.start, m.end, m.firstObj})
	}
	o.hi = len(p.spans)
	p.reordered++
	return nil
}

// assemble returns the canonical document: out itself when no object needs
// reordering, otherwise a copy of out with the members of those objects in
// canonical order. Each byte is copied once.
func (p *parser) assemble() []byte {
	if p.reordered == 0 {
		return p.out
	}
	return p.emit(make([]byte, 0, len(p.out)), 0, len(p.out), 0)
}

// emit appends out[s:e] to dst with the objects in it reordered; objs[i] is
// the first object that can lie inside it. Its recursion is as deep as the
// nesting of reordered objects, which the parser has already bounded.
func (p *parser) emit(dst []byte, s, e, i int) []byte {
	pos := s
	for i < len(p.objs) && p.objs[i].start < e {
		o := &p.objs[i]
		if o.lo < 0 {
			// In order already: copied as it stands, but what it holds
			// may not be, so go on to the objects inside it.
			i++
			continue
		}
		dst = append(dst, p.out[pos:o.start]...)
		dst = append(dst, '{')
		for k, m := range p.spans[o.lo:o.hi] {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = p.emit(dst, m.start, m.end, m.firstObj)
		}
		dst = append(dst, '}')
		pos, i = o.end, o.next
	}
	return append(dst, p.out[pos:e]...)
}

// compareUTF16 orders two well-formed UTF-8 strings by their UTF-16 code
// units (RFC 8785 §3.2.3). UTF-8 byte order is code point order, which
// agrees with UTF-16 order except where a supplementary character (encoded
// in UTF-16 from a high surrogate, 0xD800-0xDBFF) meets a BMP character in
// U+E000-U+FFFF: there UTF-16 puts the supplementary character first.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// Back up to the start of the character that differs; the common prefix
	// ends on the same boundary in both strings.
	for i > 0 && a[i]&0xC0 == 0x80 {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	if ua != ub {
		return int(ua) - int(ub)
	}
	return int(ra) - int(rb)
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}
