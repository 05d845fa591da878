package authority

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on (the sink maps them to EF codes). Every error this package or
// a Store returns wraps exactly one of them; a field mismatch is a *MismatchError that unwraps to
// its sentinel.
var (
	// ErrNotFound: no authority with that ID (in that namespace).
	ErrNotFound = errors.New("authority: not found")
	// ErrConsumed: the authority was already consumed; single use (tool-use-binding §22 T-C).
	ErrConsumed = errors.New("authority: already consumed")
	// ErrExpired: the authority's expiry has passed.
	ErrExpired = errors.New("authority: expired")
	// ErrNotYetValid: the authority was issued in the future beyond the allowed clock skew.
	ErrNotYetValid = errors.New("authority: not yet valid")
	// ErrScopeMismatch: act ID, tool or namespace differ from what the sink expects.
	ErrScopeMismatch = errors.New("authority: scope mismatch")
	// ErrArgumentsMismatch: arguments or action digest differ from the live call's (§16 MUST 2).
	ErrArgumentsMismatch = errors.New("authority: arguments mismatch")
	// ErrSinkMismatch: the authority names another sink (§16 MUST 3).
	ErrSinkMismatch = errors.New("authority: sink mismatch")
	// ErrDestinationMismatch: the authority names another destination (§22 T-D).
	ErrDestinationMismatch = errors.New("authority: destination mismatch")
	// ErrEpochMismatch: the authority was issued under another policy epoch (§16 MUST 5).
	ErrEpochMismatch = errors.New("authority: policy epoch mismatch")
	// ErrBadSignature: the signature does not verify under a trusted key, or the key is unknown.
	ErrBadSignature = errors.New("authority: bad signature")
	// ErrInvalid: a malformed authority or binding (including an expected binding the sink built).
	ErrInvalid = errors.New("authority: invalid")
	// ErrAlreadyIssued: an authority with the same ID (same act and binding) already exists.
	ErrAlreadyIssued = errors.New("authority: already issued")
	// ErrStoreUnavailable: the store failed, timed out, was closed or answered ambiguously.
	// Nothing may be concluded from it except "deny" (docs/architecture.md "Fail closed").
	ErrStoreUnavailable = errors.New("authority: store unavailable")
)

// Code is the stable code of an authority error.
type Code string

// Codes, one per sentinel.
const (
	CodeNotFound            Code = "AUTHORITY_NOT_FOUND"
	CodeConsumed            Code = "AUTHORITY_CONSUMED"
	CodeExpired             Code = "AUTHORITY_EXPIRED"
	CodeNotYetValid         Code = "AUTHORITY_NOT_YET_VALID"
	CodeScopeMismatch       Code = "AUTHORITY_SCOPE_MISMATCH"
	CodeArgumentsMismatch   Code = "AUTHORITY_ARGUMENTS_MISMATCH"
	CodeSinkMismatch        Code = "AUTHORITY_SINK_MISMATCH"
	CodeDestinationMismatch Code = "AUTHORITY_DESTINATION_MISMATCH"
	CodeEpochMismatch       Code = "AUTHORITY_EPOCH_MISMATCH"
	CodeBadSignature        Code = "AUTHORITY_BAD_SIGNATURE"
	CodeInvalid             Code = "AUTHORITY_INVALID"
	CodeAlreadyIssued       Code = "AUTHORITY_ALREADY_ISSUED"
	CodeStoreUnavailable    Code = "AUTHORITY_STORE_UNAVAILABLE"
)

var codeSentinels = []struct {
	code Code
	err  error
}{
	{CodeNotFound, ErrNotFound},
	{CodeConsumed, ErrConsumed},
	{CodeExpired, ErrExpired},
	{CodeNotYetValid, ErrNotYetValid},
	{CodeScopeMismatch, ErrScopeMismatch},
	{CodeArgumentsMismatch, ErrArgumentsMismatch},
	{CodeSinkMismatch, ErrSinkMismatch},
	{CodeDestinationMismatch, ErrDestinationMismatch},
	{CodeEpochMismatch, ErrEpochMismatch},
	{CodeBadSignature, ErrBadSignature},
	{CodeInvalid, ErrInvalid},
	{CodeAlreadyIssued, ErrAlreadyIssued},
	{CodeStoreUnavailable, ErrStoreUnavailable},
}

// CodeOf returns the code of the first authority sentinel err wraps, or "" if none.
// ErrStoreUnavailable is checked first: an error that is both a store failure and something
// else is reported as the failure.
func CodeOf(err error) Code {
	if errors.Is(err, ErrStoreUnavailable) {
		return CodeStoreUnavailable
	}
	for _, cs := range codeSentinels {
		if errors.Is(err, cs.err) {
			return cs.code
		}
	}
	return ""
}

// ErrorOf rebuilds an error that wraps the sentinel of code and reads as msg; it carries
// authority errors across a process boundary. An unknown code gives an ErrStoreUnavailable
// error: a peer's error that cannot be classified is a store failure, never success.
func ErrorOf(code Code, msg string) error {
	for _, cs := range codeSentinels {
		if cs.code == code {
			return &codedError{msg: msg, sentinel: cs.err}
		}
	}
	return fmt.Errorf("%w: unknown error code %q: %s", ErrStoreUnavailable, code, msg)
}

type codedError struct {
	msg      string
	sentinel error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.sentinel }

// MismatchError reports which bound field differs between an authority and the binding the sink
// expects. The values shown are identifiers and digests, never raw arguments.
type MismatchError struct {
	Field    string // JSON name of the field, e.g. "sink_id"
	Got      string // the authority's value
	Expected string // the sink's value
	Err      error  // the sentinel: ErrScopeMismatch, ErrArgumentsMismatch, ...
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%v: %s is %q, expected %q", e.Err, e.Field, clip(e.Got), clip(e.Expected))
}

func (e *MismatchError) Unwrap() error { return e.Err }

func clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
