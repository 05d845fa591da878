package kubeledger

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/budget"
)

// usageOf reads a BudgetLedger as the budget package's Usage. A decimal the API server's schema
// let through but the budget package refuses is a corrupt ledger: ErrUnavailable, refuse.
func usageOf(o *v1alpha1.BudgetLedger) (budget.Usage, error) {
	st := &o.Status
	u := budget.Usage{
		Ledger: o.Name, Scope: o.Spec.Scope, Namespace: o.Namespace, Policy: o.Spec.Policy, Rule: o.Spec.Rule,
		Budget: o.Spec.Budget, Key: o.Spec.Key, MaxCalls: st.MaxCalls, Unit: st.Unit,
	}
	dec := func(what, s string) (budget.Decimal, error) {
		if s == "" {
			return budget.Decimal{}, nil
		}
		d, err := budget.ParseDecimal(s)
		if err != nil {
			return budget.Decimal{}, fmt.Errorf("kubeledger: ledger %s/%s %s: %w: %w", o.Namespace, o.Name, what, ErrUnavailable, err)
		}
		return d, nil
	}
	if st.MaxSum != "" {
		d, err := dec("maxSum", st.MaxSum)
		if err != nil {
			return budget.Usage{}, err
		}
		u.MaxSum = &d
	}
	if st.WindowEnd != nil {
		u.WindowEnd = st.WindowEnd.Time
	}
	for _, b := range st.Settled {
		a, err := dec("settled amount", b.Amount)
		if err != nil {
			return budget.Usage{}, err
		}
		u.Settled = append(u.Settled, budget.Bucket{Until: b.Until.Time, Count: b.Count, Amount: a})
	}
	for _, op := range st.Ops {
		a, err := dec("op amount", op.Amount)
		if err != nil {
			return budget.Usage{}, err
		}
		u.Ops = append(u.Ops, budget.Op{ID: op.ID, Until: op.Until.Time, Count: op.Count, Amount: a, Enforced: op.Enforced})
	}
	return u, nil
}

// statusOf writes a Usage as a BudgetLedger's status, with what counts at now for people.
func statusOf(u budget.Usage, now time.Time) v1alpha1.BudgetLedgerStatus {
	st := v1alpha1.BudgetLedgerStatus{MaxCalls: u.MaxCalls, Unit: u.Unit}
	if u.MaxSum != nil {
		st.MaxSum = u.MaxSum.String()
	}
	if !u.WindowEnd.IsZero() {
		t := metav1.NewTime(u.WindowEnd.UTC())
		st.WindowEnd = &t
	}
	for _, b := range u.Settled {
		st.Settled = append(st.Settled, v1alpha1.LedgerBucket{Until: metav1.NewTime(b.Until.UTC()), Count: b.Count, Amount: b.Amount.String()})
	}
	for _, o := range u.Ops {
		st.Ops = append(st.Ops, v1alpha1.LedgerOp{ID: o.ID, Until: metav1.NewTime(o.Until.UTC()), Count: o.Count, Amount: o.Amount.String(), Enforced: o.Enforced})
	}
	calls, sum := u.Spent(now)
	st.Spent, st.Remaining = describe(u, calls, sum)
	return st
}

// describe states what counts and what the limits leave: "3 calls, 1200.5 EUR" and
// "17 calls, 8799.5 EUR" (a count-only budget: "3 calls" and "17 calls").
func describe(u budget.Usage, calls int64, sum budget.Decimal) (spent, remaining string) {
	unit := ""
	if u.Unit != "" {
		unit = " " + u.Unit
	}
	spent = strconv.FormatInt(calls, 10) + " calls"
	if u.MaxSum != nil || !sum.IsZero() {
		spent += ", " + sum.String() + unit
	}
	var parts []string
	if u.MaxCalls > 0 {
		parts = append(parts, strconv.FormatInt(max(u.MaxCalls-calls, 0), 10)+" calls")
	}
	if u.MaxSum != nil {
		parts = append(parts, u.MaxSum.Sub(sum).String()+unit)
	}
	for i, p := range parts {
		if i > 0 {
			remaining += ", "
		}
		remaining += p
	}
	return spent, remaining
}
