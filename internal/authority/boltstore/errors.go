package boltstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/journal"
)

// ErrClosed is the cause of the unavailability error returned after Close.
var ErrClosed = errors.New("boltstore: closed")

// unavailableError is a store failure: it matches both authority.ErrStoreUnavailable and
// journal.ErrUnavailable (every operation of this store touches the one file both sides share),
// and its cause (context.DeadlineExceeded, a bbolt or socket error).
type unavailableError struct{ cause error }

func unavailable(cause error) error { return &unavailableError{cause: cause} }

func unavailablef(format string, args ...any) error {
	return &unavailableError{cause: fmt.Errorf(format, args...)}
}

func (e *unavailableError) Error() string { return "boltstore: store unavailable: " + e.cause.Error() }

func (e *unavailableError) Unwrap() []error {
	return []error{authority.ErrStoreUnavailable, journal.ErrUnavailable, e.cause}
}

// encodeError fills resp with err's codes and text.
func encodeError(resp *wire.Response, err error) {
	if err == nil {
		return
	}
	resp.Failed = true
	resp.AuthorityCode = authority.CodeOf(err)
	resp.JournalCode = journal.CodeOf(err)
	resp.DeadlineReached = errors.Is(err, context.DeadlineExceeded)
	switch {
	case errors.Is(err, budget.ErrExceeded):
		resp.BudgetCode = "exceeded"
	case errors.Is(err, budget.ErrLimit):
		resp.BudgetCode = "limit"
	}
	resp.Message = err.Error()
}

// decodeError rebuilds the error a peer encoded. An error with no code the client recognises is
// a store failure: fail closed.
func decodeError(resp *wire.Response) error {
	if !resp.Failed {
		return nil
	}
	switch resp.BudgetCode {
	case "exceeded":
		return &peerError{msg: resp.Message, errs: []error{budget.ErrExceeded}}
	case "limit":
		return &peerError{msg: resp.Message, errs: []error{budget.ErrLimit}}
	}
	if resp.AuthorityCode == authority.CodeStoreUnavailable || resp.JournalCode == journal.CodeUnavailable ||
		(resp.AuthorityCode == "" && resp.JournalCode == "") {
		cause := errors.New(resp.Message)
		if resp.DeadlineReached {
			cause = fmt.Errorf("%w: %s", context.DeadlineExceeded, resp.Message)
		}
		return unavailable(fmt.Errorf("owner: %w", cause))
	}
	var errs []error
	if resp.AuthorityCode != "" {
		errs = append(errs, authority.ErrorOf(resp.AuthorityCode, resp.Message))
	}
	if resp.JournalCode != "" {
		errs = append(errs, journal.ErrorOf(resp.JournalCode, resp.Message))
	}
	return &peerError{msg: resp.Message, errs: errs}
}

type peerError struct {
	msg  string
	errs []error
}

func (e *peerError) Error() string   { return e.msg }
func (e *peerError) Unwrap() []error { return e.errs }
