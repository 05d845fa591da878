package v1alpha1_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// TestToolPolicyBudgetValidation: the API server's schema and CEL rules on
// spec.rules[].budgets (docs/api.md "Budgets").
func TestToolPolicyBudgetValidation(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	n := func(v int64) *int64 { return &v }
	daily := func() v1alpha1.Budget {
		return v1alpha1.Budget{
			Name:     "daily",
			Window:   v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay, TimeZone: "Europe/Berlin"},
			MaxCalls: n(20),
			Sum:      &v1alpha1.BudgetSum{Pointer: "/amount", Max: "10000.00", Unit: "EUR"},
		}
	}
	alt := v1alpha1.Alternative{Label: "Dry run", Reasoning: "No effect.", Args: runtime.RawExtension{Raw: []byte(`{"dry_run":true}`)}}
	// The sample's rule 1 (money movement) has principals and an alternative; rule 0 (reads) has neither.
	for i, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ToolPolicySpec)
		want   string // "" = accepted
	}{
		{"a daily budget is valid", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Budgets = []v1alpha1.Budget{daily()} }, ""},
		{"a rolling count budget keyed by an expression is valid", func(s *v1alpha1.ToolPolicySpec) {
			b := v1alpha1.Budget{Name: "per-payee", Window: v1alpha1.BudgetWindow{Period: &metav1.Duration{Duration: time.Hour}}, MaxCalls: n(3),
				Key: &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression, Expression: "args.payee"}}
			s.Rules[0].Budgets = []v1alpha1.Budget{b}
		}, ""},
		{"neither maxCalls nor sum", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.MaxCalls, b.Sum = nil, nil
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "a budget needs maxCalls, sum or both"},
		{"period and calendar", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Window.Period, b.Window.TimeZone = &metav1.Duration{Duration: time.Hour}, ""
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "set exactly one of period and calendar"},
		{"no window", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Window = v1alpha1.BudgetWindow{}
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "set exactly one of period and calendar"},
		{"a time zone on a rolling window", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Window = v1alpha1.BudgetWindow{Period: &metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "timeZone applies only to a calendar window"},
		{"a period under a minute", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Window = v1alpha1.BudgetWindow{Period: &metav1.Duration{Duration: 30 * time.Second}}
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "period must be between 1m and 2232h"},
		{"an unknown calendar", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Window.Calendar = "Year"
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, `Unsupported value: "Year"`},
		{"a max with an exponent", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Sum.Max = "1e4"
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "spec.rules[1].budgets[0].sum.max: Invalid value"},
		{"a negative max", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Sum.Max = "-5"
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "spec.rules[1].budgets[0].sum.max: Invalid value"},
		{"a pointer without a slash", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Sum.Pointer = "amount"
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "spec.rules[1].budgets[0].sum.pointer: Invalid value"},
		{"maxCalls zero", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.MaxCalls = n(0)
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "spec.rules[1].budgets[0].maxCalls: Invalid value"},
		{"an expression key without an expression", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression}
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "expression is set exactly when by is Expression"},
		{"an expression on an agent key", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.Key = &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyAgent, Expression: "args.payee"}
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
		}, "expression is set exactly when by is Expression"},
		{"duplicate budget names", func(s *v1alpha1.ToolPolicySpec) { s.Rules[1].Budgets = []v1alpha1.Budget{daily(), daily()} },
			`Duplicate value: {"name":"daily"}`},
		{"Escalate on a rule without principals or alternatives", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.OnExceed = v1alpha1.BudgetOnExceedEscalate
			s.Rules[0].Budgets = []v1alpha1.Budget{b}
		}, "a rule with an Escalate budget must declare at least one alternative and name evidence principals"},
		{"Escalate on a rule with principals and an alternative is valid", func(s *v1alpha1.ToolPolicySpec) {
			b := daily()
			b.OnExceed = v1alpha1.BudgetOnExceedEscalate
			s.Rules[1].Budgets = []v1alpha1.Budget{b}
			s.Rules[1].Alternatives = []v1alpha1.Alternative{alt}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePolicy(t)
			p.Namespace, p.Name = ns, fmt.Sprintf("budget-%d", i)
			tc.mutate(&p.Spec)
			wantInvalid(t, e.Client.Create(ctxFor(t), p), tc.want)
		})
	}
}
