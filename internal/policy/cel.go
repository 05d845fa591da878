package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"

	"github.com/actgate/actgate/internal/jcs"
)

// CEL limits. Kubernetes gives one validation rule a runtime cost of 1,000,000; with cel-go
// v0.31.0 and cost tracking on, a comprehension step costs about 2 µs, so that budget is
// a third of a second of CPU per call on an idle core. Argument checks are comparisons costing
// tens of units, so CostLimit is a tenth of Kubernetes', enough for a comprehension over ~10^4
// list elements. The interrupt check lets a cancelled or timed-out context stop a long
// comprehension sooner (tool-use-binding §16 MUST 5: never allow on timeout).
const (
	// CostLimit is the runtime cost budget of one arguments[].expression evaluation; exceeding
	// it denies.
	CostLimit uint64 = 100_000
	// interruptEvery is how many comprehension iterations run between context checks.
	interruptEvery uint = 100
	// maxExpressionLen is the API's bound on arguments[].expression.
	maxExpressionLen = 4096
)

// newCELEnv is the one environment every argument expression is compiled in: the standard
// library, the strings extension, optional types (`args.?limit.orValue(0)`), cross-type numeric
// comparisons (so `args.amount <= 1000.5` works whether amount decoded as int or double), and a
// single variable `args`, the call's arguments as map(string, dyn).
func newCELEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxExpressionLen),
	)
}

// constraint is one compiled arguments[] entry.
type constraint struct {
	name    string
	message string
	prg     cel.Program
}

// compileConstraint compiles and type-checks one expression; it must be of type bool (a dyn
// result is refused too: `args.flag` must be written `args.flag == true`, so that a non-bool
// value can never reach the decision).
func compileConstraint(env *cel.Env, expr string) (cel.Program, error) {
	if len(expr) > maxExpressionLen {
		return nil, fmt.Errorf("expression longer than %d bytes", maxExpressionLen)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", oneLine(iss.Err().Error()))
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("must return bool, returns %s", ast.OutputType())
	}
	prg, err := env.Program(ast,
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(interruptEvery),
	)
	if err != nil {
		return nil, fmt.Errorf("cannot be planned: %s", oneLine(err.Error()))
	}
	return prg, nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// celResult is what one expression evaluation came to.
type celResult uint8

const (
	celTrue      celResult = iota
	celFalse               // evaluated to false
	celError               // evaluation error, non-bool, or cost limit exceeded
	celCancelled           // the context ended during evaluation
)

// evalConstraint runs one program. Nothing it returns carries a CEL error text: those can quote
// argument values, and deny messages and logs must not (docs/architecture.md "Privacy").
func evalConstraint(ctx context.Context, prg cel.Program, act map[string]any) celResult {
	out, _, err := prg.ContextEval(ctx, act)
	switch {
	case err != nil && ctx.Err() != nil:
		return celCancelled
	case err != nil:
		return celError
	case out == nil || out.Type() != types.BoolType:
		return celError
	case out == types.True:
		return celTrue
	}
	return celFalse
}

// errArgsNotObject and errNumberRange are why arguments could not be given to CEL.
var (
	errArgsNotObject = errors.New("arguments are not a JSON object")
	errNumberRange   = errors.New("arguments hold an integer outside the 64-bit range of CEL int")
)

// celArgs decodes a call's arguments for CEL.
//
// The bytes are first read by internal/jcs in Full mode, the project's single parse boundary for
// JSON, which refuses what two parsers could read differently (duplicate member names, invalid
// UTF-8, unpaired surrogates, non-finite numbers, nesting over 1000); encoding/json alone would
// keep the last duplicate. Then numbers are decoded from their literal text, never through a
// float64 first:
//
//   - an integer literal (no fraction, no exponent) becomes a CEL int (int64), exactly; one
//     outside the int64 range is refused (deny), not rounded to a double;
//   - any other number (1.5, 1e3) becomes a CEL double;
//   - strings stay strings: a decimal string "1000.00" compares with `double(args.amount)`;
//     `int(args.amount)` of it is an evaluation error and so a deny.
//
// Arguments in the strict profile hold only integers of magnitude at most 2^53-1, so all their
// numbers are exact CEL ints. Canonical (Full mode) arguments have already been through an
// IEEE double in canonicalization, so an integer beyond 2^53 there is the double's value.
func celArgs(raw []byte) (map[string]any, error) {
	if _, err := jcs.Canonicalize(raw, jcs.Full); err != nil {
		return nil, fmt.Errorf("arguments are not I-JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments do not decode: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errArgsNotObject
	}
	if err := convertNumbers(m); err != nil {
		return nil, err
	}
	return m, nil
}

// convertNumbers replaces every json.Number in v, in place, by int64 or float64.
func convertNumbers(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if n, ok := e.(json.Number); ok {
				x, err := celNumber(n)
				if err != nil {
					return err
				}
				t[k] = x
				continue
			}
			if err := convertNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if n, ok := e.(json.Number); ok {
				x, err := celNumber(n)
				if err != nil {
					return err
				}
				t[i] = x
				continue
			}
			if err := convertNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func celNumber(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, errNumberRange
		}
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil { // jcs already refused non-finite numbers; belt and braces
		return nil, fmt.Errorf("arguments hold a number that is not a finite double")
	}
	return f, nil
}
