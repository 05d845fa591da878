package receipt

import (
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Receipt member indexes, for duplicate detection while decoding.
const (
	mSeq = iota
	mPrev
	mTime
	mActID
	mTool
	mServer
	mClass
	mArgumentsDigest
	mActionDigest
	mDecision
	mCode
	mAuthorityID
	mOperationID
	mState
	mDigest
)

func memberIndex(name []byte) int {
	switch string(name) { // no allocation: the compiler matches the bytes in place
	case "seq":
		return mSeq
	case "prev":
		return mPrev
	case "time":
		return mTime
	case "act_id":
		return mActID
	case "tool":
		return mTool
	case "server":
		return mServer
	case "class":
		return mClass
	case "arguments_digest":
		return mArgumentsDigest
	case "action_digest":
		return mActionDigest
	case "decision":
		return mDecision
	case "code":
		return mCode
	case "authority_id":
		return mAuthorityID
	case "operation_id":
		return mOperationID
	case "state":
		return mState
	case "digest":
		return mDigest
	}
	return -1
}

// decodeReceipt parses one receipt line: a JSON object holding each receipt member at most
// once, seq an unsigned integer and every other member a string. It accepts a superset of the
// canonical form (whitespace, any escape); Verify then requires the line to equal the canonical
// re-encoding, which is what makes a line's bytes unique. It replaces encoding/json here
// because Open verifies the whole log at every start and reflection dominated that cost; a
// differential fuzz target (FuzzDecodeReceipt) holds the two to the same result on every line
// Verify accepts.
func decodeReceipt(line []byte) (Receipt, error) {
	var r Receipt
	d := decoder{b: line}
	d.ws()
	if !d.byte('{') {
		return Receipt{}, errSyntax
	}
	d.ws()
	if d.byte('}') {
		return r, d.end()
	}
	var seen uint32
	for {
		d.ws()
		name, ok := d.str(d.name[:0])
		if !ok {
			return Receipt{}, errSyntax
		}
		d.name = name
		d.ws()
		if !d.byte(':') {
			return Receipt{}, errSyntax
		}
		d.ws()
		m := memberIndex(name)
		if m < 0 || seen&(1<<m) != 0 {
			return Receipt{}, errSyntax
		}
		seen |= 1 << m
		if m == mSeq {
			if r.Seq, ok = d.uint(); !ok {
				return Receipt{}, errSyntax
			}
		} else {
			v, ok := d.str(d.scratch[:0])
			if !ok {
				return Receipt{}, errSyntax
			}
			d.scratch = v
			if !r.set(m, v) {
				return Receipt{}, errSyntax
			}
		}
		d.ws()
		if d.byte('}') {
			return r, d.end()
		}
		if !d.byte(',') {
			return Receipt{}, errSyntax
		}
	}
}

func (r *Receipt) set(m int, v []byte) bool {
	if m == mTime {
		t, err := time.Parse(time.RFC3339Nano, string(v))
		r.Time = t
		return err == nil
	}
	s := string(v)
	switch m {
	case mPrev:
		r.Prev = s
	case mActID:
		r.ActID = s
	case mTool:
		r.Tool = s
	case mServer:
		r.Server = s
	case mClass:
		r.Class = s
	case mArgumentsDigest:
		r.ArgumentsDigest = s
	case mActionDigest:
		r.ActionDigest = s
	case mDecision:
		r.Decision = s
	case mCode:
		r.Code = s
	case mAuthorityID:
		r.AuthorityID = s
	case mOperationID:
		r.OperationID = s
	case mState:
		r.State = s
	case mDigest:
		r.Digest = s
	}
	return true
}

type decoder struct {
	b       []byte
	p       int
	name    []byte // the member name being read
	scratch []byte // the string value being read
}

func (d *decoder) ws() {
	for d.p < len(d.b) {
		switch d.b[d.p] {
		case ' ', '\t', '\n', '\r':
			d.p++
		default:
			return
		}
	}
}

func (d *decoder) byte(c byte) bool {
	if d.p < len(d.b) && d.b[d.p] == c {
		d.p++
		return true
	}
	return false
}

func (d *decoder) end() error {
	d.ws()
	if d.p != len(d.b) {
		return errSyntax
	}
	return nil
}

// uint reads a JSON number that is a non-negative integer below 2^64 (no sign, fraction or
// exponent; a leading zero only for 0).
func (d *decoder) uint() (uint64, bool) {
	start := d.p
	var v uint64
	for d.p < len(d.b) && d.b[d.p] >= '0' && d.b[d.p] <= '9' {
		digit := uint64(d.b[d.p] - '0')
		if v > (1<<64-1-digit)/10 {
			return 0, false
		}
		v = v*10 + digit
		d.p++
	}
	n := d.p - start
	return v, n > 0 && (n == 1 || d.b[start] != '0')
}

// str reads a JSON string and appends its decoded bytes to dst. Control characters must be
// escaped (RFC 8259 §7); ill-formed UTF-8 and lone surrogate escapes are kept as encoding/json
// keeps them (U+FFFD), to be caught by the UTF-8 check or the canonical comparison.
func (d *decoder) str(dst []byte) ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	for d.p < len(d.b) {
		c := d.b[d.p]
		switch {
		case c == '"':
			d.p++
			return dst, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if d.p+1 >= len(d.b) {
				return nil, false
			}
			e := d.b[d.p+1]
			d.p += 2
			switch e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return nil, false
				}
				if utf16.IsSurrogate(r) {
					r2 := rune(utf8.RuneError)
					if save := d.p; d.p+1 < len(d.b) && d.b[d.p] == '\\' && d.b[d.p+1] == 'u' {
						d.p += 2
						lo, ok := d.hex4()
						if !ok {
							return nil, false
						}
						if r2 = utf16.DecodeRune(r, lo); r2 == utf8.RuneError {
							d.p = save // not a pair: the second escape stands alone
						}
					}
					r = r2
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return nil, false
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			d.p++
		default:
			r, size := utf8.DecodeRune(d.b[d.p:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, d.b[d.p:d.p+size]...)
			}
			d.p += size
		}
	}
	return nil, false
}

func (d *decoder) hex4() (rune, bool) {
	if d.p+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.p : d.p+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.p += 4
	return r, true
}
