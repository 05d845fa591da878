package policy

import (
	"context"
	"reflect"
	"runtime"
	"strings"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
)

// StepResult is what one check of the evaluation chain did with a call.
type StepResult string

// Step results.
const (
	// StepPassed: the check ran and did not refuse the call.
	StepPassed StepResult = "pass"
	// StepFailed: the check refused the call; its Code and Message are the Decision's.
	StepFailed StepResult = "fail"
	// StepNotReached: an earlier check refused the call, so this one did not run.
	StepNotReached StepResult = "not reached"
)

// Step is one check of the evaluation chain as Explain saw it, with what the evaluation had
// established once it ran.
type Step struct {
	// Check names the check (e.g. "serverDeclared"); the names are stable.
	Check string
	// Description says in a few words what the check requires.
	Description string
	Result      StepResult
	// Code and Message are set when Result is StepFailed.
	Code    ef.EFCode
	Message string
	// Server, Rule, Class and Role are what the evaluation had established after the check:
	// the declared server, the governing rule, the effective class and evidence role.
	Server string
	Rule   string
	Class  act.ConsequenceClass
	Role   v1alpha1.EvidenceRole
	// EscalatedByProvenance is true once a provenance rule has made the call need a human.
	EscalatedByProvenance bool
}

// checkDescriptions describes each check of enforceChain, by name.
var checkDescriptions = map[string]string{
	"contextLive":         "the evaluation is not timed out or cancelled",
	"serverDeclared":      "the server is one the policy lists",
	"ruleMatches":         "a rule matches the server and tool (the first in spec.rules order governs)",
	"argumentsObject":     "the arguments are one JSON object",
	"destinationAllowed":  "the live destination is the server's URL or in the rule's destinations",
	"classify":            "the consequence class and evidence role are set",
	"provenanceRules":     "no provenance rule denies the call (an Escalate rule makes it need a human)",
	"argumentConstraints": "every CEL argument constraint of the rule is true",
	"humanBindable":       "a call needing a human has arguments inside the strict profile",
	"principalsAvailable": "a call needing a human has enough eligible principals",
}

// CheckNames are the names of the checks of the evaluation chain, in order.
func (c *Compiled) CheckNames() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.chain))
	for i, ch := range c.chain {
		out[i] = checkName(ch)
	}
	return out
}

// checkName is the Go name of a check function: the chain holds only top-level functions of
// this package, so it is the identifier after the last dot.
func checkName(ch check) string {
	f := runtime.FuncForPC(reflect.ValueOf(ch).Pointer())
	if f == nil {
		return "unknown"
	}
	n := f.Name()
	return n[strings.LastIndexByte(n, '.')+1:]
}

// Explain is Evaluate that also reports every check of the chain, in order, with its result.
// It runs the very evaluation Evaluate runs (the same chain, the same Decision, including the
// Audit mapping); only the reporting is added. A nil *Compiled returns Evaluate's deny and no
// steps.
func (c *Compiled) Explain(ctx context.Context, r Request) (Decision, []Step) {
	if c == nil {
		return c.Evaluate(ctx, r), nil
	}
	steps := make([]Step, len(c.chain))
	for i, ch := range c.chain {
		n := checkName(ch)
		steps[i] = Step{Check: n, Description: checkDescriptions[n], Result: StepNotReached}
	}
	d := c.evaluate(ctx, r, func(i int, st *state, code ef.EFCode, msg string, failed bool) {
		s := &steps[i]
		s.Result = StepPassed
		if failed {
			s.Result, s.Code, s.Message = StepFailed, code, msg
		}
		if st.srv != nil {
			s.Server = st.srv.name
		}
		if st.rule != nil {
			s.Rule = st.rule.name
		}
		s.Class, s.Role, s.EscalatedByProvenance = st.class, st.role, st.escalatedBy
	})
	return d, steps
}
