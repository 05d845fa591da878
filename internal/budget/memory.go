package budget

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a Ledger in process memory: the reference implementation the others are tested
// against, and the ledger of tests and of `actgate policy test`. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	usage   map[string]*Usage
	ops     map[string][]string // op → ledger ids it charged
	byScope map[string]map[string]bool
	charges int
}

// NewMemory returns an empty Memory ledger reading the time from now (time.Now when nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, usage: map[string]*Usage{}, ops: map[string][]string{}, byScope: map[string]map[string]bool{}}
}

// Usage implements Ledger.
func (m *Memory) Usage(_ context.Context, ledger string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.usage[ledger]
	if !ok {
		return Usage{Ledger: ledger}, nil
	}
	return clone(u), nil
}

// Charge implements Ledger.
func (m *Memory) Charge(_ context.Context, op string, charges []Charge) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.charges++; m.charges%1024 == 0 {
		m.gc(now)
	}
	out, err := ApplyAll(op, charges, now, func(id string) (*Usage, bool, error) {
		u, ok := m.usage[id]
		if !ok {
			return &Usage{}, true, nil
		}
		c := clone(u)
		return &c, false, nil
	}, func(scope string) (int, error) {
		if len(m.byScope[scope]) >= MaxKeysPerBudget {
			m.gc(now)
		}
		return len(m.byScope[scope]), nil
	})
	if err != nil {
		return err
	}
	for _, u := range out {
		m.usage[u.Ledger] = u
		if m.byScope[u.Scope] == nil {
			m.byScope[u.Scope] = map[string]bool{}
		}
		m.byScope[u.Scope][u.Ledger] = true
		if !slices.Contains(m.ops[op], u.Ledger) {
			m.ops[op] = append(m.ops[op], u.Ledger)
		}
	}
	return nil
}

// Refund implements Ledger.
func (m *Memory) Refund(_ context.Context, op string) error {
	m.finish(op, (*Usage).Refund)
	return nil
}

// Settle implements Settler.
func (m *Memory) Settle(_ context.Context, op string) error {
	m.finish(op, (*Usage).Settle)
	return nil
}

// finish applies end (Usage.Refund or Usage.Settle) to op's charge in every ledger it charged,
// then forgets op.
func (m *Memory) finish(op string, end func(*Usage, string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range m.ops[op] {
		if u, ok := m.usage[id]; ok {
			_ = end(u, op)
		}
	}
	delete(m.ops, op)
}

// All returns every ledger's usage, for listing.
func (m *Memory) All() []Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Usage, 0, len(m.usage))
	for _, u := range m.usage {
		out = append(out, clone(u))
	}
	return out
}

// gc drops ledgers nothing counts in any more (a late refund of one of their charges has
// nothing to give back), and the operations that charged only dropped ledgers.
func (m *Memory) gc(now time.Time) {
	for id, u := range m.usage {
		if u.Empty(now) {
			delete(m.usage, id)
			delete(m.byScope[u.Scope], id)
		}
	}
	for op, ids := range m.ops {
		live := ids[:0]
		for _, id := range ids {
			if _, ok := m.usage[id]; ok {
				live = append(live, id)
			}
		}
		if len(live) == 0 {
			delete(m.ops, op)
		} else {
			m.ops[op] = live
		}
	}
}

func clone(u *Usage) Usage {
	c := *u
	c.Settled = append([]Bucket(nil), u.Settled...)
	c.Ops = append([]Op(nil), u.Ops...)
	return c
}
