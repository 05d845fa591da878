package journal

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on. Every error the package or a Journal returns wraps one.
var (
	// ErrNotFound: no record for the operation, authority or act.
	ErrNotFound = errors.New("journal: record not found")
	// ErrExists: the operation ID or the authority already has a record.
	ErrExists = errors.New("journal: record exists")
	// ErrInvalidTransition: the lifecycle does not allow this move from the record's state.
	ErrInvalidTransition = errors.New("journal: invalid transition")
	// ErrEvidenceRequired: EXECUTED or FAILED without authoritative evidence.
	ErrEvidenceRequired = errors.New("journal: authoritative evidence required")
	// ErrReconciliationRefused: unauthenticated or mismatched reconciliation; the record is unchanged.
	ErrReconciliationRefused = errors.New("journal: reconciliation refused")
	// ErrInvalidRecord: a malformed record or outcome.
	ErrInvalidRecord = errors.New("journal: invalid record")
	// ErrUnavailable: the store failed, timed out or was closed; nothing is known to be written.
	ErrUnavailable = errors.New("journal: store unavailable")
)

// Code is the stable code of a journal error.
type Code string

// Codes, one per sentinel.
const (
	CodeNotFound              Code = "JOURNAL_NOT_FOUND"
	CodeExists                Code = "JOURNAL_EXISTS"
	CodeInvalidTransition     Code = "JOURNAL_INVALID_TRANSITION"
	CodeEvidenceRequired      Code = "JOURNAL_EVIDENCE_REQUIRED"
	CodeReconciliationRefused Code = "JOURNAL_RECONCILIATION_REFUSED"
	CodeInvalidRecord         Code = "JOURNAL_INVALID_RECORD"
	CodeUnavailable           Code = "JOURNAL_UNAVAILABLE"
)

var codeSentinels = []struct {
	code Code
	err  error
}{
	{CodeNotFound, ErrNotFound},
	{CodeExists, ErrExists},
	{CodeInvalidTransition, ErrInvalidTransition},
	{CodeEvidenceRequired, ErrEvidenceRequired},
	{CodeReconciliationRefused, ErrReconciliationRefused},
	{CodeInvalidRecord, ErrInvalidRecord},
	{CodeUnavailable, ErrUnavailable},
}

// CodeOf returns the code of the first journal sentinel err wraps, or "" if none.
func CodeOf(err error) Code {
	for _, cs := range codeSentinels {
		if errors.Is(err, cs.err) {
			return cs.code
		}
	}
	return ""
}

// ErrorOf rebuilds an error that wraps the sentinel of code and reads as msg; it carries journal
// errors across a process boundary. An unknown code gives an ErrUnavailable error: a peer's error
// that cannot be classified is treated as a store failure, never as success.
func ErrorOf(code Code, msg string) error {
	for _, cs := range codeSentinels {
		if cs.code == code {
			return &codedError{msg: msg, sentinel: cs.err}
		}
	}
	return fmt.Errorf("%w: unknown error code %q: %s", ErrUnavailable, code, msg)
}

type codedError struct {
	msg      string
	sentinel error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.sentinel }
