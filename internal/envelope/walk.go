package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// decodeCanonical decodes bytes already accepted by jcs.Canonicalize into the generic JSON
// data model (map[string]any, []any, string, json.Number, bool, nil). Duplicates,
// surrogates and numbers were rejected on the raw bytes, so nothing is lost here.
func decodeCanonical(canonical []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// memberCodes names the codes a walker reports for structural problems, so one walker
// serves envelopes and resolutions.
type memberCodes struct {
	unknown, missing, wrongType Code
}

func envCodes() memberCodes {
	return memberCodes{CodeUnknownMember, CodeMissingMember, CodeWrongType}
}

func resCodes() memberCodes {
	return memberCodes{CodeResUnknownMember, CodeResMissingMember, CodeResWrongType}
}

// walker checks a decoded value against a fixed grammar, collecting every problem. With
// profile false it checks the grammar of the specification only; with profile true it also
// applies the actgate profile (text rules, list bounds, duplicate options).
type walker struct {
	ps      *problems
	codes   memberCodes
	profile bool
}

// object checks that v is an object whose member set is within required ∪ optional and
// includes every required member. It returns the object when v is one.
func (w walker) object(v any, path string, required, optional []string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		w.ps.add(w.codes.wrongType, path, "must be an object, not %s", jsonType(v))
		return nil, false
	}
	known := make(map[string]bool, len(required)+len(optional))
	for _, n := range required {
		known[n] = true
	}
	for _, n := range optional {
		known[n] = true
	}
	var unknown []string
	for n := range m {
		if !known[n] {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	for _, n := range unknown {
		w.ps.add(w.codes.unknown, child(path, n), "member %s is not defined here", quoteName(n))
	}
	for _, n := range required {
		if _, ok := m[n]; !ok {
			w.ps.add(w.codes.missing, child(path, n), "required member is absent")
		}
	}
	return m, true
}

// str returns member name of m as a string, reporting a wrong type. ok is false when the
// member is absent or not a string.
func (w walker) str(m map[string]any, name, path string) (string, bool) {
	v, present := m[name]
	if !present {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		w.ps.add(w.codes.wrongType, child(path, name), "must be a string, not %s", jsonType(v))
	}
	return s, ok
}

func (w walker) boolean(m map[string]any, name, path string) (bool, bool) {
	v, present := m[name]
	if !present {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		w.ps.add(w.codes.wrongType, child(path, name), "must be a boolean, not %s", jsonType(v))
	}
	return b, ok
}

func (w walker) array(m map[string]any, name, path string) ([]any, bool) {
	v, present := m[name]
	if !present {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		w.ps.add(w.codes.wrongType, child(path, name), "must be an array, not %s", jsonType(v))
	}
	return a, ok
}

// integer returns member name as an int64. The strict profile already limited every
// number to an integer of magnitude at most 2^53-1, so json.Number parses exactly.
func (w walker) integer(m map[string]any, name, path string) (int64, bool) {
	v, present := m[name]
	if !present {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		w.ps.add(w.codes.wrongType, child(path, name), "must be an integer, not %s", jsonType(v))
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		// Unreachable under the strict profile; refuse rather than guess.
		w.ps.add(w.codes.wrongType, child(path, name), "must be an integer")
		return 0, false
	}
	return i, true
}

// textRule says what a slot string may hold.
type textRule struct {
	maxRunes   int
	multiline  bool // tab, LF and CR allowed (free-form answers only)
	emptyCode  Code
	longCode   Code
	ctrlCode   Code
	emptyIsBad bool
}

func slotText(max int) textRule {
	return textRule{maxRunes: max, emptyCode: CodeStringEmpty, longCode: CodeStringTooLong, ctrlCode: CodeStringControl, emptyIsBad: true}
}

// text checks a slot string against rule r of the actgate profile (nothing when the
// walker checks the specification only): it must hold something other than white space,
// fit its bound, and carry no control, line-break or bidi embedding/override/isolate
// character, so the rendered decision cannot be spoofed by a string that draws its own
// lines or reorders its neighbours.
func (w walker) text(s, path string, r textRule) {
	if !w.profile {
		return
	}
	if r.emptyIsBad && strings.TrimSpace(s) == "" {
		w.ps.add(r.emptyCode, path, "must not be empty")
		return
	}
	if n := utf8.RuneCountInString(s); n > r.maxRunes {
		w.ps.add(r.longCode, path, "is %d characters long; the bound is %d", n, r.maxRunes)
	}
	for _, c := range s {
		if r.multiline && (c == '\t' || c == '\n' || c == '\r') {
			continue
		}
		if ForbiddenRune(c) {
			w.ps.add(r.ctrlCode, path, "contains the control or formatting character %U", c)
			return
		}
	}
}

// ForbiddenRune reports control characters (C0, DEL, C1), the Unicode line and paragraph
// separators, and the bidi embedding, override and isolate controls: the runes the actgate
// profile refuses in an envelope's text slots (CodeStringControl), and what every surface
// that prints text from an envelope or the API server replaces.
func ForbiddenRune(c rune) bool {
	switch {
	case unicode.IsControl(c):
		return true
	case c == '\u2028' || c == '\u2029':
		return true
	case c >= '\u202A' && c <= '\u202E':
		return true
	case c >= '\u2066' && c <= '\u2069':
		return true
	}
	return false
}

// child appends member name to a JSON path: $.a.b for identifier-like names, $["x y"]
// otherwise, so a hostile member name cannot forge a path.
func child(path, name string) string {
	if isIdent(name) {
		return path + "." + name
	}
	return path + "[" + quoteName(name) + "]"
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func isIdent(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// quoteName quotes a member name for a message, cut to 64 characters.
func quoteName(n string) string {
	if utf8.RuneCountInString(n) > 64 {
		r := []rune(n)
		n = string(r[:64]) + "…"
	}
	return strconv.Quote(n)
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
