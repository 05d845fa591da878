package policy

import (
	"errors"
	"strings"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Reason is why a spec did not compile. The values are the Accepted condition reasons of
// ToolPolicy, so the controller can copy them into status unchanged.
type Reason string

// Compile reasons.
const (
	// ReasonInvalidCEL: an arguments[].expression does not parse, does not type-check, or does
	// not return bool.
	ReasonInvalidCEL = Reason(v1alpha1.ToolPolicyInvalidCELReason)
	// ReasonUnknownServer: a rule names a server (in servers or destinations) that is not in
	// spec.servers.
	ReasonUnknownServer = Reason(v1alpha1.ToolPolicyUnknownServerReason)
	// ReasonInvalidSpec: any other defect: a bad tool glob, a duplicate name, a value outside its
	// enum or bounds, a human-gated rule without principals or alternatives, an alternative whose
	// args is not a JSON object in the strict profile.
	ReasonInvalidSpec = Reason(v1alpha1.ToolPolicyInvalidSpecReason)
)

// Problem is one defect of a spec.
type Problem struct {
	// Field is the path of the offending field, e.g. "spec.rules[1].arguments[0].expression".
	Field string
	// Reason classifies the defect.
	Reason Reason
	// Detail says what is wrong, for the operator.
	Detail string
}

func (p Problem) String() string { return p.Field + ": " + string(p.Reason) + ": " + p.Detail }

// ErrInvalidPolicy is matched (errors.Is) by every *CompileError.
var ErrInvalidPolicy = errors.New("policy: invalid ToolPolicy")

// CompileError lists every problem Compile found, in field order. A policy with any problem is
// not served: calls to its servers are denied (fail closed), never let through.
type CompileError struct {
	// Policy is the name given to Compile.
	Policy   string
	Problems []Problem
}

func (e *CompileError) Error() string {
	var b strings.Builder
	b.WriteString("policy ")
	b.WriteString(e.Policy)
	b.WriteString(" does not compile: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidPolicy) true.
func (e *CompileError) Is(target error) bool { return target == ErrInvalidPolicy }

// Reason is the reason for the Accepted=False condition: the reason of the first problem. The
// controller's message should be Error().
func (e *CompileError) Reason() Reason {
	if len(e.Problems) == 0 {
		return ReasonInvalidSpec
	}
	return e.Problems[0].Reason
}

// problems collects Problems during Compile.
type problems []Problem

func (ps *problems) add(field string, r Reason, detail string) {
	*ps = append(*ps, Problem{Field: field, Reason: r, Detail: detail})
}
