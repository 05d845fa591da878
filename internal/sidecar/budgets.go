package sidecar

import (
	"context"
	"errors"

	"github.com/actgate/actgate/internal/budget"
)

// serviceBudgets is the sink's budget.Ledger in a pod (sink.Options.Budgets): the pod's journal
// sees no other pod's spending, so the sidecar counts nothing itself. The authority service
// checks and charges a call's budgets with its own policy when it consumes the call's authority
// (docs/architecture.md "Budgets in Kubernetes") and refuses one over budget with
// EF_BUDGET_EXCEEDED: the sink's check before deciding reads no spending here and leaves the
// decision to it.
type serviceBudgets struct{}

var _ budget.Ledger = serviceBudgets{}

// errServiceCharges: a sidecar never charges; the authority service does.
var errServiceCharges = errors.New("sidecar: budgets are charged by the authority service")

// Usage implements budget.Ledger: nothing spent as far as the pod knows.
func (serviceBudgets) Usage(_ context.Context, ledger string) (budget.Usage, error) {
	return budget.Usage{Ledger: ledger}, nil
}

// Charge implements budget.Ledger: refused, the service charges.
func (serviceBudgets) Charge(context.Context, string, []budget.Charge) error {
	return errServiceCharges
}

// Refund implements budget.Ledger: refused, the service refunds on the outcome report.
func (serviceBudgets) Refund(context.Context, string) error { return errServiceCharges }
