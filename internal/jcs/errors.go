package jcs

import (
	"errors"
	"strconv"
)

// Code is a stable, machine-readable reason for rejecting an input. Callers
// branch on it; the Detail text of an Error is for humans and may change.
type Code string

// Error codes returned by Canonicalize. Every rejection carries exactly one.
const (
	// CodeSyntax: the input is not JSON text (RFC 8259): bad token, trailing
	// data, a leading byte order mark, empty input, an invalid escape.
	CodeSyntax Code = "JCS_SYNTAX"
	// CodeInvalidUTF8: a byte sequence that is not well-formed UTF-8
	// (RFC 8259 §8.1, RFC 3629).
	CodeInvalidUTF8 Code = "JCS_INVALID_UTF8"
	// CodeDuplicateMember: two member names of one object are equal after
	// escape decoding (envelope-04 §6.3; RFC 8785 §3.1 via I-JSON, RFC 7493 §2.3).
	CodeDuplicateMember Code = "JCS_DUPLICATE_MEMBER"
	// CodeUnpairedSurrogate: a string carries a UTF-16 surrogate without its
	// pair, either as a \u escape or as the (invalid) UTF-8 encoding of a
	// surrogate code point (envelope-04 §6.3; RFC 7493 §2.1).
	CodeUnpairedSurrogate Code = "JCS_UNPAIRED_SURROGATE"
	// CodeNumberOutOfProfile: Strict mode only; a number that is not an
	// integer or whose magnitude exceeds 2^53-1 (envelope-04 §6.3).
	CodeNumberOutOfProfile Code = "JCS_NUMBER_OUT_OF_PROFILE"
	// CodeDepthExceeded: containers nested deeper than the mode's bound
	// (MaxDepth in Strict, MaxDepthFull in Full; the root counts as 1).
	CodeDepthExceeded Code = "JCS_DEPTH_EXCEEDED"
	// CodeNumberNotFinite: Full mode; a number whose IEEE-754 double value is
	// infinite, e.g. 1e400 (RFC 8785 §3.2.2.3 forbids NaN and Infinity).
	CodeNumberNotFinite Code = "JCS_NUMBER_NOT_FINITE"
)

// Error is a rejected input: a stable Code, the byte Offset in the input at
// which the problem was found, and a human-readable Detail. Detail never
// quotes the input's member names, strings or numbers (at most the one or
// two bytes of a malformed token), so an error is safe to log where raw
// tool arguments must not go (docs/architecture.md "Privacy"); Offset locates the
// problem instead.
type Error struct {
	Code   Code
	Offset int
	Detail string
}

// Error formats as `JCS_DUPLICATE_MEMBER: offset 12: duplicate member name "a"`.
func (e *Error) Error() string {
	return string(e.Code) + ": offset " + strconv.Itoa(e.Offset) + ": " + e.Detail
}

// CodeOf returns the Code of the first *Error in err's chain.
func CodeOf(err error) (Code, bool) {
	if err == nil {
		return "", false // no errors.As: its target would escape on every successful call
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return "", false
}
