package jcs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
)

// Mode selects which rules Canonicalize applies.
type Mode int

const (
	// Full is RFC 8785 over I-JSON (RFC 7493): any finite IEEE-754 number is
	// accepted and serialised as ECMAScript's Number.prototype.toString
	// would (RFC 8785 §3.2.2.3). Duplicate member names and unpaired
	// surrogates are rejected, because RFC 8785 §3.1 requires I-JSON input.
	// Nesting is bounded by MaxDepthFull to keep the parser's stack and work
	// bounded on hostile input.
	Full Mode = iota
	// Strict is Full plus the profile bounds of binding-moment-envelope-04
	// §6.3 (= EP receipts §13.12): numbers must be integers of magnitude at
	// most 2^53-1, and nesting must not exceed MaxDepth. Use it for
	// envelopes, actions and resolutions: anything a human decides over.
	Strict
)

func (m Mode) String() string {
	switch m {
	case Full:
		return "full"
	case Strict:
		return "strict"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

const (
	// MaxDepth is the Strict nesting bound of envelope-04 §6.3: 64
	// containers deep is accepted, 65 rejected; the root counts as 1.
	MaxDepth = 64
	// MaxDepthFull bounds nesting in Full mode. RFC 8785 sets no limit; this
	// one exists so that hostile input cannot exhaust the stack or force
	// quadratic work, and is far beyond any real tool argument.
	MaxDepthFull = 1000
)

// MaxSafeInteger is 2^53-1, the largest magnitude the Strict profile accepts.
const MaxSafeInteger = 1<<53 - 1

// DigestPrefix is the algorithm prefix of every digest string (envelope-04 §6.2).
const DigestPrefix = "sha256:"

// Canonicalize parses raw JSON text and returns its RFC 8785 canonical form.
// All checks run on the raw bytes, at the parse boundary (envelope-04 §6.3).
// A rejection is an *Error whose Offset is a byte offset into raw.
func Canonicalize(raw []byte, mode Mode) ([]byte, error) {
	return canonicalize(raw, mode, 0)
}

// CanonicalizeNested is Canonicalize for a value that the caller will embed
// enclosing containers deep in a larger document, such as the args member
// of an action object (enclosing = 1). The depth bound of mode counts those
// containers, so that the value is accepted exactly when the assembled
// document would be. Offsets in errors are still offsets into raw.
func CanonicalizeNested(raw []byte, mode Mode, enclosing int) ([]byte, error) {
	return canonicalize(raw, mode, max(enclosing, 0))
}

func canonicalize(raw []byte, mode Mode, enclosing int) ([]byte, error) {
	var maxDepth int
	switch mode {
	case Full:
		maxDepth = MaxDepthFull
	case Strict:
		maxDepth = MaxDepth
	default:
		return nil, fmt.Errorf("jcs: unknown mode %v", mode)
	}
	s := scratchPool.Get().(*scratch)
	defer s.put()
	p := parser{in: raw, strict: mode == Strict, maxDepth: maxDepth, enclosing: enclosing,
		members: s.members[:0], keys: s.keys[:0], objs: s.objs[:0], spans: s.spans[:0]}
	p.out = make([]byte, 0, len(raw)+8)
	err := p.document()
	var out []byte
	if err == nil {
		out = p.assemble()
	}
	s.members, s.keys, s.objs, s.spans = p.members, p.keys, p.objs, p.spans
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scratch holds the parser's working stacks between calls. They never hold pointers into the
// input or the output (offsets only), so reusing them leaks nothing between documents; the
// canonical output itself is always a fresh slice owned by the caller.
type scratch struct {
	members []member
	keys    []byte
	objs    []object
	spans   []span
}

// maxPooled bounds the stacks kept for reuse (in elements), so one hostile document does not
// pin a large buffer for the life of the process.
const maxPooled = 1 << 12

// scratchPool reuses parser stacks: the enforce hot path canonicalizes every call's arguments
// twice (tool-use-binding §16 MUST 1), and allocating the stacks each time doubled the garbage
// per call. A sync.Pool is the one piece of package-level state here; it holds no data that
// outlives a call.
var scratchPool = sync.Pool{New: func() any { return &scratch{members: make([]member, 0, 16)} }}

func (s *scratch) put() {
	if cap(s.members) > maxPooled || cap(s.keys) > 16*maxPooled || cap(s.objs) > maxPooled || cap(s.spans) > maxPooled {
		return
	}
	scratchPool.Put(s)
}

// Digest returns the envelope-04 §6.2 string form of the SHA-256 of
// canonical: "sha256:" followed by 64 lowercase hexadecimal characters. It
// does not check that canonical is canonical.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var buf [len(DigestPrefix) + 2*sha256.Size]byte
	copy(buf[:], DigestPrefix)
	hex.Encode(buf[len(DigestPrefix):], sum[:])
	return string(buf[:])
}

// CanonicalDigest canonicalizes raw and returns the canonical bytes and
// their Digest.
func CanonicalDigest(raw []byte, mode Mode) (canonical []byte, digest string, err error) {
	canonical, err = Canonicalize(raw, mode)
	if err != nil {
		return nil, "", err
	}
	return canonical, Digest(canonical), nil
}

// IsDigest reports whether s is exactly "sha256:" followed by 64 lowercase
// hexadecimal characters (envelope-04 §6.2). Upper-case hex is not a digest.
func IsDigest(s string) bool {
	if len(s) != len(DigestPrefix)+2*sha256.Size || s[:len(DigestPrefix)] != DigestPrefix {
		return false
	}
	for i := len(DigestPrefix); i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
