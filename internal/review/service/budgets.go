package service

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/budget/kubeledger"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
)

// Budgets (docs/architecture.md "Budgets in Kubernetes"). The service plans a call's charges
// with its own policy when it reviews it and records them on the Act (kubeledger.AnnotationCharges);
// they are charged to the BudgetLedgers when the authority is consumed, before the consuming
// compare-and-swap (the Lease's, or the permit record's), and given back when that
// compare-and-swap refuses or the outcome is FAILED. The logic is package kubeledger's; this
// file is the glue.

// planBudgets plans the charges of a call the policy permits or escalates and records them on
// its Act (x.obj, before it is created). A Review also checks them against the ledgers: a call
// over a Deny budget gets x.overBudget, and one over an Escalate budget is escalated, its
// charges recorded unenforced (a person's approval charges past the limit). A call whose charges
// cannot be planned is refused.
func (s *Service) planBudgets(ctx context.Context, x *call, check bool) *outcome {
	if x.d.Audit || (x.d.Outcome != policy.OutcomePermit && x.d.Outcome != policy.OutcomeEscalate) {
		return nil
	}
	plan, err := kubeledger.PlanOf(x.d.Budgets, x.raw, x.args, x.now)
	if err != nil {
		o := budgetFailure(ctx, err)
		return &o
	}
	if len(plan.Charges) == 0 {
		return nil
	}
	if check {
		led := s.ledger.In(x.c.namespace)
		for _, c := range plan.Charges {
			u, err := led.Usage(ctx, c.Ledger)
			if err != nil {
				o := budgetFailure(ctx, err)
				return &o
			}
			err = u.Fits(c, x.now)
			var ex *budget.ExceededError
			if !errors.As(err, &ex) {
				continue
			}
			if !plan.Escalate[c.Budget] {
				o := deny(http.StatusOK, ef.EFBudgetExceeded, review.ReasonPolicy, ex.Error()+".")
				x.overBudget = &o
				break
			}
			x.escalateBudget = true
			x.budgetFindings = append(x.budgetFindings, budget.Finding(ex))
		}
		if x.escalateBudget && x.overBudget == nil {
			plan.Charges = kubeledger.Unenforced(plan.Charges)
		}
	}
	v, err := plan.Annotation()
	if err != nil {
		o := budgetFailure(ctx, err)
		return &o
	}
	if x.obj.Annotations == nil {
		x.obj.Annotations = map[string]string{}
	}
	x.obj.Annotations[kubeledger.AnnotationCharges] = v
	x.charges = plan.Charges
	return nil
}

// chargeAct charges op with the charges recorded on a, before its authority is consumed.
func (s *Service) chargeAct(ctx context.Context, a *v1alpha1.Act, op string) ([]budget.Charge, *outcome) {
	cs, err := kubeledger.ChargesOf(a.Annotations)
	if err == nil && len(cs) > 0 {
		err = s.ledger.In(a.Namespace).Charge(ctx, op, cs)
		s.sweepSoon(a.Namespace)
	}
	if err != nil {
		o := budgetFailure(ctx, err)
		s.log.V(1).Info("budget charge refused", "act", a.Spec.ActID, "operation", op, "code", o.resp.Code)
		return nil, &o
	}
	return cs, nil
}

// refund gives back op's charges after the consume they were made for was refused. A refund
// that fails leaves them counted: more, never less.
func (s *Service) refund(ctx context.Context, namespace, op string, cs []budget.Charge) {
	if len(cs) == 0 {
		return
	}
	if err := s.ledger.In(namespace).RefundLedgers(ctx, op, kubeledger.Ledgers(cs)); err != nil {
		s.log.Error(err, "budget refund failed; the charges stay counted", "operation", op)
	}
}

// refundUnlessConsumedBy refunds op's charges unless the authority's Lease records it consumed
// by op (a retried Consume of the operation that consumed it: its charges stand).
func (s *Service) refundUnlessConsumedBy(ctx context.Context, namespace, authorityID, op string, cs []budget.Charge, err error) {
	if len(cs) == 0 || errors.Is(err, authority.ErrStoreUnavailable) {
		// Unknown whether the consume happened: keep the charges (counted more, never less).
		return
	}
	if rec, gerr := s.store.Get(ctx, namespace, authorityID); gerr != nil || (rec.State == authority.StateConsumed && rec.ConsumedBy == op) {
		return
	}
	s.refund(ctx, namespace, op, cs)
}

// refundUnlessRecorded refunds op's charges unless the Act records its authority consumed by
// op (a retried Permit or grant of the same operation: its charges stand).
func (s *Service) refundUnlessRecorded(ctx context.Context, a *v1alpha1.Act, op string, cs []budget.Charge) {
	if len(cs) == 0 {
		return
	}
	cur := &v1alpha1.Act{}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
		return
	}
	if rec, ok := permitRecordOf(cur); ok && rec.operation == op {
		return
	}
	s.refund(ctx, a.Namespace, op, cs)
}

// refundFailed gives back the charges of an act whose outcome is FAILED. It fails when the
// ledger cannot be reached, so the report is retried; a refund is idempotent.
func (s *Service) refundFailed(ctx context.Context, a *v1alpha1.Act, op string) *outcome {
	cs, err := kubeledger.ChargesOf(a.Annotations)
	if err != nil || len(cs) == 0 {
		return nil
	}
	if err := s.ledger.In(a.Namespace).RefundLedgers(ctx, op, kubeledger.Ledgers(cs)); err != nil {
		o := apiFailure(ctx, "give the failed call's budget back", err)
		return &o
	}
	return nil
}

// budgetFailure is the refusal for a budget error.
func budgetFailure(ctx context.Context, err error) outcome {
	var ex *budget.ExceededError
	switch {
	case errors.As(err, &ex):
		return deny(http.StatusOK, ef.EFBudgetExceeded, review.ReasonPolicy, ex.Error()+".")
	case errors.Is(err, budget.ErrLimit):
		return deny(http.StatusOK, ef.EFBudgetLimit, review.ReasonPolicy, "The call's budget cannot be charged.")
	}
	return apiFailure(ctx, "charge the budget", err)
}

// sweepEvery is how often a namespace's ledgers are swept, at most: after a charge there, once
// its last sweep is this old.
const sweepEvery = 10 * time.Minute

// maxSweepNamespaces bounds the namespaces whose last sweep is remembered; at the bound all are
// forgotten (a namespace is then swept once more than needed).
const maxSweepNamespaces = 4096

// sweeps remembers when each namespace's ledgers were last swept.
type sweeps struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// sweepSoon deletes, in the background, the namespace's ledgers in which nothing counts any
// more (kubeledger Sweep), at most once per sweepEvery per namespace and replica. A ledger
// whose window ended is never charged again (a new window has a new ledger), so it only costs
// storage until then; the ToolPolicy's deletion removes its ledgers at once (owner reference).
func (s *Service) sweepSoon(namespace string) {
	now := time.Now()
	s.sweeps.mu.Lock()
	if t, ok := s.sweeps.last[namespace]; ok && now.Sub(t) < sweepEvery {
		s.sweeps.mu.Unlock()
		return
	}
	if len(s.sweeps.last) >= maxSweepNamespaces {
		clear(s.sweeps.last)
	}
	s.sweeps.last[namespace] = now
	s.sweeps.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		n, err := s.ledger.In(namespace).Sweep(ctx)
		if err != nil {
			s.log.Error(err, "budget ledgers not swept", "namespace", namespace)
			return
		}
		if n > 0 {
			s.log.V(1).Info("budget ledgers swept", "namespace", namespace, "deleted", n)
		}
	}()
}
