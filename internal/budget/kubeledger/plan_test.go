package kubeledger

import (
	"errors"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/policy"
)

func TestPlanOf(t *testing.T) {
	now := time.Date(2026, 12, 6, 22, 30, 0, 0, time.UTC)
	w, err := budget.NewWindow(0, budget.CalendarDay, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	max := budget.MustDecimal("10000")
	ref := budget.Ref{Namespace: "billing", Policy: "payments", Rule: "pay"}
	daily := policy.BudgetCheck{Spec: budget.Spec{Name: "daily", Window: w, MaxCalls: 20, MaxSum: &max, Pointer: "/amount", Unit: "EUR"},
		Ref: ref, Key: "system:serviceaccount:billing:agent"}
	perPayee := policy.BudgetCheck{Spec: budget.Spec{Name: "per-payee", Window: w, MaxCalls: 3, Escalate: true}, Ref: ref, Key: "ACME"}
	for _, tc := range []struct {
		name    string
		checks  []policy.BudgetCheck
		args    string
		canon   string // the canonical arguments when they differ from args
		charges int
		amount  string
		err     error
	}{
		{name: "no budgets", args: `{}`},
		{name: "count and sum", checks: []policy.BudgetCheck{daily}, args: `{"amount":"12.50"}`, charges: 1, amount: "12.5"},
		{name: "a JSON number, read exactly", checks: []policy.BudgetCheck{daily}, args: `{"amount":0.1}`, charges: 1, amount: "0.1"},
		{name: "two budgets", checks: []policy.BudgetCheck{daily, perPayee}, args: `{"amount":1,"payee":"ACME"}`, charges: 2, amount: "1"},
		{name: "amount missing", checks: []policy.BudgetCheck{daily}, args: `{}`, err: budget.ErrLimit},
		{name: "amount negative", checks: []policy.BudgetCheck{daily}, args: `{"amount":-1}`, err: budget.ErrLimit},
		{name: "amount with exponent", checks: []policy.BudgetCheck{daily}, args: `{"amount":1e3}`, err: budget.ErrLimit},
		{name: "amount read differently raw and canonical", checks: []policy.BudgetCheck{daily}, args: `{"amount":12345678901234567890}`,
			canon: `{"amount":12345678901234567000}`, err: budget.ErrLimit},
		{name: "amount not a number", checks: []policy.BudgetCheck{daily}, args: `{"amount":"ten"}`, err: budget.ErrLimit},
		{name: "arguments not an object", checks: []policy.BudgetCheck{daily}, args: `[1]`, err: budget.ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canon := tc.canon
			if canon == "" {
				canon = tc.args
			}
			plan, err := PlanOf(tc.checks, []byte(tc.args), []byte(canon), now)
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
				if c.Key != tc.checks[i].Key || c.Namespace != "billing" || c.Policy != "payments" || c.Rule != "pay" || !c.Enforce || c.Count != 1 {
					t.Errorf("charge %d: %+v", i, c)
				}
			}
			if tc.charges == 0 {
				return
			}
			if got := plan.Charges[0].Amount.String(); got != tc.amount {
				t.Errorf("amount %s, want %s", got, tc.amount)
			}
			if tc.charges == 2 && (!plan.Escalate["per-payee"] || plan.Escalate["daily"]) {
				t.Errorf("escalate %v", plan.Escalate)
			}
			a, err := plan.Annotation()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ChargesOf(map[string]string{AnnotationCharges: a})
			if err != nil || len(back) != tc.charges || back[0].Ledger != plan.Charges[0].Ledger || back[0].Amount.Cmp(plan.Charges[0].Amount) != 0 {
				t.Fatalf("annotation round trip: %+v, %v", back, err)
			}
			for i, c := range Unenforced(back) {
				if c.Enforce || !back[i].Enforce {
					t.Fatalf("Unenforced: %+v (from %+v)", c, back[i])
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
