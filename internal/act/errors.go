package act

import (
	"errors"
	"strconv"

	"github.com/actgate/actgate/internal/jcs"
)

// Code is a stable, machine-readable reason an input was refused. Callers branch on it; the
// Detail of an Error is for humans and may change.
type Code string

// Error codes. Every refusal carries exactly one; none of them ever comes with an act.
const (
	// CodeInputTooLarge: the input exceeds the mapping context's byte bound.
	CodeInputTooLarge Code = "ACT_INPUT_TOO_LARGE"
	// CodeInputInvalid: the vendor envelope is not I-JSON: bad syntax, invalid UTF-8, duplicate
	// member names (which two JSON parsers could resolve differently: tool confusion, T6),
	// unpaired surrogates, non-finite numbers.
	CodeInputInvalid Code = "ACT_INPUT_INVALID"
	// CodeShapeInvalid: well-formed JSON that is not the vendor shape: a required member is
	// missing or of the wrong JSON type, or a member that would reach the tool unbound is present.
	CodeShapeInvalid Code = "ACT_SHAPE_INVALID"
	// CodeNotToolCall: a well-formed item that is not an invocable tool call of this shape
	// (e.g. an MCP method other than tools/call — tools/list is discovery and MUST NOT issue
	// authority, tool-use-binding §8 — or an unsupported tool-call type).
	CodeNotToolCall Code = "ACT_NOT_TOOL_CALL"
	// CodePartialBlock: the block is not finalized (streaming, truncated, status not completed);
	// tool-use-binding §9: a partial block MUST remain non-effective.
	CodePartialBlock Code = "ACT_PARTIAL_BLOCK"
	// CodeArgumentsInvalid: the arguments are not a JSON object that canonicalizes under
	// RFC 8785 (for OpenAI, the function.arguments string does not parse; §7, §9).
	CodeArgumentsInvalid Code = "ACT_ARGUMENTS_INVALID"
	// CodeToolNameInvalid: the tool name is empty, too long, or holds control, format or space
	// characters (tool-name confusion, tool-use-binding §24 T6).
	CodeToolNameInvalid Code = "ACT_TOOL_NAME_INVALID"
	// CodeDuplicateVendorID: two calls in one message carry the same vendor id, so a result
	// could not be attributed to one of them; both stay non-effective.
	CodeDuplicateVendorID Code = "ACT_DUPLICATE_VENDOR_ID"
	// CodeServerIdentityMissing: an MCP call without a server identity; tool-use-binding §8
	// requires it in destination or tool_endpoint.
	CodeServerIdentityMissing Code = "ACT_SERVER_IDENTITY_MISSING"
	// CodeContextInvalid: the host's MappingContext is incomplete (no session, sink, clock...).
	CodeContextInvalid Code = "ACT_CONTEXT_INVALID"
	// CodeIDGeneration: the random source failed; no id, no act.
	CodeIDGeneration Code = "ACT_ID_GENERATION_FAILED"
	// CodeIDInvalid: a candidate_act_id that is not of this issuer's form.
	CodeIDInvalid Code = "ACT_ID_INVALID"
	// CodeIDSessionMismatch: a candidate_act_id issued for another session (or by another key).
	CodeIDSessionMismatch Code = "ACT_ID_SESSION_MISMATCH"
	// CodeUnknownMember: ParseCandidateAct met a member the schema does not allow
	// (additionalProperties: false, tool-use-binding §10).
	CodeUnknownMember Code = "ACT_UNKNOWN_MEMBER"
	// CodeMissingMember: ParseCandidateAct did not find a required member (§10 "required").
	CodeMissingMember Code = "ACT_MISSING_MEMBER"
	// CodeSchemaType: a member has the wrong JSON type, or is null.
	CodeSchemaType Code = "ACT_SCHEMA_TYPE"
	// CodeEnumInvalid: act_type, tool_protocol, consequence_class or another enum outside its set.
	CodeEnumInvalid Code = "ACT_ENUM_INVALID"
	// CodeFieldInvalid: a member is present with a value Validate refuses.
	CodeFieldInvalid Code = "ACT_FIELD_INVALID"
	// CodeDigestMismatch: live arguments do not hash to the act's arguments digest (§16 MUST 2).
	CodeDigestMismatch Code = "ACT_DIGEST_MISMATCH"
)

// Error is a refusal: a stable Code, the member it concerns (a JSON path such as
// "tool.tool_id" or "tool_calls[2].function.arguments", may be empty) and a human-readable
// Detail. Error() never contains argument values: canonicalizer errors are reported by their
// code and byte offset only, because their detail quotes the input (logs carry digests, not
// raw arguments: tool-use-binding §29).
type Error struct {
	Code   Code
	Field  string
	Detail string
	Err    error
}

func (e *Error) Error() string {
	s := string(e.Code)
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the Code of the first *Error in err's chain.
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return "", false
}

func newErr(code Code, field, detail string) *Error {
	return &Error{Code: code, Field: field, Detail: detail}
}

// jcsErr wraps a canonicalizer error without its input excerpt.
func jcsErr(code Code, field string, err error) *Error {
	var je *jcs.Error
	if errors.As(err, &je) {
		return &Error{Code: code, Field: field, Detail: string(je.Code) + " at byte " + strconv.Itoa(je.Offset), Err: err}
	}
	return &Error{Code: code, Field: field, Detail: "canonicalization failed", Err: err}
}
