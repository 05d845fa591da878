package argmask

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/actgate/actgate/internal/jcs"
)

// Bounds of a mask pointer and of the masks of one rule.
const (
	// MaxPointerBytes bounds one pointer.
	MaxPointerBytes = 256
	// MaxPointerTokens bounds the reference tokens of one pointer (the strict profile's
	// nesting bound is 64; a useful mask is far shallower).
	MaxPointerTokens = 16
	// MaxPointers bounds the pointers of one rule.
	MaxPointers = 16
)

// Placeholder is the JSON string a masked value is replaced with. A surface knows a value was
// masked from the call's list of masked pointers, never from this text, so an argument whose
// real value happens to equal it is not mistaken for a masked one.
const Placeholder = "••• masked by policy •••"

// ErrPointer marks an invalid pointer.
var ErrPointer = errors.New("argmask: invalid pointer")

// Parse splits an RFC 6901 JSON Pointer into its reference tokens, decoding ~1 and ~0. The
// pointer must name a value inside the argument object: the empty pointer (the whole object)
// is refused, and so are the array append token "-", empty tokens, invalid escapes and
// pointers over the bounds.
func Parse(p string) ([]string, error) {
	switch {
	case p == "":
		return nil, fmt.Errorf("%w: empty (it would mask every argument; name the members to mask)", ErrPointer)
	case len(p) > MaxPointerBytes:
		return nil, fmt.Errorf("%w: %d bytes; the bound is %d", ErrPointer, len(p), MaxPointerBytes)
	case p[0] != '/':
		return nil, fmt.Errorf("%w: %q does not start with \"/\" (RFC 6901)", ErrPointer, p)
	}
	raw := strings.Split(p[1:], "/")
	if len(raw) > MaxPointerTokens {
		return nil, fmt.Errorf("%w: %d tokens; the bound is %d", ErrPointer, len(raw), MaxPointerTokens)
	}
	out := make([]string, len(raw))
	for i, t := range raw {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("%w: %q has a \"~\" not followed by 0 or 1 (RFC 6901)", ErrPointer, p)
			}
		}
		switch t {
		case "":
			return nil, fmt.Errorf("%w: %q has an empty reference token", ErrPointer, p)
		case "-":
			return nil, fmt.Errorf("%w: %q uses \"-\", which names no existing value", ErrPointer, p)
		}
		out[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return out, nil
}

// Apply replaces the value at each pointer present in args (a JSON object inside the strict
// profile) with Placeholder. It returns the masked object in canonical form (RFC 8785) and the
// pointers that named a value, sorted and without duplicates; a pointer naming nothing in these
// arguments is not an error (an optional argument may be absent). With no pointer present the
// canonical form of args is returned unchanged.
func Apply(args json.RawMessage, pointers []string) (json.RawMessage, []string, error) {
	canon, err := jcs.Canonicalize(args, jcs.Strict)
	if err != nil {
		return nil, nil, fmt.Errorf("argmask: arguments: %w", err)
	}
	if len(pointers) == 0 {
		return canon, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, nil, fmt.Errorf("argmask: arguments: %w", err)
	}
	if _, ok := root.(map[string]any); !ok {
		return nil, nil, errors.New("argmask: the arguments are not an object")
	}
	var hit []string
	for _, p := range pointers {
		toks, err := Parse(p)
		if err != nil {
			return nil, nil, err
		}
		if mask(root, toks) {
			hit = append(hit, p)
		}
	}
	if len(hit) == 0 {
		return canon, nil, nil
	}
	slices.Sort(hit)
	hit = slices.Compact(hit)
	b, err := json.Marshal(root)
	if err != nil {
		return nil, nil, fmt.Errorf("argmask: re-encoding: %w", err)
	}
	out, err := jcs.Canonicalize(b, jcs.Strict)
	if err != nil {
		return nil, nil, fmt.Errorf("argmask: re-encoding: %w", err)
	}
	return out, hit, nil
}

// mask replaces the value toks names under v, reporting whether it exists.
func mask(v any, toks []string) bool {
	for i, t := range toks {
		last := i == len(toks)-1
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return false
			}
			if last {
				c[t] = Placeholder
				return true
			}
			v = next
		case []any:
			n, ok := arrayIndex(t)
			if !ok || n >= len(c) {
				return false
			}
			if last {
				c[n] = Placeholder
				return true
			}
			v = c[n]
		default:
			return false
		}
	}
	return false
}

// arrayIndex reads an RFC 6901 array index: "0" or digits without a leading zero.
func arrayIndex(t string) (int, bool) {
	if t == "" || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(t)
	return n, err == nil
}
