// Package wire holds the request and response of one boltstore operation. The owner of a store
// file executes them directly, and a client process sends them over the owner's unix socket
// (net/rpc with gob), so both paths run the same code.
package wire

import (
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/journal"
)

// Op names an operation.
type Op string

// Operations, one per method of authority.Store, authority.ConsumeAndPender,
// authority.IssueConsumeAndPender and journal.Journal.
const (
	OpIssue          Op = "Issue"
	OpGet            Op = "Get"
	OpConsume        Op = "Consume"
	OpConsumeAndPend Op = "ConsumeAndPend"
	// OpIssueConsumeAndPend is authority.IssueConsumeAndPender's method.
	OpIssueConsumeAndPend Op = "IssueConsumeAndPend"
	OpBegin               Op = "Begin"
	OpTransition          Op = "Transition"
	OpReconcile           Op = "Reconcile"
	OpRecord              Op = "Record"
	OpByAuthority         Op = "ByAuthority"
	OpByAct               Op = "ByAct"
	OpInState             Op = "InState"
	OpRecoverOnStart      Op = "RecoverOnStart"
	// OpPutMoment and OpLoadMoments keep the gate's binding moments.
	OpPutMoment   Op = "PutMoment"
	OpLoadMoments Op = "LoadMoments"
	// OpBudgetUsage, OpBudgetUsages, OpBudgetCharge, OpBudgetRefund and OpBudgetSettle are
	// budget.Ledger's and budget.Settler's methods and the listing of `actgate budgets`.
	OpBudgetUsage  Op = "BudgetUsage"
	OpBudgetUsages Op = "BudgetUsages"
	OpBudgetCharge Op = "BudgetCharge"
	OpBudgetRefund Op = "BudgetRefund"
	OpBudgetSettle Op = "BudgetSettle"
)

// Protocol is the first line a client sends after connecting, followed by a space, its instance
// ID and a newline; the owner answers "ok\n". A different protocol line is refused.
const Protocol = "actgate-boltstore/1"

// RPCMethod is the net/rpc method that executes a Request.
const RPCMethod = "Store.Do"

// Request is one operation with its arguments; only the fields of Op are used.
type Request struct {
	Op Op
	// Deadline is the caller's context deadline (zero: none); the owner refuses to start an
	// operation past it.
	Deadline time.Time

	Namespace      string
	ID             string // authority ID
	Authority      authority.Authority
	Expect         authority.Binding
	Consumption    authority.Consumption
	Record         journal.DispatchRecord
	Receipt        []byte
	OperationID    string
	To             journal.State
	Outcome        journal.Outcome
	Reconciliation journal.Reconciliation
	ActID          string
	State          journal.State
	Since          time.Time // InState: records created at or after it (zero: all); LoadMoments: retained from
	Moment         Moment
	Ledger         string          // BudgetUsage
	Charges        []budget.Charge // BudgetCharge
}

// Moment is one binding moment's record: the gate's encoding under the moment's id, and the
// time the moment is settled by (retention deletes it some time after).
type Moment struct {
	ID      string
	Settled time.Time
	Data    []byte
}

// Response is the result of a Request. An error travels as its codes and text, so the client
// rebuilds an error that matches the same sentinels.
type Response struct {
	Authority authority.Record
	Record    journal.DispatchRecord
	Records   []journal.DispatchRecord
	Moments   []Moment
	N         int
	Usage     budget.Usage
	Usages    []budget.Usage

	Failed          bool
	AuthorityCode   authority.Code
	JournalCode     journal.Code
	DeadlineReached bool
	// BudgetCode is "exceeded" (budget.ErrExceeded) or "limit" (budget.ErrLimit) for a budget's
	// refusal of a charge.
	BudgetCode string
	Message    string
}
