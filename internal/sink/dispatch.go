package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
)

// Reasons the sink records with journal transitions.
const (
	ReasonUpstreamExecuted journal.Reason = "upstream_executed"
	ReasonUpstreamFailed   journal.Reason = "upstream_failed"
	ReasonUpstreamUnknown  journal.Reason = "upstream_outcome_unknown"
	ReasonNotSent          journal.Reason = "not_sent"
	ReasonNotDispatched    journal.Reason = "not_dispatched"
	ReasonUpstreamAccepted journal.Reason = "upstream_accepted"
)

// minSweep is the smallest size at which the process-local maps are swept of expired entries.
const minSweep = 4096

// dispatchKey names an action at a destination: what a retry repeats.
type dispatchKey struct {
	actionDigest string
	destination  string
}

// dispatchEntry is one dispatch (or a reservation for one) of an action at a destination.
type dispatchEntry struct {
	actID       string
	session     string // "" for entries loaded from the journal: the act id proves the session
	authorityID string
	operationID string
	// state is "" while reserved (before the consume), then the journal state.
	state   journal.State
	expires time.Time // end of the retry window for a terminal outcome: the authority's expiry
	result  json.RawMessage
	// accepted is the upstream's acceptance of a dispatch it runs on its own time
	// (OutcomeAccepted), returned to a retry of the act in its session while the window is
	// open, settled or not.
	accepted json.RawMessage
}

// dispatchIndex recognises retries (docs/architecture.md "Retries"). It is a process-local view of
// the journal; the single-use guarantee itself is the store's consume.
type dispatchIndex struct {
	ids *act.IDIssuer
	mu  sync.Mutex
	m   map[dispatchKey][]*dispatchEntry
	// running holds the accepted dispatches (OutcomeAccepted) not settled yet, by operation id
	// (settle.go).
	running map[string]*runningDispatch
	n       int
	// sweepAt is the entry count that triggers the next sweep of closed windows; it doubles
	// with what a sweep leaves, so sweeping stays amortised O(1) per call.
	sweepAt int
}

func newDispatchIndex(ids *act.IDIssuer) *dispatchIndex {
	return &dispatchIndex{ids: ids, m: map[dispatchKey][]*dispatchEntry{}, sweepAt: minSweep}
}

// verdict is what the index says about a new call of an action at a destination.
type verdict int

const (
	verdictProceed       verdict = iota // nothing in the way; a reservation was made
	verdictReplay                       // a terminal outcome of this session's act: return it
	verdictIndeterminate                // an earlier dispatch is in flight or INDETERMINATE
)

// ownedBy reports whether the entry's act belongs to session.
func (x *dispatchIndex) ownedBy(e *dispatchEntry, session string) bool {
	if e.session != "" {
		return e.session == session
	}
	return x.ids.CheckSession(e.actID, session) == nil
}

// reserve decides a new call and, when it may proceed, reserves the action at the destination
// for actID so that an identical call arriving meanwhile is refused:
//   - an entry that is reserved, DISPATCH_PENDING, INVOKED, CONSUMED or INDETERMINATE, of any
//     session, refuses the call (an effect of this exact action may be happening or have
//     happened; action-evidence-boundary "prohibit a blind replay");
//   - a terminal entry of the same session whose window is open is the call's own earlier
//     dispatch: its recorded result is returned (tool-use-binding §9: "a fetch of the original
//     tool_result, never a second invoke"); so is an entry the upstream accepted to run on its
//     own time (OutcomeAccepted, INVOKED): the retry gets the same handle to it;
//   - terminal entries of other sessions, or past their window, do not stand in the way.
func (x *dispatchIndex) reserve(k dispatchKey, session, actID string, now time.Time) (verdict, *dispatchEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	list := x.m[k]
	kept := list[:0]
	var found *dispatchEntry
	var v verdict
	for _, e := range list {
		if e.state.Terminal() && !now.Before(e.expires) {
			x.n--
			continue // window closed: forgotten
		}
		kept = append(kept, e)
		if found != nil && v == verdictIndeterminate {
			continue
		}
		switch {
		case !e.state.Terminal() && e.accepted != nil && now.Before(e.expires) && x.ownedBy(e, session):
			if found == nil {
				found, v = e, verdictReplay
			}
		case !e.state.Terminal():
			found, v = e, verdictIndeterminate
		case found == nil && x.ownedBy(e, session):
			found, v = e, verdictReplay
		}
	}
	if found != nil {
		x.m[k] = kept
		return v, found
	}
	e := &dispatchEntry{actID: actID, session: session}
	x.m[k] = append(kept, e)
	x.n++
	if x.n > x.sweepAt {
		x.sweepLocked(now)
		x.sweepAt = max(minSweep, 2*x.n)
	}
	return verdictProceed, e
}

// add records an entry loaded from the journal.
func (x *dispatchIndex) add(k dispatchKey, e *dispatchEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m[k] = append(x.m[k], e)
	x.n++
}

// release drops a reservation whose dispatch never consumed an authority.
func (x *dispatchIndex) release(k dispatchKey, e *dispatchEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	list := x.m[k]
	for i, have := range list {
		if have == e {
			x.m[k] = append(list[:i:i], list[i+1:]...)
			x.n--
			break
		}
	}
	if len(x.m[k]) == 0 {
		delete(x.m, k)
	}
}

// update sets an entry's state (and, for a terminal state, its result and window).
func (x *dispatchIndex) update(e *dispatchEntry, f func(*dispatchEntry)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	f(e)
}

// snapshot returns a copy of an entry read under the lock.
func (x *dispatchIndex) snapshot(e *dispatchEntry) dispatchEntry {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := *e
	return c
}

func (x *dispatchIndex) sweepLocked(now time.Time) {
	for k, list := range x.m {
		kept := list[:0]
		for _, e := range list {
			if e.state.Terminal() && !now.Before(e.expires) {
				x.n--
				continue
			}
			kept = append(kept, e)
		}
		if len(kept) == 0 {
			delete(x.m, k)
		} else {
			x.m[k] = kept
		}
	}
}

// recover runs journal recovery and loads what retries must see: every non-terminal record
// (INDETERMINATE after recovery, or in flight in another live process of a shared store) and
// every terminal record whose authority has not yet expired.
func (g *gate) recover(ctx context.Context) error {
	n, err := g.journal.RecoverOnStart(ctx)
	if err != nil {
		return fmt.Errorf("sink: journal recovery: %w", err)
	}
	if n > 0 {
		g.log.Info("recovered in-flight dispatches as INDETERMINATE", "count", n)
	}
	now := g.now()
	for _, st := range []journal.State{journal.StateIndeterminate, journal.StateConsumed,
		journal.StateDispatchPending, journal.StateInvoked} {
		recs, err := g.journal.InState(ctx, st)
		if err != nil {
			return fmt.Errorf("sink: loading %s dispatches: %w", st, err)
		}
		for _, r := range recs {
			g.dispatches.add(dispatchKey{r.ActionDigest, r.Upstream}, &dispatchEntry{
				actID: r.ActID, authorityID: r.AuthorityID, operationID: r.OperationID, state: r.State,
			})
		}
	}
	// A settled dispatch is replayable only while its authority is unexpired, and an authority
	// lives at most authority.MaxTTL from its issue, which precedes the record's creation (up to
	// the skew between the issuer's clock and this one; an hour is allowed for it): records
	// created before that are not read at all, so a start does not decode the whole journal.
	since := now.Add(-authority.MaxTTL - time.Hour)
	for _, st := range []journal.State{journal.StateExecuted, journal.StateFailed} {
		recs, err := g.journal.InStateSince(ctx, st, since)
		if err != nil {
			return fmt.Errorf("sink: loading %s dispatches: %w", st, err)
		}
		for _, r := range recs {
			if now.Sub(r.CompletedAt) > authority.MaxTTL {
				continue // its authority has expired whatever its TTL was
			}
			a, err := g.store.Get(ctx, g.namespace, r.AuthorityID)
			if err != nil || !now.Before(a.Authority.ExpiresAt) {
				continue
			}
			g.dispatches.add(dispatchKey{r.ActionDigest, r.Upstream}, &dispatchEntry{
				actID: r.ActID, authorityID: r.AuthorityID, operationID: r.OperationID, state: r.State,
				expires: a.Authority.ExpiresAt, result: r.Result,
			})
		}
	}
	return nil
}

// EvidenceDigest is the journal's evidence digest of an outcome: "sha256:" and the hex SHA-256
// of the bytes (jcs.Digest). The sidecar's journal uses it too.
func EvidenceDigest(b []byte) string { return jcs.Digest(b) }

// ClassifyOutcome is what one invocation of a dispatch establishes (action-evidence-boundary
// "Classify the Effect Outcome"): EXECUTED and FAILED only on the upstream's authoritative
// answer (or, for FAILED, the invoker's certainty that nothing was sent); a transport error or
// timeout after bytes may have left is INDETERMINATE; an acceptance to run later
// (OutcomeAccepted) is INVOKED, the outcome to come (Gate.Settle). The outcome carries its evidence digest
// and, for a terminal state, the result when it fits the journal (journal.MaxResultBytes). The
// embedded gate and the sidecar record their dispatches with it.
func ClassifyOutcome(operationID string, out InvokeResult, ierr error) (journal.State, journal.Outcome) {
	var (
		to journal.State
		o  journal.Outcome
	)
	switch {
	case out.Outcome == OutcomeNotSent:
		to = journal.StateFailed
		o = journal.Outcome{Authoritative: true, Reason: ReasonNotSent,
			EvidenceDigest: EvidenceDigest([]byte("not_sent:" + operationID))}
	case ierr == nil && out.Outcome == OutcomeExecuted:
		to = journal.StateExecuted
		o = journal.Outcome{Authoritative: true, Reason: ReasonUpstreamExecuted, EvidenceDigest: EvidenceDigest(out.Result)}
	case ierr == nil && out.Outcome == OutcomeFailed:
		to = journal.StateFailed
		o = journal.Outcome{Authoritative: true, Reason: ReasonUpstreamFailed, EvidenceDigest: EvidenceDigest(out.Result)}
	case ierr == nil && out.Outcome == OutcomeAccepted:
		// Dispatched and running: no outcome yet, and no result (the journal records one with a
		// terminal outcome only).
		to = journal.StateInvoked
		o = journal.Outcome{Authoritative: true, Reason: ReasonUpstreamAccepted, EvidenceDigest: EvidenceDigest(out.Result)}
	default:
		to = journal.StateIndeterminate
		o = journal.Outcome{Reason: ReasonUpstreamUnknown}
		if len(out.Result) > 0 {
			o.EvidenceDigest = EvidenceDigest(out.Result)
		}
	}
	if to.Terminal() && len(out.Result) <= journal.MaxResultBytes {
		o.Result = []byte(out.Result)
	}
	return to, o
}

// NotDispatchedOutcome settles a DISPATCH_PENDING record FAILED when its act was never sent
// (the durable receipt could not be written): authoritative, because the sink is the only path
// to the upstream and did not take it.
func NotDispatchedOutcome(operationID string) journal.Outcome {
	return journal.Outcome{
		Authoritative:  true,
		EvidenceDigest: EvidenceDigest([]byte("not_dispatched:" + operationID)),
		Reason:         ReasonNotDispatched,
	}
}
