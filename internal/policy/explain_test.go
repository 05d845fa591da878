package policy

import (
	"context"
	"reflect"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Explain returns Evaluate's decision for every case of the evaluation table, and its steps say
// the same: the failing step carries the decision's code and message, every step before it
// passed, every step after it was not reached.
func TestExplainIsEvaluate(t *testing.T) {
	for _, mode := range []v1alpha1.PolicyMode{v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit} {
		c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) { s.Mode = mode })
		for _, tc := range evalCases() {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				want := eval(c, tc.r)
				got, steps := c.Explain(context.Background(), tc.r)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Explain decision = %+v, Evaluate = %+v", got, want)
				}
				if len(steps) != len(c.chain) {
					t.Fatalf("%d steps, chain has %d checks", len(steps), len(c.chain))
				}
				code := want.Code
				failedAt := -1
				for i, s := range steps {
					switch {
					case failedAt >= 0 && s.Result != StepNotReached:
						t.Errorf("step %d (%s) after the failing step %d is %q", i, s.Check, failedAt, s.Result)
					case failedAt < 0 && s.Result == StepFailed:
						failedAt = i
						if s.Code != code || s.Message != want.Message {
							t.Errorf("failing step %s: %s %q, decision %s %q", s.Check, s.Code, s.Message, code, want.Message)
						}
					case failedAt < 0 && s.Result != StepPassed:
						t.Errorf("step %d (%s) before any failure is %q", i, s.Check, s.Result)
					}
				}
				denied := want.Outcome == OutcomeDeny || (want.Audit && want.AuditOutcome == OutcomeDeny)
				if denied != (failedAt >= 0) {
					t.Errorf("decision %s (audit %s) but failing step index %d", want.Outcome, want.AuditOutcome, failedAt)
				}
				if last := steps[len(steps)-1]; failedAt < 0 && last.Rule != want.Rule {
					t.Errorf("last step's rule %q, decision's %q", last.Rule, want.Rule)
				}
			})
		}
	}
}

// Every check of the chain has a stable, described name: a closure would be named funcN and
// have no description.
func TestCheckNamesDescribed(t *testing.T) {
	c := compileSample(t, nil)
	names := c.CheckNames()
	if len(names) != len(c.chain) || len(names) != len(checkDescriptions) {
		t.Fatalf("%d names, %d checks, %d descriptions", len(names), len(c.chain), len(checkDescriptions))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if checkDescriptions[n] == "" || seen[n] {
			t.Errorf("check %q: undescribed or repeated", n)
		}
		seen[n] = true
	}
	if names[0] != "contextLive" || names[len(names)-1] != "principalsAvailable" {
		t.Errorf("chain order: %v", names)
	}
}

func TestExplainNil(t *testing.T) {
	var c *Compiled
	d, steps := c.Explain(context.Background(), req("get_balance", `{}`))
	if d.Outcome != OutcomeDeny || steps != nil {
		t.Fatalf("nil policy: %+v %v", d, steps)
	}
}
