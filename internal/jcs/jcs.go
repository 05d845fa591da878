package jcs

import (
	"errors"
	"fmt"
)

// Code is a stable error code for a rejected input.
type Code string

// Error codes returned by Canonicalize.
const (
	CodeSyntax             Code = "JCS_SYNTAX"
	CodeInvalidUTF8        Code = "JCS_INVALID_UTF8"
	CodeDuplicateMember    Code = "JCS_DUPLICATE_MEMBER"
	CodeUnpairedSurrogate  Code = "JCS_UNPAIRED_SURROGATE"
	CodeNumberOutOfProfile Code = "JCS_NUMBER_OUT_OF_PROFILE"
	CodeDepthExceeded      Code = "JCS_DEPTH_EXCEEDED"
	CodeNumberNotFinite    Code = "JCS_NUMBER_NOT_FINITE"
)

// Error is a rejection with a stable code and the byte offset in the input.
type Error struct {
	Code   Code
	Offset int
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: offset %d: %s", e.Code, e.Offset, e.Detail)
}

// CodeOf returns the Code of the first *Error in err's chain.
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return "", false
}

// Mode selects full RFC 8785 or the strict profile.
type Mode int

const (
	Full Mode = iota
	Strict
)

// MaxDepth is the maximum nesting depth (root counts as 1).
const MaxDepth = 64

// Canonicalize returns the canonical form of raw.
func Canonicalize(raw []byte, mode Mode) ([]byte, error) {
	return nil, &Error{Code: CodeSyntax, Detail: "not implemented yet"}
}

// Digest returns "sha256:" + lowercase hex of the SHA-256 of canonical.
func Digest(canonical []byte) string { return "" }

// CanonicalDigest canonicalizes raw and returns the canonical bytes and their digest.
func CanonicalDigest(raw []byte, mode Mode) ([]byte, string, error) {
	c, err := Canonicalize(raw, mode)
	if err != nil {
		return nil, "", err
	}
	return c, Digest(c), nil
}

// IsDigest reports whether s is exactly "sha256:" + 64 lowercase hex.
func IsDigest(s string) bool { return false }
