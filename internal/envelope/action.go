package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

// Action is the action an option authorises: the tool call {"tool": NAME, "args": ARGS}
// of docs/architecture.md "The action an option authorises" (EP-TOOL-CALL-BINDING-v1 material).
type Action struct {
	Tool string
	// Args is the canonical JSON text of the argument object.
	Args json.RawMessage
}

// Digest returns action.Digest(a.Tool, a.Args, jcs.Strict): the digest an option's
// action_digest is compared with (envelope-04 §7.3).
func (a Action) Digest() (string, error) {
	return action.Digest(a.Tool, a.Args, jcs.Strict)
}

// ParseAction reads an action object from untrusted bytes: strict profile on the raw bytes
// (docs/architecture.md "Digests": actions bound to a human decision), then exactly the members
// tool (a non-empty tool name) and args (an object).
func ParseAction(raw []byte) (Action, error) {
	ps := &problems{}
	if len(raw) > MaxActionBytes {
		ps.add(CodeActTooLarge, "$", "is %d bytes; the bound is %d", len(raw), MaxActionBytes)
		return Action{}, ps.err("action")
	}
	canonical, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return Action{}, jcsProblem("action", "$", err)
	}
	v, err := decodeCanonical(canonical)
	if err != nil {
		return Action{}, internalProblem("action", "$", err)
	}
	w := walker{ps: ps, codes: actCodes()}
	m, ok := w.object(v, "$", []string{"tool", "args"}, nil)
	if !ok {
		return Action{}, ps.err("action")
	}
	var a Action
	if s, ok := w.str(m, "tool", "$"); ok {
		if err := checkToolName(s); err != nil {
			ps.add(CodeActToolName, "$.tool", "%v", err)
		}
		a.Tool = s
	}
	if av, present := m["args"]; present {
		if _, ok := av.(map[string]any); !ok {
			ps.add(CodeActWrongType, "$.args", "must be an object, not %s", jsonType(av))
		}
	}
	if err := ps.err("action"); err != nil {
		return Action{}, err
	}
	// Take args from the canonical bytes: already canonical, no duplicates, in profile.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &members); err != nil {
		return Action{}, internalProblem("action", "$", err)
	}
	a.Args = members["args"]
	return a, nil
}

// checkToolName refuses a tool name that cannot name an MCP tool unambiguously.
func checkToolName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the tool name is empty")
	case len(name) > MaxToolNameBytes:
		return fmt.Errorf("the tool name is %d bytes; the bound is %d", len(name), MaxToolNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("the tool name is not valid UTF-8")
	}
	for _, c := range name {
		if unicode.IsSpace(c) || ForbiddenRune(c) {
			return fmt.Errorf("the tool name contains the character %U", c)
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

// isObjectText reports whether valid JSON text is an object.
func isObjectText(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
