package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/jcs"
)

// ErrAmount marks a call whose amount cannot be read at a budget's pointer: the arguments are
// not a JSON object, the pointer names nothing, or the value is not a non-negative plain
// decimal (a JSON number without exponent, or a string in ParseDecimal's form).
var ErrAmount = errors.New("budget: amount")

// MaxArgumentBytes bounds the arguments Amount reads.
const MaxArgumentBytes = 4 << 20

// ParsePointer checks a budget's sum.pointer (RFC 6901, into the arguments object) and returns
// its reference tokens.
func ParsePointer(p string) ([]string, error) {
	return argmask.Parse(p)
}

// Amount reads the amount at pointer in args, a call's arguments as the agent sent them. The
// bytes are read as they are, never through a float: a JSON number keeps its literal text
// (1.10 is 1.1 exactly; 1e3 is refused, as are negative numbers), a string must be a plain
// decimal ("1000.00"). Duplicate member names are refused (RFC 8785 §3.1), so the amount the
// budget reads is the one the authority's digest binds.
func Amount(args []byte, pointer string) (Decimal, error) {
	toks, err := ParsePointer(pointer)
	if err != nil {
		return Decimal{}, fmt.Errorf("%w: %w", ErrAmount, err)
	}
	if len(args) > MaxArgumentBytes {
		return Decimal{}, fmt.Errorf("%w: arguments of %d bytes; the bound is %d", ErrAmount, len(args), MaxArgumentBytes)
	}
	if _, err := jcs.Canonicalize(args, jcs.Full); err != nil {
		return Decimal{}, fmt.Errorf("%w: arguments: %w", ErrAmount, err)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Decimal{}, fmt.Errorf("%w: arguments: %w", ErrAmount, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return Decimal{}, fmt.Errorf("%w: the arguments are not an object", ErrAmount)
	}
	for _, t := range toks {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return Decimal{}, fmt.Errorf("%w: %s names no argument", ErrAmount, pointer)
			}
			v = next
		case []any:
			n, ok := arrayIndex(t)
			if !ok || n >= len(c) {
				return Decimal{}, fmt.Errorf("%w: %s names no argument", ErrAmount, pointer)
			}
			v = c[n]
		default:
			return Decimal{}, fmt.Errorf("%w: %s names no argument", ErrAmount, pointer)
		}
	}
	switch x := v.(type) {
	case json.Number:
		return numberAmount(string(x), pointer)
	case string:
		d, err := ParseDecimal(x)
		if err != nil {
			return Decimal{}, fmt.Errorf("%w at %s: %w", ErrAmount, pointer, err)
		}
		return d, nil
	case nil:
		return Decimal{}, fmt.Errorf("%w at %s: null", ErrAmount, pointer)
	default:
		return Decimal{}, fmt.Errorf("%w at %s: a %T, not a number or decimal string", ErrAmount, pointer, v)
	}
}

// numberAmount reads a JSON number literal exactly.
func numberAmount(lit, pointer string) (Decimal, error) {
	switch {
	case strings.HasPrefix(lit, "-"):
		return Decimal{}, fmt.Errorf("%w at %s: negative", ErrAmount, pointer)
	case strings.ContainsAny(lit, "eE"):
		return Decimal{}, fmt.Errorf("%w at %s: %s has an exponent; send a plain decimal", ErrAmount, pointer, lit)
	}
	d, err := ParseDecimal(lit)
	if err != nil {
		return Decimal{}, fmt.Errorf("%w at %s: %w", ErrAmount, pointer, err)
	}
	return d, nil
}

// arrayIndex reads an RFC 6901 array index: "0" or digits without a leading zero.
func arrayIndex(t string) (int, bool) {
	if t == "" || len(t) > 9 || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
