package policy

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCELArgsNumbers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want any // the value of member "n"
		err  error
	}{
		{"small int", `{"n":42}`, int64(42), nil},
		{"negative zero", `{"n":-0}`, int64(0), nil},
		{"2^53+1 stays exact", `{"n":9007199254740993}`, int64(9007199254740993), nil},
		{"int64 max", `{"n":9223372036854775807}`, int64(9223372036854775807), nil},
		{"int64 min", `{"n":-9223372036854775808}`, int64(-9223372036854775808), nil},
		{"above int64", `{"n":9223372036854775808}`, nil, errNumberRange},
		{"far above int64", `{"n":123456789012345678901234567890}`, nil, errNumberRange},
		{"fraction is double", `{"n":1.5}`, 1.5, nil},
		{"exponent is double", `{"n":1e3}`, 1000.0, nil},
		{"1.0 is double", `{"n":1.0}`, 1.0, nil},
		{"tiny underflows to 0", `{"n":1e-400}`, 0.0, nil},
		{"decimal string stays a string", `{"n":"1000.00"}`, "1000.00", nil},
		{"nested", `{"n":[1,{"m":2.5}]}`, []any{int64(1), map[string]any{"m": 2.5}}, nil},
		{"null", `{"n":null}`, nil, nil},
		{"not an object", `[1]`, nil, errArgsNotObject},
		{"scalar", `"x"`, nil, errArgsNotObject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := celArgs([]byte(tc.in))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m["n"]; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("n = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestCELArgsRefusesWhatParsersDisagreeOn(t *testing.T) {
	for name, in := range map[string]string{
		"duplicate member":      `{"a":1,"a":2}`,
		"duplicate by escape":   `{"a":1,"\u0061":2}`,
		"lone surrogate":        `{"a":"\ud800"}`,
		"invalid UTF-8":         "{\"a\":\"\xff\"}",
		"non-finite":            `{"a":1e400}`,
		"trailing data":         `{"a":1} {}`,
		"empty":                 ``,
		"syntax":                `{"a":}`,
		"deep beyond Full mode": strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001),
	} {
		t.Run(name, func(t *testing.T) {
			if m, err := celArgs([]byte(in)); err == nil {
				t.Fatalf("accepted: %v", m)
			}
		})
	}
}

func TestCELEvaluation(t *testing.T) {
	env, err := newCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expr string
		args string
		want celResult
	}{
		{`int(args.amount) <= 10000`, `{"amount":10000}`, celTrue},
		{`int(args.amount) <= 10000`, `{"amount":10001}`, celFalse},
		{`double(args.amount) <= 1000.0`, `{"amount":"1000.00"}`, celTrue},
		{`double(args.amount) <= 1000.0`, `{"amount":"1000.01"}`, celFalse},
		{`double(args.amount) <= 1000.0`, `{"amount":"ten"}`, celError},
		{`args.amount <= 1000.5`, `{"amount":1000}`, celTrue}, // cross-type numeric comparison
		{`args.amount == 9007199254740993`, `{"amount":9007199254740993}`, celTrue},
		{`args.amount == 9007199254740992`, `{"amount":9007199254740993}`, celFalse}, // not rounded through a double
		{`args.amount > 0`, `{}`, celError},                                          // no such key
		{`!has(args.limit) || args.limit < 5`, `{}`, celTrue},
		{`args.?limit.orValue(0) < 5`, `{}`, celTrue},
		{`args.to.endsWith('@example.com')`, `{"to":"bob@example.com"}`, celTrue},
		{`args.to.lowerAscii().endsWith('@example.com')`, `{"to":"Bob@EXAMPLE.com"}`, celTrue},
		{`args.to.matches('^[a-z]+@example[.]com$')`, `{"to":"bob@evil.com"}`, celFalse},
		{`args.items.all(i, i.qty > 0)`, `{"items":[{"qty":1},{"qty":2}]}`, celTrue},
		{`args.items.all(i, i.qty > 0)`, `{"items":[{"qty":1},{"qty":0}]}`, celFalse},
		{`args.flag == true`, `{"flag":"true"}`, celFalse},
		{`1 / args.n == 1`, `{"n":0}`, celError}, // division by zero
	} {
		t.Run(tc.expr+" "+tc.args, func(t *testing.T) {
			prg, err := compileConstraint(env, tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			args, err := celArgs([]byte(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if got := evalConstraint(context.Background(), prg, map[string]any{"args": args}); got != tc.want {
				t.Fatalf("result %d, want %d", got, tc.want)
			}
		})
	}
}

// TestCELLimits: the cost limit and the context each stop a runaway expression, and they are
// told apart (cost is a policy deny, a dead context is EF_060).
func TestCELLimits(t *testing.T) {
	env, err := newCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	prg, err := compileConstraint(env, `args.l.all(x, args.l.all(y, x == y))`)
	if err != nil {
		t.Fatal(err)
	}
	args, err := celArgs([]byte(`{"l":[` + strings.Repeat("1,", 2000) + `1]}`))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"args": args}
	_, _, evalErr := prg.ContextEval(context.Background(), vars)
	if evalErr == nil || !strings.Contains(evalErr.Error(), "cost limit exceeded") {
		t.Fatalf("want the cost limit to stop evaluation, got %v", evalErr)
	}
	if got := evalConstraint(context.Background(), prg, vars); got != celError {
		t.Fatalf("cost limit: result %d, want celError", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := evalConstraint(ctx, prg, vars); got != celCancelled {
		t.Fatalf("cancelled: result %d, want celCancelled", got)
	}
}
