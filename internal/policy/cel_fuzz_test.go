package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
)

// celFuzzPolicy is a policy whose one rule is gated only by CEL argument constraints: an amount
// cap (numbers compared across int and double), a recipient suffix, and a quadratic
// comprehension over an optional list, so that a long enough list exceeds CostLimit.
const celFuzzPolicy = `
servers:
- name: pay
  url: https://pay.example/mcp
rules:
- name: payouts
  servers: [pay]
  tools: [payout]
  consequenceClass: FINANCIAL
  evidence:
    role: PolicyPermit
  arguments:
  - name: amount-cap
    expression: args.amount <= 10000
  - name: recipient
    expression: args.to.endsWith('@example.com')
  - name: items
    expression: "!has(args.items) || args.items.all(i, args.items.all(j, i == j || i != j))"
`

// Bounds of the items comprehension for the oracle: a list this short is always within
// CostLimit, one this long never is (n² inner steps; TestCELLimits measures the same shape).
const (
	celFuzzItemsWithin = 20
	celFuzzItemsBeyond = 1000
)

// FuzzCELArguments drives arbitrary argument bytes (the agent's, untrusted) through a compiled
// policy whose rule is decided by CEL constraints. It must never panic; whatever is not an I-JSON
// object conforming to every constraint is denied with a known code (never Permit, never Allow);
// a conforming object is permitted; a comprehension beyond the cost limit is denied
// (tool-use-binding §16: fail closed; envelope-04 §12.7 for duplicate names and surrogates).
func FuzzCELArguments(f *testing.F) {
	for _, s := range []string{
		`{"amount":100,"to":"bob@example.com"}`,
		`{"amount":10000,"to":"bob@example.com","items":[1,2,3]}`,
		`{"amount":10000.5,"to":"bob@example.com"}`,
		`{"amount":"100","to":"bob@example.com"}`,
		`{"amount":100,"amount":99999,"to":"bob@example.com"}`,
		`{"amount":99999,"amount":100,"to":"bob@example.com"}`,
		`{"amount":100,"to":"bob@example.com","to":"eve@evil.com"}`,
		`{"amount":100,"to":"bob@example.com\ud800"}`,
		`{"amount":100,"to":"bob@example.com","x":"\udc00\ud800"}`,
		`{"amount":1e400,"to":"bob@example.com"}`,
		`{"amount":-9223372036854775809,"to":"bob@example.com"}`,
		`{"amount":9007199254740993,"to":"bob@example.com"}`,
		`{"amount":-0,"to":"bob@example.com","items":{"a":1}}`,
		`{"amount":1,"to":"bob@example.com","items":null}`,
		`{"amount":1,"to":"bob@example.com","items":"abc"}`,
		`{"amount":1,"to":"bob@example.com","items":[` + strings.Repeat(`{"a":[1]},`, celFuzzItemsBeyond) + `0]}`,
		`[{"amount":1,"to":"bob@example.com"}]`,
		`{"amount":1,"to":"bob@example.com"} {}`,
		`{"amount":1,"to":"bob@example.com"`,
		"{\"amount\":1,\"to\":\"bob@example.com\xff\"}",
		`{"amount":1,"to":"Bob@Example.com"}`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	spec, err := ParseSpec([]byte(celFuzzPolicy))
	if err != nil {
		f.Fatal(err)
	}
	c, err := Compile("fuzz/cel", spec, 1)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		d := c.Evaluate(context.Background(), Request{Server: "pay", Destination: "https://pay.example/mcp", Tool: "payout",
			Args: args, Provenance: "user", Agent: "agent", StrictArgs: true})
		want := celOracle(args)
		switch d.Outcome {
		case OutcomePermit:
			if want == celOracleDeny {
				t.Fatalf("permitted non-conforming arguments %q: %+v", args, d)
			}
			if d.Rule != "payouts" {
				t.Fatalf("permit by rule %q", d.Rule)
			}
		case OutcomeDeny:
			if want == celOracleAllow {
				t.Fatalf("denied conforming arguments %q: %s %s", args, d.Code, d.Message)
			}
			// Not an object at all is an invalid act; anything else is the rule's deny.
			if (d.Code != ef.EFPolicyDenied && d.Code != ef.EFActInvalid) || d.Message == "" {
				t.Fatalf("deny with code %q message %q", d.Code, d.Message)
			}
			// Deny messages never quote argument values (docs/architecture.md "Privacy").
			if strings.Contains(d.Message, "example.com") {
				t.Fatalf("deny message quotes the arguments: %q", d.Message)
			}
		default:
			t.Fatalf("outcome %q for %q", d.Outcome, args)
		}
	})
}

type celOracleResult int

const (
	celOracleAllow celOracleResult = iota
	celOracleDeny
	celOracleEither // items long enough that the cost limit may or may not be reached
)

// celOracle decides, without CEL, what celFuzzPolicy's constraints make of raw.
func celOracle(raw []byte) celOracleResult {
	// The parse boundary: I-JSON only (no duplicate names, no lone surrogates, valid UTF-8,
	// finite numbers). Duplicates are also checked here independently of internal/jcs.
	if _, err := jcs.Canonicalize(raw, jcs.Full); err != nil || hasDuplicateNames(raw) {
		return celOracleDeny
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return celOracleDeny
	}
	if !integersFitInt64(m) {
		return celOracleDeny
	}
	n, ok := m["amount"].(json.Number)
	if !ok || !numberAtMost(n, 10000) {
		return celOracleDeny
	}
	to, ok := m["to"].(string)
	if !ok || !strings.HasSuffix(to, "@example.com") {
		return celOracleDeny
	}
	items, present := m["items"]
	if !present {
		return celOracleAllow
	}
	var size int
	switch it := items.(type) {
	case []any:
		size = len(it)
	case map[string]any:
		size = len(it)
	default:
		return celOracleDeny // null, string, number, bool: no comprehension over them
	}
	switch {
	case size <= celFuzzItemsWithin:
		return celOracleAllow
	case size >= celFuzzItemsBeyond:
		return celOracleDeny
	}
	return celOracleEither
}

func numberAtMost(n json.Number, limit int64) bool {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		return err == nil && i <= limit
	}
	x, err := strconv.ParseFloat(s, 64)
	return err == nil && x <= float64(limit)
}

// integersFitInt64 reports whether every integer literal in v fits a CEL int.
func integersFitInt64(v any) bool {
	switch t := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return true
		}
		_, err := strconv.ParseInt(string(t), 10, 64)
		return err == nil
	case map[string]any:
		for _, e := range t {
			if !integersFitInt64(e) {
				return false
			}
		}
	case []any:
		for _, e := range t {
			if !integersFitInt64(e) {
				return false
			}
		}
	}
	return true
}

// hasDuplicateNames walks raw's tokens and reports a member name repeated in one object
// (compared after escape decoding, as envelope-04 §6.3 requires).
func hasDuplicateNames(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // the next string token in this object is a member name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name, _ := tok.(string)
			if top.names[name] {
				return true
			}
			top.names[name] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, names: map[string]bool{}, key: true})
			if top != nil && top.object {
				top.key = true
			}
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			if top != nil && top.object {
				top.key = true
			}
			continue
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object {
			top.key = true // a scalar value ends the member
		}
	}
}
