package reconcile

import (
	"errors"
	"fmt"
)

// Sentinel errors of Ask; callers branch on them (Classify maps them to findings).
var (
	// ErrConfig: the endpoint cannot be asked at all (bad URL, plain http refused, no token, a
	// MAC key shorter than MinMACKeyBytes). No query was sent.
	ErrConfig = errors.New("reconcile: endpoint not usable")
	// ErrUnreachable: no answer: connection, timeout, TLS failure other than verification, or an
	// HTTP status other than 200.
	ErrUnreachable = errors.New("reconcile: endpoint unreachable")
	// ErrUnauthenticated: the server's certificate did not verify, or the answer's MAC is
	// missing or wrong.
	ErrUnauthenticated = errors.New("reconcile: answer not authenticated")
	// ErrMalformed: an authenticated answer that is not a well-formed reconciliation answer.
	ErrMalformed = errors.New("reconcile: malformed answer")
	// ErrReplayed: an authenticated answer that carries another query's nonce.
	ErrReplayed = errors.New("reconcile: answer to another query")
)

// Code is the stable code of an Ask error.
type Code string

// Codes, one per sentinel.
const (
	CodeConfig          Code = "RECONCILE_CONFIG"
	CodeUnreachable     Code = "RECONCILE_UNREACHABLE"
	CodeUnauthenticated Code = "RECONCILE_UNAUTHENTICATED"
	CodeMalformed       Code = "RECONCILE_MALFORMED"
	CodeReplayed        Code = "RECONCILE_REPLAYED"
)

// CodeOf returns the code of the first sentinel err wraps, or "" if none.
func CodeOf(err error) Code {
	for _, c := range []struct {
		code Code
		err  error
	}{
		{CodeConfig, ErrConfig},
		{CodeUnreachable, ErrUnreachable},
		{CodeUnauthenticated, ErrUnauthenticated},
		{CodeMalformed, ErrMalformed},
		{CodeReplayed, ErrReplayed},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
