package aeb

import (
	"errors"
	"fmt"
)

// ErrInvalidInput is matched (errors.Is) by every *InputError: the input is malformed, out of
// bounds or self-contradictory, so no AEB decision exists for it and the caller must refuse.
var ErrInvalidInput = errors.New("aeb: invalid input")

// ErrorCode is the stable code of an InputError.
type ErrorCode string

const (
	CodeInvalidJSON              ErrorCode = "invalid_json"
	CodeMaxDocumentBytesExceeded ErrorCode = "max_document_bytes_exceeded"
	CodeMaxDepthExceeded         ErrorCode = "max_depth_exceeded"
	CodeDuplicateKey             ErrorCode = "duplicate_key"
	CodeUnknownKey               ErrorCode = "unknown_key"
	CodeMissingKey               ErrorCode = "missing_key"
	CodeInvalidObject            ErrorCode = "invalid_object"
	CodeInvalidArray             ErrorCode = "invalid_array"
	CodeInvalidString            ErrorCode = "invalid_string"
	CodeInvalidBoolean           ErrorCode = "invalid_boolean"
	CodeInvalidInteger           ErrorCode = "invalid_integer"
	CodeInvalidInstant           ErrorCode = "invalid_instant"
	CodeInvalidEnum              ErrorCode = "invalid_enum"
	CodeInvalidDigest            ErrorCode = "invalid_digest"
	CodeInvalidCAID              ErrorCode = "invalid_caid"
	CodeInvalidVersion           ErrorCode = "invalid_version"
	CodeDuplicateValue           ErrorCode = "duplicate_value"
	CodeInvalidCombination       ErrorCode = "invalid_combination"
)

// InputError reports why an input has no AEB decision: a stable Code and the JSON path of the
// offending value ("$.operation.requirements[0].minimum" for a decoded case, a Go-side path such
// as "operation.requirements[0].minimum" for the step functions).
type InputError struct {
	Code ErrorCode
	Path string
	// Err is the underlying decoder error, if any.
	Err error
}

func (e *InputError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("aeb: %s: %s: %v", e.Path, e.Code, e.Err)
	}
	return fmt.Sprintf("aeb: %s: %s", e.Path, e.Code)
}

// Unwrap returns the underlying decoder error, if any.
func (e *InputError) Unwrap() error { return e.Err }

// Is makes every InputError match ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

func inputErr(code ErrorCode, path string) *InputError { return &InputError{Code: code, Path: path} }
