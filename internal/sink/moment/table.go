package moment

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actgate/actgate/internal/ef"
)

// minSweep is the least number of moments the table holds before it forgets those expired an
// hour ago.
const minSweep = 4096

type sessionAction struct{ session, actionDigest string }

// PendingKey finds the open gate-authored moment of an escalated action in a session.
type PendingKey struct{ Session, ActionDigest, Destination string }

// Grant is authority issued by a resolved moment, waiting for the agent's call of its action.
type Grant struct {
	ActID, AuthorityID, Destination, MomentID string
	Expires                                   time.Time
	Session                                   string // the session the act id was minted for
}

// Table holds moments, grants, declines and the resolutions waiting for delivery.
type Table struct {
	mu      sync.Mutex
	byID    map[string]*Moment
	pending map[PendingKey]*Moment // gate-authored, unresolved: one per escalated action
	grants  map[sessionAction][]Grant
	// agentGrants and agentPending hold the grants and gate-authored pending moments of
	// carried moments, keyed by the moment's agent instead of its session (sessionAction and
	// pendingKey with the agent in the session field): the session they were made in ended
	// with the process that made them.
	agentGrants  map[sessionAction][]Grant
	agentPending map[PendingKey]*Moment
	closed       map[sessionAction]ef.EFCode // declined (EFMomentDeclined) or reopened by question
	deliveries   map[string][]Delivery
	sweepAt      int
	nClosed      atomic.Int64
	nDeliver     atomic.Int64

	// open holds the moments registered and not yet seen resolved or expired, for the
	// pending-moment limits (admit); perAgent and perSession are those limits.
	open                 map[*Moment]struct{}
	PerAgent, PerSession int
}

// NewTable returns an empty table; the gate sets PerAgent and PerSession (0: no limit).
func NewTable() *Table {
	return &Table{
		byID:         map[string]*Moment{},
		pending:      map[PendingKey]*Moment{},
		grants:       map[sessionAction][]Grant{},
		agentGrants:  map[sessionAction][]Grant{},
		agentPending: map[PendingKey]*Moment{},
		closed:       map[sessionAction]ef.EFCode{},
		deliveries:   map[string][]Delivery{},
		open:         map[*Moment]struct{}{},
		sweepAt:      minSweep,
	}
}

// TakeDeliveries returns and forgets the resolutions waiting for a session.
func (t *Table) TakeDeliveries(session string) []Delivery {
	if t.nDeliver.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.deliveries[session]
	if len(d) > 0 {
		delete(t.deliveries, session)
		t.nDeliver.Add(-int64(len(d)))
	}
	return d
}

// Deliver files a resolution for the next result of session.
func (t *Table) Deliver(session string, d Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliveries[session] = append(t.deliveries[session], d)
	t.nDeliver.Add(1)
}

// ClosedCode reports whether calls of an action in a session are refused after a decline or a
// question-space veto, and with which code.
func (t *Table) ClosedCode(session, digest string) (ef.EFCode, bool) {
	if t.nClosed.Load() == 0 {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.closed[sessionAction{session, digest}]
	return c, ok
}

// Declined reports whether a principal declined the action in session.
func (t *Table) Declined(session, digest string) bool {
	c, ok := t.ClosedCode(session, digest)
	return ok && c == ef.EFMomentDeclined
}

// Close refuses the actions in session with code until Reopen (a decline or a question).
func (t *Table) Close(session string, digests []string, code ef.EFCode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range digests {
		k := sessionAction{session, d}
		if _, ok := t.closed[k]; !ok {
			t.nClosed.Add(1)
		}
		t.closed[k] = code
	}
}

// Reopen lifts a Close of the actions in session (a new moment offers them).
func (t *Table) Reopen(session string, digests []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range digests {
		k := sessionAction{session, d}
		if _, ok := t.closed[k]; ok {
			delete(t.closed, k)
			t.nClosed.Add(-1)
		}
	}
}

// GrantFor returns the grant for an action in a session, or of a carried moment of the agent:
// the one for this destination if there is one, else another (whose consume then fails on
// destination, T-D), ok=false if none.
func (t *Table) GrantFor(session, agent, digest, destination string, now time.Time) (Grant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := pickGrant(t.grants, sessionAction{session, digest}, destination, now); ok {
		return g, true
	}
	return pickGrant(t.agentGrants, sessionAction{agent, digest}, destination, now)
}

func pickGrant(grants map[sessionAction][]Grant, k sessionAction, destination string, now time.Time) (Grant, bool) {
	list := grants[k][:0]
	for _, g := range grants[k] {
		if now.Before(g.Expires) {
			list = append(list, g)
		}
	}
	if len(list) == 0 {
		delete(grants, k)
		return Grant{}, false
	}
	grants[k] = list
	for _, g := range list {
		if g.Destination == destination {
			return g, true
		}
	}
	return list[0], true
}

// grantKey is where m's grants for an action are held.
func (t *Table) grantKey(m *Moment, digest string) (map[sessionAction][]Grant, sessionAction) {
	if m.Carried {
		return t.agentGrants, sessionAction{m.Agent, digest}
	}
	return t.grants, sessionAction{m.Session, digest}
}

// AddGrant files g, issued by m for the action digest, where the agent's next call finds it.
func (t *Table) AddGrant(m *Moment, digest string, g Grant) {
	t.mu.Lock()
	defer t.mu.Unlock()
	grants, k := t.grantKey(m, digest)
	grants[k] = append(grants[k], g)
}

// DropGrant forgets a grant (consumed, refused or withdrawn), wherever it is held.
func (t *Table) DropGrant(session, agent, digest, authorityID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropFrom(t.grants, sessionAction{session, digest}, authorityID)
	dropFrom(t.agentGrants, sessionAction{agent, digest}, authorityID)
}

func dropFrom(grants map[sessionAction][]Grant, k sessionAction, authorityID string) {
	list := grants[k]
	for i, g := range list {
		if g.AuthorityID == authorityID {
			grants[k] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(grants[k]) == 0 {
		delete(grants, k)
	}
}

// GrantsOf lists the grants m issued that are still held, for its stored record.
func (t *Table) GrantsOf(m *Moment) []GrantRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []GrantRecord
	for _, o := range m.Options {
		grants, k := t.grantKey(m, o.ActionDigest)
		for _, g := range grants[k] {
			if g.MomentID == m.ID && !slices.ContainsFunc(out, func(r GrantRecord) bool { return r.AuthorityID == g.AuthorityID }) {
				out = append(out, GrantRecord{ActID: g.ActID, AuthorityID: g.AuthorityID, Destination: g.Destination,
					Digest: o.ActionDigest, Expires: g.Expires.UTC()})
			}
		}
	}
	return out
}

// Get returns the moment with id.
func (t *Table) Get(id string) (*Moment, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.byID[id]
	return m, ok
}

// PendingFor returns the open gate-authored moment of an escalated action in a session, or of
// a carried moment of the agent.
func (t *Table) PendingFor(k PendingKey, agent string, now time.Time) (*Moment, bool) {
	if m, ok := t.openPending(t.pending, k, now); ok {
		return m, true
	}
	return t.openPending(t.agentPending, PendingKey{agent, k.ActionDigest, k.Destination}, now)
}

func (t *Table) openPending(pending map[PendingKey]*Moment, k PendingKey, now time.Time) (*Moment, bool) {
	// Lock order is Moment.Mu before Table.mu (Resolve holds a moment while it records
	// grants and deliveries), so the moment is examined after the table is released.
	t.mu.Lock()
	m, ok := pending[k]
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.Mu.Lock()
	open := !m.Resolved && now.Before(m.Expires)
	m.Mu.Unlock()
	if !open {
		t.mu.Lock()
		if pending[k] == m {
			delete(pending, k)
		}
		t.mu.Unlock()
		return nil, false
	}
	return m, true
}

// Restore registers a moment loaded from the MomentStore: pending ones count against the
// pending-moment limits again.
func (t *Table) Restore(m *Moment, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[m.ID] = m
	if m.Resolved || !now.Before(m.Expires) {
		return
	}
	t.open[m] = struct{}{}
	if m.GateAuthored {
		// A gate-authored moment's first option is the escalated call.
		o := m.Options[0]
		t.agentPending[PendingKey{m.Agent, o.ActionDigest, o.Destination}] = m
	}
}

// Remove forgets a moment Add registered (its record could not be stored).
func (t *Table) Remove(m *Moment, pk *PendingKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, m)
	if t.byID[m.ID] == m {
		delete(t.byID, m.ID)
	}
	if pk != nil && t.pending[*pk] == m {
		delete(t.pending, *pk)
	}
}

// ErrLimit: the agent or the session has as many pending moments as allowed.
var ErrLimit = errors.New("sink: pending binding-moment limit reached")

// Admit reports whether a new moment of agent in session stays within the pending-moment
// limits, forgetting the open moments that are resolved or expired by now.
func (t *Table) Admit(agent, session string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.admitLocked(agent, session, now)
}

func (t *Table) admitLocked(agent, session string, now time.Time) error {
	var byAgent, bySession int
	for m := range t.open {
		if m.Settled.Load() || !now.Before(m.Expires) {
			delete(t.open, m)
			continue
		}
		if m.Agent == agent {
			byAgent++
		}
		if m.Session == session {
			bySession++
		}
	}
	switch {
	case t.PerAgent > 0 && byAgent >= t.PerAgent:
		return fmt.Errorf("%w: agent has %d pending", ErrLimit, byAgent)
	case t.PerSession > 0 && bySession >= t.PerSession:
		return fmt.Errorf("%w: session has %d pending", ErrLimit, bySession)
	}
	return nil
}

// Add registers m unless it would exceed the pending-moment limits (ErrLimit).
func (t *Table) Add(m *Moment, pk *PendingKey, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.admitLocked(m.Agent, m.Session, now); err != nil {
		return err
	}
	t.open[m] = struct{}{}
	if len(t.byID) >= t.sweepAt {
		for id, old := range t.byID {
			if now.Sub(old.Expires) > time.Hour {
				delete(t.byID, id)
			}
		}
		t.sweepAt = max(minSweep, 2*len(t.byID))
	}
	t.byID[m.ID] = m
	if pk != nil {
		t.pending[*pk] = m
	}
	return nil
}

// List returns every moment the table holds, in no order.
func (t *Table) List() []*Moment {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Moment, 0, len(t.byID))
	for _, m := range t.byID {
		out = append(out, m)
	}
	return out
}
