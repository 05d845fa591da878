package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/receipt"
)

// ErrNotRunning is returned by Settle for an operation that is not an accepted dispatch still
// running in this process: never accepted, settled already, or accepted by a process that has
// since restarted (recovery made it INDETERMINATE).
var ErrNotRunning = errors.New("sink: no running accepted dispatch with this operation id")

// runningDispatch is a journaled dispatch the upstream accepted to run on its own time
// (OutcomeAccepted), recorded INVOKED and waiting for its outcome.
type runningDispatch struct {
	entry   *dispatchEntry
	receipt receipt.Receipt // the outcome receipt of the dispatch, to repeat with the settled state
}

// run records an accepted dispatch by its operation id.
func (x *dispatchIndex) run(operationID string, r *runningDispatch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.running == nil {
		x.running = make(map[string]*runningDispatch)
	}
	x.running[operationID] = r
}

// take removes and returns the running dispatch of an operation; nil when there is none, so that
// of concurrent settlements exactly one records the outcome.
func (x *dispatchIndex) take(operationID string) *runningDispatch {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.running[operationID]
	delete(x.running, operationID)
	return r
}

// Settle records the outcome of a dispatch the upstream accepted to run on its own time
// (OutcomeAccepted; its record is INVOKED), once the transport has learnt it: out and invokeErr
// are classified as an invocation's (ClassifyOutcome: EXECUTED or FAILED only on the upstream's
// authoritative answer, INDETERMINATE otherwise) and the record moves to that state, durably,
// before Settle returns; the outcome receipt follows. A transport that can no longer learn the
// outcome (the task is gone, the session ended) settles it with OutcomeIndeterminate. An
// acceptance is not an outcome: OutcomeAccepted here is INDETERMINATE.
//
// From then on a retry of the act in its session within the authority's window gets the
// recorded result (Result.Upstream) and the acceptance (Result.Accepted), and other calls of the
// action are no longer refused as in flight. Settle returns ErrNotRunning, recording nothing,
// for an operation that is not running here; a write that fails leaves the act INDETERMINATE in
// this process (the record stays INVOKED, which recovery turns INDETERMINATE).
func (g *Gate) Settle(ctx context.Context, operationID string, out InvokeResult, invokeErr error) (journal.State, error) {
	if g == nil || g.g == nil {
		return "", errNoGate
	}
	return g.g.settle(ctx, operationID, out, invokeErr)
}

func (g *gate) settle(_ context.Context, operationID string, out InvokeResult, ierr error) (journal.State, error) {
	r := g.dispatches.take(operationID)
	if r == nil {
		return "", fmt.Errorf("%w: %s", ErrNotRunning, operationID)
	}
	if out.Outcome == OutcomeAccepted || out.Outcome == OutcomeNotSent {
		// It was sent and accepted: neither says what became of it.
		out.Outcome = OutcomeIndeterminate
	}
	rec := journal.DispatchRecord{OperationID: operationID, ActID: r.receipt.ActID}
	state, result, err := g.complete(rec, out, ierr) // its own deadline: recorded even if the caller is gone
	g.dispatches.update(r.entry, func(e *dispatchEntry) { e.state, e.result = state, result })
	if g.receipts != nil {
		o := r.receipt
		o.Time, o.State = g.now().UTC(), string(state)
		if aerr := g.appendReceipt(o); aerr != nil {
			g.log.Error(aerr, "receipt append failed", "act", o.ActID)
		}
	}
	g.log.V(1).Info("settled", "act", rec.ActID, "operation", operationID, "state", state)
	return state, err
}
