package kubeledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/policy"
)

// AnnotationCharges is the Act annotation holding, as JSON, the budget charges its authority is
// charged with when consumed (Plan.Annotation): recorded when the authority service issues the
// authority, read back when it consumes it, so every replica charges the same ledgers.
const AnnotationCharges = "actgate.io/budget-charges"

// Plan is what one call charges: one charge per budget of its governing rule.
type Plan struct {
	Charges []budget.Charge
	// Escalate names the budgets whose onExceed is Escalate.
	Escalate map[string]bool
}

// PlanOf returns the charges of a call from its policy decision's budgets (policy.Decision
// Budgets: each compiled budget with the key this call charges), made at now with the call's
// arguments raw (as the upstream reads them) and canonical (what the authority binds). The
// authority service plans with its own decision, never with what a sidecar says. A budget
// whose amount cannot be read, or reads differently in the two forms (budget.Spec.ChargeCall),
// is an error wrapping budget.ErrLimit (EF_BUDGET_LIMIT): the call is refused.
func PlanOf(checks []policy.BudgetCheck, raw, canonical []byte, now time.Time) (Plan, error) {
	if len(checks) == 0 {
		return Plan{}, nil
	}
	out := Plan{Escalate: map[string]bool{}}
	for _, b := range checks {
		c, err := b.Spec.ChargeCall(b.Ref, b.Key, raw, canonical, now)
		if err != nil {
			return Plan{}, fmt.Errorf("budget %q: %w", b.Spec.Name, err)
		}
		out.Charges = append(out.Charges, c)
		out.Escalate[b.Spec.Name] = b.Spec.Escalate
	}
	return out, nil
}

// Annotation is the plan's charges as AnnotationCharges holds them.
func (p Plan) Annotation() (string, error) {
	b, err := json.Marshal(p.Charges)
	return string(b), err
}

// ChargesOf reads the charges an Act's annotations record: none when it has no AnnotationCharges.
// A value that is not a list of at most budget.MaxChargesPerOp charges is an error (refuse).
func ChargesOf(annotations map[string]string) ([]budget.Charge, error) {
	v, ok := annotations[AnnotationCharges]
	if !ok {
		return nil, nil
	}
	var cs []budget.Charge
	if err := json.Unmarshal([]byte(v), &cs); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", budget.ErrLimit, AnnotationCharges, err)
	}
	if len(cs) > budget.MaxChargesPerOp {
		return nil, fmt.Errorf("%w: %s holds %d charges", budget.ErrLimit, AnnotationCharges, len(cs))
	}
	return cs, nil
}

// Ledgers are the ledger ids of charges.
func Ledgers(cs []budget.Charge) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Ledger)
	}
	return out
}

// Unenforced returns charges with Enforce false: a person approved the call past the limits.
func Unenforced(cs []budget.Charge) []budget.Charge {
	out := make([]budget.Charge, len(cs))
	for i, c := range cs {
		c.Enforce = false
		out[i] = c
	}
	return out
}
