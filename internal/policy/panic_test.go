package policy

import (
	"context"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
)

// panickingProgram is a CEL program whose evaluation panics (as a bug in an extension function
// or in cel-go would).
type panickingProgram struct{ cel.Program }

func (panickingProgram) ContextEval(context.Context, any) (ref.Val, *cel.EvalDetails, error) {
	panic("cel: evaluation bug")
}

func (p panickingProgram) Eval(in any) (ref.Val, *cel.EvalDetails, error) {
	return p.ContextEval(context.Background(), in)
}

// plantPanic makes the first argument constraint of rule name panic when evaluated.
func plantPanic(t *testing.T, c *Compiled, name string) {
	t.Helper()
	for _, r := range c.rules {
		if r.name == name && len(r.args) > 0 {
			r.args[0].prg = panickingProgram{r.args[0].prg}
			return
		}
	}
	t.Fatalf("no rule %q with an argument constraint", name)
}

// TestEvaluatePanicDenies: a policy check that panics (here the send-payment rule's CEL
// constraint) is recovered into a deny with EF_POLICY_DENIED, in enforce and in audit mode
// alike: a panic is never an allow, and never audited through.
func TestEvaluatePanicDenies(t *testing.T) {
	call := req("send_payment", `{"amount":100,"currency":"EUR"}`)
	for _, mode := range []v1alpha1.PolicyMode{v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit} {
		t.Run(string(mode), func(t *testing.T) {
			c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) { s.Mode = mode })
			if d := eval(c, call); d.Outcome == OutcomeDeny {
				t.Fatalf("before the panic is planted the call is already denied: %+v", d)
			}
			plantPanic(t, c, "send-payment")
			d := eval(c, call)
			if d.Outcome != OutcomeDeny || d.Code != ef.EFPolicyDenied || d.Audit || d.Message != "policy evaluation failed" {
				t.Fatalf("a panicking check: %+v, want a deny with %s, not audited", d, ef.EFPolicyDenied)
			}
			if d.Policy != "shop/payments" || d.Epoch != 7 {
				t.Fatalf("the deny does not name the policy and epoch: %+v", d)
			}
		})
	}
}
