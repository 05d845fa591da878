package kubeledger

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/budget"
)

func paymentsPolicy(budgets ...v1alpha1.Budget) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "payments"},
		Spec:       v1alpha1.ToolPolicySpec{Rules: []v1alpha1.ToolRule{{Name: "pay", Budgets: budgets}, {Name: "read"}}},
	}
}

func int64p(n int64) *int64 { return &n }

func TestPlan(t *testing.T) {
	pl, err := NewPlanner()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 22, 30, 0, 0, time.UTC)
	day := v1alpha1.BudgetWindow{Calendar: v1alpha1.BudgetCalendarDay, TimeZone: "Europe/Berlin"}
	daily := v1alpha1.Budget{Name: "daily", Window: day, MaxCalls: int64p(20),
		Sum: &v1alpha1.BudgetSum{Pointer: "/amount", Max: "10000", Unit: "EUR"}}
	perPayee := v1alpha1.Budget{Name: "per-payee", Window: day, MaxCalls: int64p(3), OnExceed: v1alpha1.BudgetOnExceedEscalate,
		Key: &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression, Expression: "args.payee"}}
	caller := budget.Caller{Agent: "system:serviceaccount:billing:agent", ServiceAccount: "billing/agent"}
	for _, tc := range []struct {
		name    string
		p       *v1alpha1.ToolPolicy
		rule    string
		args    string
		charges int
		keys    []string
		err     error
	}{
		{name: "no rule matched", p: paymentsPolicy(daily), rule: "", args: `{}`},
		{name: "a rule without budgets", p: paymentsPolicy(daily), rule: "read", args: `{}`},
		{name: "a rule the policy lost", p: paymentsPolicy(daily), rule: "gone", args: `{}`, err: ErrNoRule},
		{name: "by agent, with a sum", p: paymentsPolicy(daily), rule: "pay", args: `{"amount":"12.50"}`, charges: 1,
			keys: []string{"system:serviceaccount:billing:agent"}},
		{name: "by expression", p: paymentsPolicy(daily, perPayee), rule: "pay", args: `{"amount":1,"payee":"ACME"}`, charges: 2,
			keys: []string{"system:serviceaccount:billing:agent", "ACME"}},
		{name: "amount missing", p: paymentsPolicy(daily), rule: "pay", args: `{}`, err: budget.ErrLimit},
		{name: "amount negative", p: paymentsPolicy(daily), rule: "pay", args: `{"amount":-1}`, err: budget.ErrLimit},
		{name: "amount with exponent", p: paymentsPolicy(daily), rule: "pay", args: `{"amount":1e3}`, err: budget.ErrLimit},
		{name: "key missing", p: paymentsPolicy(perPayee), rule: "pay", args: `{"amount":1}`, err: budget.ErrLimit},
		{name: "key not a string", p: paymentsPolicy(perPayee), rule: "pay", args: `{"payee":7}`, err: budget.ErrLimit},
		{name: "key empty", p: paymentsPolicy(perPayee), rule: "pay", args: `{"payee":""}`, err: budget.ErrLimit},
		{name: "arguments not an object", p: paymentsPolicy(perPayee), rule: "pay", args: `[1]`, err: budget.ErrLimit},
		{name: "key expression does not compile", p: paymentsPolicy(v1alpha1.Budget{Name: "x", Window: day, MaxCalls: int64p(1),
			Key: &v1alpha1.BudgetKey{By: v1alpha1.BudgetKeyExpression, Expression: "args.("}}), rule: "pay", args: `{}`, err: budget.ErrLimit},
		{name: "bad window", p: paymentsPolicy(v1alpha1.Budget{Name: "x", Window: v1alpha1.BudgetWindow{Calendar: "Year"}, MaxCalls: int64p(1)}),
			rule: "pay", args: `{}`, err: budget.ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := pl.Plan(context.Background(), tc.p, tc.rule, caller, []byte(tc.args), now)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Charges) != tc.charges {
				t.Fatalf("%d charges, want %d", len(plan.Charges), tc.charges)
			}
			for i, c := range plan.Charges {
				if c.Key != tc.keys[i] || c.Namespace != "billing" || c.Policy != "payments" || c.Rule != "pay" || !c.Enforce || c.Count != 1 {
					t.Errorf("charge %d: %+v", i, c)
				}
			}
			if tc.charges == 2 && (!plan.Escalate["per-payee"] || plan.Escalate["daily"]) {
				t.Errorf("escalate %v", plan.Escalate)
			}
			if tc.charges > 0 {
				a, err := plan.Annotation()
				if err != nil {
					t.Fatal(err)
				}
				back, err := ChargesOf(map[string]string{AnnotationCharges: a})
				if err != nil || len(back) != tc.charges || back[0].Ledger != plan.Charges[0].Ledger || back[0].Amount.Cmp(plan.Charges[0].Amount) != 0 {
					t.Fatalf("annotation round trip: %+v, %v", back, err)
				}
			}
		})
	}
}

func TestChargesOfBadInput(t *testing.T) {
	for _, v := range []string{``, `{}`, `[{"amount":"-1"}]`, `[{"amount":1e9}]`, `[{"count":"x"}]`, `[` + `{},{},{},{},{},{},{},{},{}` + `]`, `null x`} {
		if _, err := ChargesOf(map[string]string{AnnotationCharges: v}); !errors.Is(err, budget.ErrLimit) {
			t.Errorf("%q: %v, want ErrLimit", v, err)
		}
	}
	if cs, err := ChargesOf(nil); err != nil || cs != nil {
		t.Fatalf("no annotation: %v %v", cs, err)
	}
}

func FuzzChargesOf(f *testing.F) {
	f.Add(`[{"ledger":"a","scope":"b","count":1,"amount":"1.5","enforce":true}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, v string) {
		cs, err := ChargesOf(map[string]string{AnnotationCharges: v})
		if err == nil && len(cs) > budget.MaxChargesPerOp {
			t.Fatalf("%d charges accepted", len(cs))
		}
	})
}
