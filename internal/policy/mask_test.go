package policy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
)

// TestCompileMaskArguments: spec.rules[].maskArguments are RFC 6901 pointers; a bad or
// repeated one is refused with its field path, and a decision of the rule carries them sorted.
func TestCompileMaskArguments(t *testing.T) {
	for _, tc := range []struct {
		name   string
		masks  []string
		field  string
		detail string
	}{
		{"no leading slash", []string{"card"}, "spec.rules[1].maskArguments[0]", "does not start with"},
		{"empty pointer", []string{""}, "spec.rules[1].maskArguments[0]", "empty"},
		{"bad escape", []string{"/a~2"}, "spec.rules[1].maskArguments[0]", "not followed by 0 or 1"},
		{"append token", []string{"/to", "/items/-"}, "spec.rules[1].maskArguments[1]", "names no existing value"},
		{"repeated", []string{"/to", "/to"}, "spec.rules[1].maskArguments[1]", "repeats"},
		{"too many", slices.Repeat([]string{"/a"}, 17), "spec.rules[1].maskArguments", "at most 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := sampleSpec(t)
			spec.Rules[1].MaskArguments = tc.masks
			_, err := Compile("shop/payments", spec, 1)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile = %v; want a *CompileError", err)
			}
			for _, p := range ce.Problems {
				if p.Field == tc.field && p.Reason == ReasonInvalidSpec && strings.Contains(p.Detail, tc.detail) {
					return
				}
			}
			t.Fatalf("problems %v lack %s …%s…", ce.Problems, tc.field, tc.detail)
		})
	}

	c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].MaskArguments = []string{"/to", "/card/number"} })
	d := c.Evaluate(context.Background(), req("send_payment", `{"amount":5,"currency":"EUR","to":"bob"}`))
	if d.Outcome != OutcomeEscalate || !slices.Equal(d.MaskArguments, []string{"/card/number", "/to"}) {
		t.Fatalf("decision %s masks %q; want Escalate with the rule's masks sorted", d.Outcome, d.MaskArguments)
	}
	d = c.Evaluate(context.Background(), req("get_balance", `{}`))
	if len(d.MaskArguments) != 0 {
		t.Fatalf("another rule's decision carries masks %q", d.MaskArguments)
	}
}
