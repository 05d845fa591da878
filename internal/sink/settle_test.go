package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
)

// TestAcceptedDispatchSettled: a dispatch the upstream accepts to run on its own time is
// INVOKED, its acceptance is the answer and, to a retry in its session, the same acceptance
// without a second invocation; another session is refused while it runs. Settle records the
// outcome once (durably, with a receipt), and a restart makes an unsettled one INDETERMINATE.
func TestAcceptedDispatchSettled(t *testing.T) {
	f := newFixture(t)
	f.up.outcome = OutcomeAccepted
	c := call("s1", "tools", "ticket_create", `{"title":"task"}`)
	first := f.handle(c)
	if !first.Allowed || !first.Invoked || first.State != journal.StateInvoked || len(first.Accepted) == 0 || first.Code != "" {
		t.Fatalf("accepted dispatch: %+v", first)
	}
	if recs := f.records(journal.StateInvoked); len(recs) != 1 || recs[0].OperationID != first.OperationID {
		t.Fatalf("journal: %+v", recs)
	}
	retry := f.handle(c)
	if !retry.Replayed || retry.Invoked || string(retry.Accepted) != string(first.Accepted) || retry.Upstream != nil {
		t.Fatalf("retry while running: %+v", retry)
	}
	wantDeny(t, f.handle(call("s2", "tools", "ticket_create", `{"title":"task"}`)), ef.EFIndeterminate)
	if n := f.up.count("ticket_create"); n != 1 {
		t.Fatalf("upstream count %d, want 1", n)
	}

	done := json.RawMessage(`{"content":[{"type":"text","text":"ticket 9"}]}`)
	st, err := f.gate.Settle(context.Background(), first.OperationID, InvokeResult{Result: done, Outcome: OutcomeExecuted}, nil)
	if err != nil || st != journal.StateExecuted {
		t.Fatalf("Settle: %s, %v", st, err)
	}
	if _, err := f.gate.Settle(context.Background(), first.OperationID, InvokeResult{Outcome: OutcomeFailed}, nil); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second Settle: %v, want ErrNotRunning", err)
	}
	recs := f.records(journal.StateExecuted)
	if len(recs) != 1 || string(recs[0].Result) != string(done) || len(f.records(journal.StateInvoked)) != 0 {
		t.Fatalf("journal after Settle: %+v", recs)
	}
	after := f.handle(c)
	if !after.Replayed || string(after.Upstream) != string(done) || string(after.Accepted) != string(first.Accepted) {
		t.Fatalf("retry after Settle: %+v", after)
	}
	var states []string
	for _, r := range f.receipts() {
		if r.OperationID == first.OperationID && r.State != "" {
			states = append(states, r.State)
		}
	}
	// The dispatch, its acceptance, the replay while running, the settled outcome, the replay.
	if want := []string{"DISPATCH_PENDING", "INVOKED", "INVOKED", "EXECUTED", "EXECUTED"}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("receipt states of the operation: %v", states)
	}

	// An acceptance is not an outcome: settled with one, the act is INDETERMINATE.
	other := f.handle(call("s1", "tools", "ticket_create", `{"title":"other"}`))
	if st, err := f.gate.Settle(context.Background(), other.OperationID, InvokeResult{Outcome: OutcomeAccepted}, nil); err != nil || st != journal.StateIndeterminate {
		t.Fatalf("Settle with an acceptance: %s, %v", st, err)
	}
	// Unsettled at a restart: INDETERMINATE, and no longer running.
	third := f.handle(call("s1", "tools", "ticket_create", `{"title":"third"}`))
	f.restart()
	if _, err := f.gate.Settle(context.Background(), third.OperationID, InvokeResult{Outcome: OutcomeExecuted, Result: done}, nil); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Settle after a restart: %v, want ErrNotRunning", err)
	}
	if n := len(f.records(journal.StateIndeterminate)); n != 2 {
		t.Fatalf("%d INDETERMINATE records, want 2", n)
	}
}
