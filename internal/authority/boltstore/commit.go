package boltstore

import (
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// committer is a group commit over bbolt: concurrent writers share one read-write transaction
// and therefore one fsync. It keeps the contract of bbolt's DB.Batch (batch.go) — a function
// may run more than once; a function that fails is taken out, the rest re-run, and the failed
// one re-run alone so its error reaches only its caller — but forms groups differently.
//
// DB.Batch closes a group when a timer (MaxBatchDelay) fires and then waits for the writer
// lock, so while one commit is fsyncing, later callers are split into many small groups that
// each pay their own commit, and a longer window makes a lone caller wait it out on every call
// (docs/performance.md "Group commit in the embedded store"). Here the group is everyone who
// arrived while the previous commit ran, and nobody waits for a timer: the first caller with no
// commit in progress commits at once (a lone caller pays exactly one commit), and when a commit
// ends, leadership passes to the first queued caller, which commits everything queued by then. No
// caller leads for longer than its own group.
type committer struct {
	db       *bolt.DB
	maxBatch int

	mu      sync.Mutex
	queue   []*commitCall
	leading bool
}

type commitCall struct {
	fn   func(*bolt.Tx) error
	done chan error    // the call's result
	lead chan struct{} // told to lead the next group
}

// do runs fn in a group commit and returns when the transaction that ran fn's last run has
// committed (nil) or failed (its error, for this caller only).
func (c *committer) do(fn func(*bolt.Tx) error) error {
	call := &commitCall{fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, call)
	if !c.leading {
		c.leading = true
		c.mu.Unlock()
		c.lead()
	} else {
		c.mu.Unlock()
	}
	for {
		select {
		case err := <-call.done:
			return err
		case <-call.lead:
			c.lead()
		}
	}
}

// lead commits one group — the queue's first maxBatch calls, which include the leader's own —
// and then hands leadership to the next queued caller or gives it up.
func (c *committer) lead() {
	c.mu.Lock()
	n := min(len(c.queue), c.maxBatch)
	group := make([]*commitCall, n)
	copy(group, c.queue)
	c.queue = append(c.queue[:0:0], c.queue[n:]...)
	c.mu.Unlock()

	c.commit(group)

	c.mu.Lock()
	if len(c.queue) == 0 {
		c.leading = false
	} else {
		c.queue[0].lead <- struct{}{}
	}
	c.mu.Unlock()
}

// commit is bbolt batch.go's run: try the whole group; if a function fails, roll back, take it
// out, run it alone for its caller, and retry the rest.
func (c *committer) commit(group []*commitCall) {
	for len(group) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, call := range group {
				if err := safelyCall(call.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			call := group[failed]
			group = append(group[:failed:failed], group[failed+1:]...)
			call.done <- c.db.Update(func(tx *bolt.Tx) error { return safelyCall(call.fn, tx) })
			continue
		}
		for _, call := range group {
			call.done <- err
		}
		return
	}
}

func safelyCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("boltstore: panic in transaction: %v", p)
		}
	}()
	return fn(tx)
}
