package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/actgate/actgate/internal/jcs"
)

// Code is a stable reason for refusing to build an action.
type Code string

const (
	// CodeEmptyTool: the tool name is empty.
	CodeEmptyTool Code = "ACTION_EMPTY_TOOL"
	// CodeInvalidTool: the tool name is not well-formed UTF-8 (or holds a
	// surrogate), so it has no canonical JSON form.
	CodeInvalidTool Code = "ACTION_INVALID_TOOL"
	// CodeArgsNotObject: the arguments are empty or are JSON other than an
	// object. EP-TOOL-CALL-BINDING-v1 binds "the complete argument object";
	// a call without arguments must be bound with {}.
	CodeArgsNotObject Code = "ACTION_ARGS_NOT_OBJECT"
	// CodeMalformedArgs: the arguments are not canonicalizable JSON in any
	// mode (syntax, invalid UTF-8, duplicate member names, unpaired
	// surrogates, non-finite numbers, nesting beyond jcs.MaxDepthFull).
	CodeMalformedArgs Code = "ACTION_MALFORMED_ARGS"
	// CodeOutOfProfile: jcs.Strict only; the arguments are valid RFC 8785
	// input (jcs.Full accepts them) but fall outside the strict profile of
	// envelope-04 §6.3: a number that is not an integer of magnitude at most
	// 2^53-1, or nesting deeper than 64 counting the action object itself.
	CodeOutOfProfile Code = "ACTION_OUT_OF_PROFILE"
)

// Error is a refusal to build an action. Err, when set, is the underlying
// *jcs.Error, whose Offset is a byte offset into the arguments (or into the
// tool name for CodeInvalidTool). Like jcs errors, the message never
// quotes the arguments, so it is safe to log; it does name the tool.
type Error struct {
	Code Code
	Tool string
	Err  error
}

func (e *Error) Error() string {
	var msg string
	switch e.Code {
	case CodeEmptyTool:
		msg = "tool name is empty"
	case CodeInvalidTool:
		msg = "tool name is not well-formed UTF-8"
	case CodeArgsNotObject:
		msg = "arguments must be a JSON object (bind a call without arguments as {})"
	case CodeMalformedArgs:
		msg = "arguments are not canonicalizable JSON (RFC 8785 over I-JSON)"
	case CodeOutOfProfile:
		msg = "arguments are outside the strict canonicalization profile (envelope-04 §6.3), " +
			"so this action cannot be put in front of a human for a binding decision (envelope-04 §5.6); " +
			"encode non-integer numbers and integers beyond ±(2^53-1) as strings (e.g. \"1.5\") " +
			"and keep nesting within 63 levels inside args"
	default:
		msg = "invalid action"
	}
	s := string(e.Code) + ": "
	if e.Code != CodeEmptyTool && e.Code != CodeInvalidTool {
		s += "tool " + strconv.Quote(e.Tool) + ": "
	}
	s += msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

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

// Material returns the (non-canonical) action object
// {"tool":<tool>,"args":<args>}: the material shape of
// EP-TOOL-CALL-BINDING-v1 (docs/architecture.md "The action an option authorises").
// The tool name is written as a JSON string; args is copied verbatim and is
// not validated, so the result is for display and interchange only. Bind
// with Canonical or Digest, which validate args as one JSON object: a
// verbatim args of `1,"x":2` would otherwise smuggle in a member.
func Material(tool string, args json.RawMessage) []byte {
	b := make([]byte, 0, len(tool)+len(args)+24)
	b = append(b, `{"tool":`...)
	b = appendLooseString(b, tool)
	b = append(b, `,"args":`...)
	b = append(b, args...)
	return append(b, '}')
}

// appendLooseString writes s as a JSON string, escaping what JSON requires
// and copying every other byte as is, so that invalid UTF-8 in a tool name
// reaches Canonical (and is rejected there) instead of being replaced.
func appendLooseString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Canonical returns the RFC 8785 canonical bytes of the action object
// {"tool":tool,"args":args}, that is {"args":<canonical args>,"tool":<tool>}.
// args must be exactly one JSON object (surrounding whitespace allowed).
// The bytes equal jcs.Canonicalize(Material(tool, args), mode) whenever
// args is one JSON value; errors carry offsets into args.
func Canonical(tool string, args json.RawMessage, mode jcs.Mode) ([]byte, error) {
	if tool == "" {
		return nil, &Error{Code: CodeEmptyTool}
	}
	name, err := jcs.AppendString(nil, tool)
	if err != nil {
		return nil, &Error{Code: CodeInvalidTool, Tool: tool, Err: err}
	}
	if len(bytes.TrimLeft(args, " \t\r\n")) == 0 {
		return nil, &Error{Code: CodeArgsNotObject, Tool: tool}
	}
	// The args value sits one container (the action object) deep, and the
	// depth bound counts it (envelope-04 §6.3, §5.6).
	cargs, err := jcs.CanonicalizeNested(args, mode, 1)
	if err != nil {
		code, err := classify(args, mode, err)
		return nil, &Error{Code: code, Tool: tool, Err: err}
	}
	if cargs[0] != '{' {
		return nil, &Error{Code: CodeArgsNotObject, Tool: tool}
	}
	return appendAction(make([]byte, 0, len(cargs)+len(name)+18), cargs, name), nil
}

// appendAction appends the canonical action object {"args":<cargs>,"tool":<name>} (members in
// JCS order) to dst; cargs are canonical arguments and name the tool as a JSON string.
func appendAction(dst, cargs, name []byte) []byte {
	dst = append(dst, `{"args":`...)
	dst = append(dst, cargs...)
	dst = append(dst, `,"tool":`...)
	dst = append(dst, name...)
	return append(dst, '}')
}

// classify decides whether a Strict rejection is only a profile bound
// (jcs.Full accepts the arguments) or a malformation in every mode, in
// which case the Full error, which names that malformation, is returned.
func classify(args []byte, mode jcs.Mode, err error) (Code, error) {
	if mode != jcs.Strict {
		return CodeMalformedArgs, err
	}
	switch code, _ := jcs.CodeOf(err); code {
	case jcs.CodeNumberOutOfProfile, jcs.CodeDepthExceeded:
		if _, fullErr := jcs.CanonicalizeNested(args, jcs.Full, 1); fullErr != nil {
			return CodeMalformedArgs, fullErr
		}
		return CodeOutOfProfile, err
	}
	return CodeMalformedArgs, err
}

// Digest returns the digest of the canonical action object: "sha256:" and
// 64 lowercase hex (envelope-04 §6.2), the value of an option's
// action_digest (§5.6).
func Digest(tool string, args json.RawMessage, mode jcs.Mode) (string, error) {
	c, err := Canonical(tool, args, mode)
	if err != nil {
		return "", err
	}
	return jcs.Digest(c), nil
}

// DigestOfCanonical is Digest for arguments that are already the output of
// jcs.CanonicalizeNested(args, mode, 1) (or of jcs.Canonicalize in Full mode)
// for an object: the enforce hot path canonicalizes a call's arguments once
// and binds the same bytes, instead of canonicalizing them a second time.
// The arguments are not re-checked beyond being an object; a caller holding
// anything but canonicalizer output must use Digest. The action object is
// assembled on the stack when it fits, so a small call costs no allocation
// beyond the digest string.
func DigestOfCanonical(tool string, canonArgs []byte) (string, error) {
	if tool == "" {
		return "", &Error{Code: CodeEmptyTool}
	}
	if len(canonArgs) < 2 || canonArgs[0] != '{' || canonArgs[len(canonArgs)-1] != '}' {
		return "", &Error{Code: CodeArgsNotObject, Tool: tool}
	}
	var nameBuf [128]byte
	name, err := jcs.AppendString(nameBuf[:0], tool)
	if err != nil {
		return "", &Error{Code: CodeInvalidTool, Tool: tool, Err: err}
	}
	var stack [1024]byte
	return jcs.Digest(appendAction(stack[:0], canonArgs, name)), nil
}
