package envelope

import (
	"errors"
	"fmt"
	"strings"

	"github.com/actgate/actgate/internal/jcs"
)

// Code is a stable identifier for one reason a document was rejected. Codes are part of
// the public CLI contract (each stderr line starts with one) and never change meaning.
// Codes of internal/jcs (JCS_*) are passed through unchanged as Code(jcs.Code).
type Code string

// Envelope codes (envelope-04 §4, §5, §6.2). An envelope that draws any of these codes
// (or a JCS_* code) is malformed under envelope-04 and has no digest.
const (
	// CodeTooLarge: the document exceeds MaxDocumentBytes. envelope-04 sets no size; this is
	// actgate's read bound on untrusted bytes, applied before anything is parsed, so an
	// envelope beyond it is neither validated nor digested.
	CodeTooLarge Code = "ENV_TOO_LARGE"
	// CodeUnknownMember: a member not defined by envelope-04 §4/§5.9 (§4 malformed cases).
	CodeUnknownMember Code = "ENV_UNKNOWN_MEMBER"
	// CodeMissingMember: a REQUIRED member is absent (§4, §5.6, §5.7, §5.8).
	CodeMissingMember Code = "ENV_MISSING_MEMBER"
	// CodeWrongType: a member has the wrong JSON type (§4).
	CodeWrongType Code = "ENV_WRONG_TYPE"
	// CodeOptionCount: question.options has fewer than 2 or more than 4 entries (§5.6).
	CodeOptionCount Code = "ENV_OPTION_COUNT"
	// CodeRecommendedIdx: recommended_idx is negative or not below len(options) (§5.7).
	CodeRecommendedIdx Code = "ENV_RECOMMENDED_IDX"
	// CodeActionDigestForm: an action_digest is not "sha256:" + 64 lowercase hex (§5.6, §6.2).
	CodeActionDigestForm Code = "ENV_ACTION_DIGEST_FORM"
	// CodeInternal: the decoded envelope did not reproduce its own canonical bytes. It
	// indicates a bug, and the envelope is refused (fail closed).
	CodeInternal Code = "ENV_INTERNAL"
)

// Codes of the actgate profile: rules actgate applies to an envelope it renders or sends
// (Parse, ParseDocument, FromToolResult, Build, every Renderer), on top of envelope-04. An
// envelope refused only with these codes is well formed under envelope-04: ParseSpec accepts
// it and digests it, and [ValidationError.ProfileOnly] reports true. docs/api.md lists them.
const (
	// CodeStringEmpty: a slot string, or a present meta member, is empty or only white
	// space, so the principal would be shown a blank slot, and a present but empty meta
	// member could be confused with an absent one.
	CodeStringEmpty Code = "ENV_STRING_EMPTY"
	// CodeStringTooLong: a slot string exceeds its bound (MaxTextRunes, MaxLabelRunes,
	// MaxDecisionClassRunes), so the decision would not fit a screen.
	CodeStringTooLong Code = "ENV_STRING_TOO_LONG"
	// CodeStringControl: a slot string carries a control, line-break or bidi character
	// (ForbiddenRune), so it could draw lines of its own or reorder its neighbours and spoof
	// the rendered decision (§5.1, §5.5 and §5.6 describe single sentences and lines).
	CodeStringControl Code = "ENV_STRING_CONTROL"
	// CodeArrayLength: findings or recommendations holds more than MaxFindings or
	// MaxRecommendations entries. Any number, zero included, is well formed (§5.2 and §5.3
	// recommend 3–6 and 2–4); the profile refuses only lists too long to show.
	CodeArrayLength Code = "ENV_ARRAY_LENGTH"
	// CodeDuplicateAction: two options carry the same action_digest, so selecting either
	// authorises the same act although their labels differ.
	CodeDuplicateAction Code = "ENV_DUPLICATE_ACTION"
	// CodeDuplicateLabel: two options carry the same label and cannot be told apart.
	CodeDuplicateLabel Code = "ENV_DUPLICATE_LABEL"
)

// CodeActionNotBindable: Build could not digest an option's tool call under the strict
// profile (§5.6, §6.3), so it cannot be bound to a human decision and no envelope is built.
const CodeActionNotBindable Code = "ENV_ACTION_NOT_BINDABLE"

// profileCodes are the codes of the actgate profile, envelope and resolution.
var profileCodes = map[Code]bool{
	CodeStringEmpty: true, CodeStringTooLong: true, CodeStringControl: true, CodeArrayLength: true,
	CodeDuplicateAction: true, CodeDuplicateLabel: true, CodeResAnswer: true,
}

// Profile reports whether c is a rule of the actgate profile rather than of envelope-04:
// a document refused only with such codes is well formed, and actgate refuses to render or
// send it.
func (c Code) Profile() bool { return profileCodes[c] }

// Resolution codes (envelope-04 §7.3, §12.5, §12.6).
const (
	// CodeResTooLarge: the resolution exceeds MaxResolutionBytes (actgate's read bound).
	CodeResTooLarge Code = "RES_TOO_LARGE"
	// CodeResUnknownMember: a member not defined by §7.3.
	CodeResUnknownMember Code = "RES_UNKNOWN_MEMBER"
	// CodeResMissingMember: envelope_digest, resolution, or the member its kind requires is absent.
	CodeResMissingMember Code = "RES_MISSING_MEMBER"
	// CodeResWrongType: a member has the wrong JSON type.
	CodeResWrongType Code = "RES_WRONG_TYPE"
	// CodeResKind: resolution is not one of option, answer, question, declined.
	CodeResKind Code = "RES_KIND"
	// CodeResMemberNotAllowed: option_idx or answer present for a kind that forbids it (§7.3 "MUST be absent").
	CodeResMemberNotAllowed Code = "RES_MEMBER_NOT_ALLOWED"
	// CodeResDigestForm: envelope_digest is not of the §6.2 form.
	CodeResDigestForm Code = "RES_ENVELOPE_DIGEST_FORM"
	// CodeResOptionIdx: option_idx is negative, or out of range for the envelope it names.
	CodeResOptionIdx Code = "RES_OPTION_IDX"
	// CodeResAnswer: answer is empty, longer than MaxAnswerRunes, or carries control
	// characters other than tab and line breaks. envelope-04 §7.3 accepts any string: this is
	// the actgate profile, applied where a principal's answer is accepted and relayed
	// (ParseResolution), not by ParseResolutionSpec.
	CodeResAnswer Code = "RES_ANSWER"
	// CodeResHatchClosed: an answer or question resolution of an envelope whose free_text or
	// dialogue hatch is false (§5.8: the emitter removed that veto path; a surface does not
	// offer it, and a resolution through it is not one the envelope allows).
	CodeResHatchClosed Code = "RES_HATCH_CLOSED"
	// CodeResEnvelopeMismatch: envelope_digest does not name the envelope held (§7.3, §12.5).
	CodeResEnvelopeMismatch Code = "RES_ENVELOPE_MISMATCH"
	// CodeResUnknownEnvelope: envelope_digest names no envelope this registry emitted (§7.3, §12.5).
	CodeResUnknownEnvelope Code = "RES_UNKNOWN_ENVELOPE"
	// CodeResAlreadyResolved: the named envelope was already resolved; a replay (§12.5).
	CodeResAlreadyResolved Code = "RES_ALREADY_RESOLVED"
	// CodeResExpired: the named envelope expired before it was resolved (actgate profile).
	CodeResExpired Code = "RES_ENVELOPE_EXPIRED"
	// CodeResWrongPrincipal: the resolver is not the principal the envelope was routed to (§12.4).
	CodeResWrongPrincipal Code = "RES_WRONG_PRINCIPAL"
	// CodeResNoPrincipal: a resolution was presented without the principal who made it.
	CodeResNoPrincipal Code = "RES_NO_PRINCIPAL"
	// CodeResNotAuthority: a well-formed answer, question or declined resolution; it
	// authorises no action (§7.3).
	CodeResNotAuthority Code = "RES_NOT_AUTHORITY"
	// CodeResActionMismatch: the recomputed digest of the action about to run differs from
	// the selected option's action_digest (§7.3, §12.6).
	CodeResActionMismatch Code = "RES_ACTION_MISMATCH"
	// CodeResActionNotBindable: the tool call about to run cannot be digested under the
	// strict profile (§5.6, §6.3), so no human decision can authorise it.
	CodeResActionNotBindable Code = "RES_ACTION_NOT_BINDABLE"
)

// Action codes: an action read by ParseAction (any JSON value, envelope-04 §5.6) or a tool
// call {"tool": NAME, "args": ARGS} built by ToolCall.
const (
	// CodeActTooLarge: the action exceeds MaxActionBytes (actgate's read bound).
	CodeActTooLarge Code = "ACT_TOO_LARGE"
	// CodeActWrongType: a tool call's arguments are not a JSON object.
	CodeActWrongType Code = "ACT_WRONG_TYPE"
	// CodeActToolName: a tool call's name is empty, too long, not UTF-8, or carries white
	// space or a control character.
	CodeActToolName Code = "ACT_TOOL_NAME"
)

// Problem is one reason a document was rejected: a stable Code, the JSON path of the
// offending value ("$" is the document root) and a human-readable Message. Messages never
// echo slot content, only member names, counts and bounds.
type Problem struct {
	Code    Code   `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String formats the problem as one line beginning with its code, the form the CLI prints.
func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s", p.Code, p.Path, p.Message)
}

// ValidationError lists every reason a document was rejected. When the rejection came
// from internal/jcs, Unwrap returns the *jcs.Error so jcs.CodeOf still works.
type ValidationError struct {
	// What names what was rejected: "envelope", "resolution", "action", "tool result" or
	// "authority".
	What     string
	Problems []Problem
	cause    error
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.ProfileOnly() {
		fmt.Fprintf(&b, "%s refused by the actgate profile: ", e.What)
	} else {
		fmt.Fprintf(&b, "%s rejected: ", e.What)
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// ProfileOnly reports whether every problem is a rule of the actgate profile
// ([Code.Profile]): the document is well formed under envelope-04, and actgate refuses to
// render or send it.
func (e *ValidationError) ProfileOnly() bool {
	if len(e.Problems) == 0 {
		return false
	}
	for _, p := range e.Problems {
		if !p.Code.Profile() {
			return false
		}
	}
	return true
}

// Unwrap returns the underlying parse error, if any.
func (e *ValidationError) Unwrap() error { return e.cause }

// Codes returns the code of every problem in order.
func (e *ValidationError) Codes() []Code {
	out := make([]Code, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Code
	}
	return out
}

// ProblemsOf returns the problems of the first *ValidationError in err's chain, or nil.
func ProblemsOf(err error) []Problem {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	return nil
}

// HasCode reports whether err carries a problem with code c.
func HasCode(err error, c Code) bool {
	for _, p := range ProblemsOf(err) {
		if p.Code == c {
			return true
		}
	}
	return false
}

// problems accumulates Problems during one validation pass.
type problems struct {
	list []Problem
}

func (ps *problems) add(c Code, path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Code: c, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) err(what string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{What: what, Problems: ps.list}
}

// jcsProblem converts a rejection by internal/jcs into a ValidationError carrying the jcs
// code unchanged (envelope-04 §6.3: rejected, never repaired).
func jcsProblem(what, path string, err error) error {
	code, ok := jcs.CodeOf(err)
	if !ok {
		code = jcs.CodeSyntax
	}
	msg := err.Error()
	var je *jcs.Error
	if errors.As(err, &je) {
		msg = fmt.Sprintf("byte offset %d: %s", je.Offset, je.Detail)
	}
	return &ValidationError{
		What:     what,
		Problems: []Problem{{Code: Code(code), Path: path, Message: msg}},
		cause:    err,
	}
}
