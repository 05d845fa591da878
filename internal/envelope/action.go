package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

// Action is the action an option authorises, as the verifier holds it before performing it
// (envelope-04 §5.6, §7.3). envelope-04 does not define the action: it is whatever JSON value
// the profile that carries it defines, and its digest is computed as in §6.2 over the
// action itself, sha256 over its JCS canonical form, under the bounds of §6.3. An Action
// holds those canonical bytes. The actions actgate gates are tool calls,
// {"tool": NAME, "args": ARGS} (EP-TOOL-CALL-BINDING-v1), built by ToolCall; the zero
// Action is no action and authorises nothing.
type Action struct {
	canonical []byte
	digest    string
}

// Digest returns the action's digest, "sha256:" + 64 lowercase hex: the value an option's
// action_digest is compared with (§7.3). It is empty for the zero Action.
func (a Action) Digest() string { return a.digest }

// Canonical returns a copy of the action's canonical bytes under the strict profile.
func (a Action) Canonical() []byte { return append([]byte(nil), a.canonical...) }

// ParseAction reads an action from untrusted bytes: any JSON value, canonicalized under the
// strict profile on the raw bytes (§6.3: duplicates, unpaired surrogates, out-of-profile
// numbers and excessive nesting are rejected, never repaired). Its shape is not checked:
// the digest binds whatever the action is (§5.6). A rejection is a *ValidationError.
func ParseAction(raw []byte) (Action, error) {
	if len(raw) > MaxActionBytes {
		ps := &problems{}
		ps.add(CodeActTooLarge, "$", "is %d bytes; the bound is %d", len(raw), MaxActionBytes)
		return Action{}, ps.err("action")
	}
	canonical, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return Action{}, jcsProblem("action", "$", err)
	}
	return Action{canonical: canonical, digest: jcs.Digest(canonical)}, nil
}

// ToolCall builds the action of a tool call, {"tool": tool, "args": args}, with args read
// from untrusted bytes under the strict profile: the digest is
// action.Digest(tool, args, jcs.Strict). tool must name an MCP tool (CodeActToolName) and
// args must be one JSON object (CodeActWrongType); a rejection is a *ValidationError whose
// paths are those of the action object ("$.tool", "$.args").
func ToolCall(tool string, args json.RawMessage) (Action, error) {
	ps := &problems{}
	if len(args) > MaxActionBytes {
		ps.add(CodeActTooLarge, "$.args", "is %d bytes; the bound is %d", len(args), MaxActionBytes)
		return Action{}, ps.err("action")
	}
	a, err := toolCall(tool, args)
	if err == nil {
		return a, nil
	}
	var nameErr toolNameError
	var ae *action.Error
	switch {
	case errors.As(err, &nameErr):
		ps.add(CodeActToolName, "$.tool", "%v", err)
	case errors.As(err, &ae) && ae.Code == action.CodeArgsNotObject:
		ps.add(CodeActWrongType, "$.args", "must be one JSON object; use {} for none")
	case errors.As(err, &ae) && ae.Err != nil:
		return Action{}, jcsProblem("action", "$.args", ae.Err)
	default:
		ps.add(CodeActWrongType, "$.args", "%s", actionReason(err))
	}
	return Action{}, ps.err("action")
}

// toolCall is ToolCall returning the refusal of checkToolName or internal/action as is.
func toolCall(tool string, args json.RawMessage) (Action, error) {
	if err := checkToolName(tool); err != nil {
		return Action{}, err
	}
	canonical, err := action.Canonical(tool, args, jcs.Strict)
	if err != nil {
		return Action{}, err
	}
	return Action{canonical: canonical, digest: jcs.Digest(canonical)}, nil
}

// toolNameError is a refusal of checkToolName.
type toolNameError struct{ msg string }

func (e toolNameError) Error() string { return e.msg }

// checkToolName refuses a tool name that cannot name an MCP tool unambiguously.
func checkToolName(name string) error {
	switch {
	case name == "":
		return toolNameError{"the tool name is empty"}
	case len(name) > MaxToolNameBytes:
		return toolNameError{fmt.Sprintf("the tool name is %d bytes; the bound is %d", len(name), MaxToolNameBytes)}
	case !utf8.ValidString(name):
		return toolNameError{"the tool name is not valid UTF-8"}
	}
	for _, c := range name {
		if unicode.IsSpace(c) || ForbiddenRune(c) {
			return toolNameError{fmt.Sprintf("the tool name contains the character %U", c)}
		}
	}
	return nil
}

// actionReason names why internal/action refused an action: its code, and the jcs code
// underneath when there is one (e.g. "ACTION_OUT_OF_PROFILE/JCS_NUMBER_OUT_OF_PROFILE").
func actionReason(err error) string {
	var parts []string
	if c, ok := action.CodeOf(err); ok {
		parts = append(parts, string(c))
	}
	if c, ok := jcs.CodeOf(err); ok {
		parts = append(parts, string(c))
	}
	if len(parts) == 0 {
		return err.Error()
	}
	return strings.Join(parts, "/")
}
