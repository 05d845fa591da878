package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/actgate/actgate/internal/jcs"
)

// ErrNoEnvelope reports that a tool result carries no binding_moment member: there is no
// binding moment, and the surface renders the conventional payload (envelope-04 §8.1).
var ErrNoEnvelope = errors.New("envelope: tool result carries no binding_moment member")

// topLevel is what locate found at the top level of a document.
type topLevel struct {
	isObject bool
	count    int             // how many members were named binding_moment after unescaping
	member   json.RawMessage // raw bytes of the (first) binding_moment value
}

// locate scans the top level of raw for binding_moment members without decoding the
// rest, keeping the member's raw bytes so the strict profile sees them unaltered. Keys are
// compared after escape decoding, so "binding\u005fmoment" is the same member (§6.3).
func locate(raw []byte) (topLevel, error) {
	var tl topLevel
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return tl, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return tl, nil
	}
	tl.isObject = true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return tl, err
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return tl, err
		}
		if key == MemberBindingMoment {
			tl.count++
			if tl.count == 1 {
				tl.member = val
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return tl, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return tl, errors.New("trailing data after the top-level value")
	}
	return tl, nil
}

// ParseDocument reads either a bare envelope or a tool result whose top-level
// binding_moment member holds one (envelope-04 §8.1), as Parse reads a bare one: the
// specification and the actgate profile. A document is a tool result exactly when it is an
// object with a binding_moment member; problem paths then begin "$.binding_moment". A
// binding_moment member that occurs twice is malformed.
func ParseDocument(raw []byte) (*Envelope, error) {
	return parseDocument(raw, true)
}

// ParseDocumentSpec is ParseDocument against envelope-04 alone, as ParseSpec.
func ParseDocumentSpec(raw []byte) (*Envelope, error) {
	return parseDocument(raw, false)
}

func parseDocument(raw []byte, profile bool) (*Envelope, error) {
	if len(raw) > MaxDocumentBytes {
		return parseAt(raw, "$", profile) // reports CodeTooLarge
	}
	tl, err := locate(raw)
	if err != nil || tl.count == 0 {
		return parseAt(raw, "$", profile)
	}
	return parseMember(tl, profile)
}

func parseMember(tl topLevel, profile bool) (*Envelope, error) {
	path := child("$", MemberBindingMoment)
	if tl.count > 1 {
		ps := &problems{}
		ps.add(Code(jcs.CodeDuplicateMember), path, "the tool result carries %d binding_moment members (§6.3)", tl.count)
		return nil, ps.err("envelope")
	}
	// Syntax, UTF-8 and duplicate checks of the whole document come first, so a tool
	// result that hides a second copy of anything is not read as carrying an envelope.
	return parseAt(tl.member, path, profile)
}

// FromToolResult detects the binding_moment member of an MCP tool result (envelope-04 §8.1)
// and returns the validated envelope together with the fallback text: the tool result's
// conventional payload, which a surface renders instead of an envelope it does not render
// as a decision (§9.3, §12.8). It reads the member as Parse does, for a surface. It returns
//
//   - env, fallback, nil when the envelope is well formed and within the actgate profile;
//   - nil, fallback, ErrNoEnvelope when there is no binding_moment member (or raw is not a
//     JSON object at all);
//   - nil, fallback, *ValidationError when the member is present but malformed, or well
//     formed but outside the actgate profile ([ValidationError.ProfileOnly]): the binding
//     moment is discarded and never rendered as a decision.
func FromToolResult(raw []byte) (env *Envelope, fallbackText string, err error) {
	if len(raw) > MaxDocumentBytes {
		ps := &problems{}
		ps.add(CodeTooLarge, "$", "is %d bytes; the bound is %d", len(raw), MaxDocumentBytes)
		return nil, truncateText(string(raw)), ps.err("tool result")
	}
	tl, lerr := locate(raw)
	if lerr != nil || !tl.isObject {
		if lerr != nil && bytes.Contains(raw, []byte(MemberBindingMoment)) {
			// Unparseable and possibly carrying an envelope: say why it was discarded.
			ps := &problems{}
			ps.add(Code(jcs.CodeSyntax), "$", "the tool result is not valid JSON: %v", lerr)
			return nil, string(raw), ps.err("tool result")
		}
		return nil, string(raw), ErrNoEnvelope
	}
	fallback := conventionalPayload(raw)
	if tl.count == 0 {
		return nil, fallback, ErrNoEnvelope
	}
	env, err = parseMember(tl, true)
	if err != nil {
		return nil, fallback, err
	}
	return env, fallback, nil
}

// conventionalPayload renders the non-envelope part of a tool result as text: the text
// blocks of an MCP content array when there are any, else the remaining members as
// indented JSON (§9.3: "the conventional payload is always present").
func conventionalPayload(raw []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return string(raw)
	}
	delete(m, MemberBindingMoment)
	if c, ok := m["content"]; ok {
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(c, &blocks) == nil && len(blocks) > 0 {
			var parts []string
			for _, b := range blocks {
				var typ, text string
				_ = json.Unmarshal(b["type"], &typ)
				if typ == "text" && json.Unmarshal(b["text"], &text) == nil {
					parts = append(parts, text)
					continue
				}
				if typ == "" {
					typ = "unknown"
				}
				parts = append(parts, "["+typ+" content]")
			}
			return strings.Join(parts, "\n")
		}
	}
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		var v bytes.Buffer
		if json.Indent(&v, m[k], "  ", "  ") != nil {
			v.Reset()
			v.Write(m[k])
		}
		b.WriteString("  ")
		b.Write(kb)
		b.WriteString(": ")
		b.Write(v.Bytes())
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}")
	return b.String()
}

func truncateText(s string) string {
	const max = 4096
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
