package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
)

func budgetOf(mut func(*v1alpha1.Budget)) v1alpha1.Budget {
	n := int64(20)
	b := v1alpha1.Budget{Name: "daily", Window: v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay, TimeZone: "Europe/Berlin"},
		MaxCalls: &n, Sum: &v1alpha1.BudgetSum{Pointer: "/amount", Max: "10000.00", Unit: "EUR"}}
	if mut != nil {
		mut(&b)
	}
	return b
}

// TestCompileBudgetErrors: what the API server checks is checked again (the standalone policy
// file has no API server), and what it cannot check (an IANA zone, a CEL key expression's type)
// is checked here.
func TestCompileBudgetErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget v1alpha1.Budget
		rule   int // 0: reads (no principals or alternatives), 1: send-payment
		field  string
		detail string
	}{
		{"unknown zone", budgetOf(func(b *v1alpha1.Budget) { b.Window.TimeZone = "Mars/Olympus_Mons" }), 1, ".window", "timeZone"},
		{"period and calendar", budgetOf(func(b *v1alpha1.Budget) { b.Window.Period = &metav1.Duration{Duration: time.Hour} }), 1, ".window", "exactly one"},
		{"short period", budgetOf(func(b *v1alpha1.Budget) {
			b.Window = v1alpha1.BudgetWindow{Period: &metav1.Duration{Duration: time.Second}}
		}), 1, ".window", "period"},
		{"no limit", budgetOf(func(b *v1alpha1.Budget) { b.MaxCalls, b.Sum = nil, nil }), 1, ".budgets[0]", "maxCalls, sum or both"},
		{"max with exponent", budgetOf(func(b *v1alpha1.Budget) { b.Sum.Max = "1e4" }), 1, ".sum.max", "plain decimal"},
		{"bad pointer", budgetOf(func(b *v1alpha1.Budget) { b.Sum.Pointer = "/a/~2" }), 1, ".sum.pointer", "~"},
		{"key expression not CEL", budgetOf(func(b *v1alpha1.Budget) {
			b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression, Expression: "args.to +"}
		}), 1, ".key.expression", "compile"},
		{"key expression of type int", budgetOf(func(b *v1alpha1.Budget) {
			b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression, Expression: "size(args)"}
		}), 1, ".key.expression", "must return string"},
		{"expression without by Expression", budgetOf(func(b *v1alpha1.Budget) {
			b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyAgent, Expression: "args.to"}
		}), 1, ".key.expression", "exactly when"},
		{"Escalate without principals", budgetOf(func(b *v1alpha1.Budget) { b.OnExceed = v1alpha1.BudgetOnExceedEscalate }), 0, ".evidence.principals", "Escalate budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := sampleSpec(t)
			spec.Rules[tc.rule].Budgets = []v1alpha1.Budget{tc.budget}
			_, err := Compile("shop/payments", spec, 7)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("compiled: %v", err)
			}
			for _, p := range ce.Problems {
				if strings.Contains(p.Field, tc.field) && strings.Contains(p.Detail, tc.detail) {
					return
				}
			}
			t.Fatalf("no problem at %s mentioning %q: %v", tc.field, tc.detail, err)
		})
	}
}

// TestEvaluateBudgets: a budgeted rule of role None is decided Permit (its authority is consumed
// and charged); the key is the agent, the service account or the expression's string; a key
// expression that fails, or returns a non-string or an unprintable key, denies EF_BUDGET_LIMIT.
func TestEvaluateBudgets(t *testing.T) {
	c := compileSample(t, func(s *v1alpha1.ToolPolicySpec) {
		s.Rules[0].Budgets = []v1alpha1.Budget{
			budgetOf(func(b *v1alpha1.Budget) {
				b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyServiceAccount}
				b.Sum = nil
			}),
			budgetOf(func(b *v1alpha1.Budget) {
				b.Name, b.Sum = "per-account", nil
				b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression, Expression: "args.account"}
			}),
		}
	})
	d := c.Evaluate(context.Background(), req("get_balance", `{"account":"acct-1"}`))
	if d.Outcome != OutcomePermit || len(d.Budgets) != 2 {
		t.Fatalf("decision %+v", d)
	}
	if d.Budgets[0].Key != "shop/agent" || d.Budgets[1].Key != "acct-1" || d.Budgets[0].Ref.Namespace != "shop" || d.Budgets[0].Ref.Policy != "payments" ||
		d.Budgets[0].Ref.Rule != "reads" {
		t.Fatalf("budgets %+v", d.Budgets)
	}
	for _, args := range []string{`{"account":7}`, `{}`, `{"account":""}`, `{"account":"a\u0000b"}`, `{"account":"` + strings.Repeat("x", 300) + `"}`} {
		d := c.Evaluate(context.Background(), req("get_balance", args))
		if d.Outcome != OutcomeDeny || d.Code != ef.EFBudgetLimit || strings.Contains(d.Message, "x") && len(args) > 300 {
			t.Errorf("args %s: %+v", args, d)
		}
	}
}
