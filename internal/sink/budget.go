package sink

import (
	"context"
	"errors"

	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/ef"
)

// Budgets (docs/api.md "Budgets"). Before deciding, the gate reads the usage of each of the
// governing rule's budgets (budget.Assess): a call that would pass a Deny budget is refused with
// EF_BUDGET_EXCEEDED, one that would pass only Escalate budgets goes to the rule's principals
// with a binding moment stating each budget. The spending itself is charged in the commit that
// consumes the call's authority (the DISPATCH_PENDING record's Charges), which decides under
// concurrency; a dispatch on a person's grant charges the Escalate budgets without enforcing
// them (the person decided this exact call over them).

// budgetCharges builds the call's charges to the governing rule's budgets at the gate's clock.
// grant is true for a dispatch on a binding-moment grant.
func (g *gate) budgetCharges(cl *callState, grant bool) ([]budget.Charge, error) {
	if len(cl.dec.Budgets) == 0 {
		return nil, nil
	}
	now := g.now()
	out := make([]budget.Charge, 0, len(cl.dec.Budgets))
	for _, b := range cl.dec.Budgets {
		c, err := b.Spec.ChargeCall(b.Ref, b.Key, cl.c.Args, cl.cand.Arguments, now)
		if err != nil {
			return nil, err
		}
		if grant && b.Spec.Escalate {
			c.Enforce = false
		}
		out = append(out, c)
	}
	return out, nil
}

// checkBudgets is the check before deciding. It returns done with the refusal when the call is
// refused; otherwise, when an Escalate budget would be passed, it turns the decision into an
// escalation and records the findings for the binding moment.
func (g *gate) checkBudgets(ctx context.Context, cl *callState) (Result, bool) {
	if len(cl.dec.Budgets) == 0 || cl.dec.Outcome == PolicyDeny {
		return Result{}, false
	}
	if g.budgets == nil {
		// This gate cannot count: fail closed rather than let budgeted calls through.
		return g.refuseReported(cl, ef.EFBudgetLimit, "This call's rule has budgets and this gate keeps no budget ledger; the tool was not invoked."), true
	}
	charges, err := g.budgetCharges(cl, false)
	if err != nil {
		return g.refuseReported(cl, budgetCode(err), budgetMessage(err)), true
	}
	over, err := budget.Assess(ctx, g.budgets, charges, g.now())
	if err != nil {
		return g.refuseReported(cl, consumeCode(ctx, err), ""), true
	}
	if len(over) == 0 {
		return Result{}, false
	}
	specs := make([]budget.Spec, len(cl.dec.Budgets))
	for i, b := range cl.dec.Budgets {
		specs[i] = b.Spec
	}
	deny, escalate := budget.Judge(specs, over)
	if deny != nil {
		g.log.V(1).Info("budget exceeded", "act", cl.cand.Act.CandidateActID, "actionDigest", cl.cand.ActionDigest(),
			"policy", cl.dec.Policy, "rule", cl.dec.Rule, "budget", deny.Budget)
		return g.refuseReported(cl, ef.EFBudgetExceeded, deny.Error()), true
	}
	for _, e := range escalate {
		cl.budgetFindings = append(cl.budgetFindings, budget.Finding(e))
	}
	cl.dec.Outcome = PolicyEscalate
	return Result{}, false
}

// escalatesOverBudget reports whether the governing rule has an Escalate budget: over it a
// person decides, so an authority service must be asked with a Review, not a Permit.
func (cl *callState) escalatesOverBudget() bool {
	for _, b := range cl.dec.Budgets {
		if b.Spec.Escalate {
			return true
		}
	}
	return false
}

// budgetCode maps a budget refusal to its EF code.
func budgetCode(err error) ef.EFCode {
	if errors.Is(err, budget.ErrExceeded) {
		return ef.EFBudgetExceeded
	}
	return ef.EFBudgetLimit
}

// budgetMessage is what the agent is told of a budget refusal: the exceeded numbers, or the
// code's description for a bound or an unreadable amount (whose error may quote arguments).
func budgetMessage(err error) string {
	if errors.Is(err, budget.ErrExceeded) {
		return err.Error()
	}
	return budgetCode(err).Description()
}

// chargeDispatch puts the call's charges into the DISPATCH_PENDING record the consume writes.
// A store that cannot apply them in the consume commit cannot enforce them: the call is
// refused. Under an authority service the service's ledger charges (remote.go), not this one.
func (g *gate) chargeDispatch(cl *callState, p *pendingDispatch, grant bool) (ef.EFCode, string) {
	if len(cl.dec.Budgets) == 0 || g.remote != nil {
		return "", ""
	}
	charges, err := g.budgetCharges(cl, grant)
	if err != nil {
		return budgetCode(err), budgetMessage(err)
	}
	if g.pender == nil || g.budgets == nil {
		return ef.EFBudgetLimit, "This call's rule has budgets and this gate's store cannot charge them with the consume; the tool was not invoked."
	}
	p.rec.Charges = charges
	return "", ""
}

// budgetLedger is the ledger a gate built with opts reads usage from. The embedded store
// charges in its consume commit. Under an authority service the store is the pod's local
// journal, which sees no other pod's spending: only a ledger given in Options counts there, and
// without one budgeted calls are refused.
func budgetLedger(opts Options) budget.Ledger {
	if opts.Budgets != nil {
		return opts.Budgets
	}
	if l, ok := opts.Store.(budget.Ledger); ok && opts.Authority == nil {
		return l
	}
	return nil
}
