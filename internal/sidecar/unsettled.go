package sidecar

import (
	"context"
	"fmt"
	"sync"

	"github.com/actgate/actgate/internal/journal"
)

// actionKey names an action at a destination: what a retry of a call repeats.
type actionKey struct {
	actionDigest string
	destination  string
}

// unsettled is the set of actions with a dispatch of this sidecar that has no authoritative
// outcome: reserved for a consume, DISPATCH_PENDING, INVOKED or INDETERMINATE. A call of such
// an action is refused with EF_INDETERMINATE before anything is consumed, in any session and
// after a restart: an effect of exactly this action may be happening or have happened, and
// only authenticated reconciliation settles that (action-evidence-boundary "prohibit a blind
// replay"; tool-use-binding §23 EF_INDETERMINATE; docs/architecture.md "Retries" does the same for
// the embedded gate). Without it a retry would get a fresh authority from the service and run
// the action again.
//
// It is a process-local view of the journal, which only this process writes: loaded at
// NewGate (after recovery turned what a previous run left in flight into INDETERMINATE), kept
// by admit, record and Complete.
type unsettled struct {
	mu sync.Mutex
	m  map[actionKey]string // → operation id ("" while reserved, before the journal record)
}

// loadUnsettled reads every non-terminal record of j.
func loadUnsettled(ctx context.Context, j journal.Journal) (*unsettled, error) {
	u := &unsettled{m: map[actionKey]string{}}
	for _, st := range []journal.State{journal.StateIndeterminate, journal.StateDispatchPending,
		journal.StateInvoked, journal.StateConsumed} {
		recs, err := j.InState(ctx, st)
		if err != nil {
			return nil, fmt.Errorf("sidecar: loading %s dispatches: %w", st, err)
		}
		for _, r := range recs {
			u.m[actionKey{r.ActionDigest, r.Upstream}] = r.OperationID
		}
	}
	return u, nil
}

// reserve marks k reserved and returns true, or returns false when k is already unsettled.
func (u *unsettled) reserve(k actionKey) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, held := u.m[k]; held {
		return false
	}
	u.m[k] = ""
	return true
}

// pending records the operation journaled for a reservation.
func (u *unsettled) pending(k actionKey, opID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[k] = opID
}

// release drops k if it is held by opID ("" for a reservation that never reached the journal).
func (u *unsettled) release(k actionKey, opID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if have, ok := u.m[k]; ok && have == opID {
		delete(u.m, k)
	}
}

// settled drops the action of a record that reached a terminal state.
func (u *unsettled) settled(rec journal.DispatchRecord) {
	if rec.State.Terminal() {
		u.release(actionKey{rec.ActionDigest, rec.Upstream}, rec.OperationID)
	}
}
