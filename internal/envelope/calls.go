package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/jcs"
)

// Call is the exact tool call an option authorises, as the gate that computed the option's
// action_digest holds it: server, destination, tool and arguments. A principal's surface shows
// it beside the option's label and reasoning, marked as the gate's, because those are the
// agent's words and the call is what runs ("what you see is what you authorise"). It never
// comes from the envelope, whose slots carry no arguments.
type Call struct {
	// Server is the protected server's name; Destination the upstream the gate contacts.
	Server      string `json:"server"`
	Destination string `json:"destination,omitempty"`
	// Tool is the tool name.
	Tool string `json:"tool"`
	// Args is the canonical (RFC 8785) argument object, with the value at each Masked pointer
	// replaced by argmask.Placeholder.
	Args json.RawMessage `json:"args"`
	// Masked lists the RFC 6901 pointers whose values policy masks on principal surfaces,
	// sorted. The action digest binds their real values; a surface cannot recompute it.
	Masked []string `json:"masked,omitempty"`
}

// Sentinel errors of CheckCalls.
var (
	// ErrCallsMismatch: the calls do not belong to the envelope's options (their number differs,
	// or an unmasked call does not hash to its option's action_digest). A surface shows no
	// decision then.
	ErrCallsMismatch = errors.New("envelope: the calls do not match the options")
)

// MaxCallsBytes bounds the calls of one moment as a surface receives them (four options of at
// most MaxActionBytes each, plus names).
const MaxCallsBytes = 4*MaxActionBytes + 4096

// Verified reports whether a surface can recompute the option's digest from this call: true
// exactly when nothing is masked.
func (c Call) Verified() bool { return len(c.Masked) == 0 }

// CheckCalls checks that calls are the calls of env's options, in order: one per option, each
// with a valid tool name and an argument object, and each unmasked call hashing to its option's
// action_digest (action.Digest over {"tool","args"} in the strict profile, envelope-04 §6.2).
// A masked call must hold the placeholder at every masked pointer; its digest cannot be
// recomputed here, and surfaces say so.
func CheckCalls(env *Envelope, calls []Call) error {
	if env == nil {
		return fmt.Errorf("%w: no envelope", ErrCallsMismatch)
	}
	if len(calls) != env.NumOptions() {
		return fmt.Errorf("%w: %d calls for %d options", ErrCallsMismatch, len(calls), env.NumOptions())
	}
	for i, c := range calls {
		o, _ := env.Option(i)
		if err := checkToolName(c.Tool); err != nil {
			return fmt.Errorf("%w: option %d: %v", ErrCallsMismatch, i+1, err)
		}
		if !isObjectText(c.Args) {
			return fmt.Errorf("%w: option %d: the arguments are not an object", ErrCallsMismatch, i+1)
		}
		if !c.Verified() {
			if !slices.IsSorted(c.Masked) || len(c.Masked) > argmask.MaxPointers {
				return fmt.Errorf("%w: option %d: the masked pointers are not a sorted list of at most %d", ErrCallsMismatch, i+1, argmask.MaxPointers)
			}
			again, hit, err := argmask.Apply(c.Args, c.Masked)
			if err != nil || !slices.Equal(hit, c.Masked) || string(again) != string(mustCanon(c.Args)) {
				return fmt.Errorf("%w: option %d: a masked pointer does not hold the placeholder", ErrCallsMismatch, i+1)
			}
			continue
		}
		d, err := action.Digest(c.Tool, c.Args, jcs.Strict)
		if err != nil {
			return fmt.Errorf("%w: option %d: %s", ErrCallsMismatch, i+1, actionReason(err))
		}
		if d != o.ActionDigest {
			return fmt.Errorf("%w: option %d: the call hashes to %s, not to the option's action_digest %s", ErrCallsMismatch, i+1, d, o.ActionDigest)
		}
	}
	return nil
}

func mustCanon(b []byte) []byte {
	c, err := jcs.Canonicalize(b, jcs.Strict)
	if err != nil {
		return nil
	}
	return c
}

// DefaultMaxCallBytes bounds the rendered arguments of one call on a text surface, and
// MaxCallLineBytes one argument's line: a longer value is cut there and marked, so the
// arguments after it are still shown.
const (
	DefaultMaxCallBytes = 2048
	MaxCallLineBytes    = 256
)

// CallLines renders a call's arguments for a text surface: one line per top-level member,
// "name = value" with the value as compact JSON, sorted as the canonical form is, and a masked
// member as "name = ••• masked by policy". Control, line-break, bidi and other invisible
// format characters in names and values are shown as \uXXXX escapes, so an argument cannot
// draw lines, reorder the screen or hide a character. A line over MaxCallLineBytes is cut and
// marked in place; when the lines exceed maxBytes (<= 0: DefaultMaxCallBytes) the rendering
// stops at the last whole line that fits with a line saying how many arguments were left out.
// omitted > 0 is how many bytes were not shown; a surface must then say so, never cut
// silently.
func CallLines(c Call, maxBytes int) (lines []string, omitted int) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxCallBytes
	}
	var members []struct {
		k string
		v json.RawMessage
	}
	dec := json.NewDecoder(strings.NewReader(string(c.Args)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return []string{visible(string(c.Args))}, 0
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		members = append(members, struct {
			k string
			v json.RawMessage
		}{k, v})
	}
	if len(members) == 0 {
		return []string{"(no arguments)"}, 0
	}
	masked := map[string]bool{}
	for _, p := range c.Masked {
		masked[p] = true
	}
	lineCap := min(maxBytes, MaxCallLineBytes)
	used := 0
	for i, m := range members {
		name := visible(m.k)
		if !isPlainName(m.k) {
			name = visible(quoteJSON(m.k))
		}
		val := visible(string(m.v))
		if masked["/"+strings.ReplaceAll(strings.ReplaceAll(m.k, "~", "~0"), "/", "~1")] {
			val = "••• masked by policy"
		}
		line := name + " = " + val
		shown := min(len(line), lineCap)
		if i > 0 && used+shown > maxBytes {
			for _, r := range members[i:] {
				omitted += len(r.k) + len(r.v)
			}
			lines = append(lines, fmt.Sprintf("…[%d more arguments not shown]", len(members)-i))
			return lines, omitted
		}
		if shown < len(line) {
			cut := shown
			for cut > 0 && !utf8.RuneStart(line[cut]) {
				cut--
			}
			omitted += len(line) - cut
			line = line[:cut] + fmt.Sprintf(" …[%d more bytes not shown]", len(line)-cut)
		}
		used += shown
		lines = append(lines, line)
	}
	return lines, omitted
}

// MaskedLines names the masked pointers of c below the top level (a masked top-level member
// already shows as masked in CallLines), for a surface to list under the call.
func MaskedLines(c Call) []string {
	var out []string
	for _, p := range c.Masked {
		if strings.Count(p, "/") > 1 {
			out = append(out, visible(p))
		}
	}
	return out
}

// Where names where a call runs: "TOOL on server SERVER (DESTINATION)".
func (c Call) Where() string {
	s := visible(c.Tool) + " on server " + visible(c.Server)
	if c.Destination != "" {
		s += " (" + visible(c.Destination) + ")"
	}
	return s
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c == '.' || c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c))) {
			return false
		}
	}
	return true
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// visible escapes, as \uXXXX, every rune a terminal or page would not show as itself: the
// envelope profile's forbidden runes, other format characters (zero-width space and joiners,
// the byte-order mark) and invalid UTF-8, so the shown text names every character the gate
// holds.
func visible(s string) string {
	var b strings.Builder
	for i, c := range s {
		if c == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				fmt.Fprintf(&b, "\\x%02x", s[i])
				continue
			}
		}
		if ForbiddenRune(c) || unicode.Is(unicode.Cf, c) || c == '\u115F' || c == '\u1160' || c == '\u3164' || c == '\uFFA0' {
			if c > 0xFFFF {
				fmt.Fprintf(&b, "\\U%08X", c)
			} else {
				fmt.Fprintf(&b, "\\u%04X", c)
			}
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Visible is the escaping CallLines applies, for surfaces that show a call's arguments whole
// (the web console).
func Visible(s string) string { return visible(s) }

// isObjectText reports whether valid JSON text is an object.
func isObjectText(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
