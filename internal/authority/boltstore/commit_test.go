package boltstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newCommitter(t *testing.T) *committer {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, boltOptions(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	return &committer{db: db, maxBatch: DefaultMaxBatchSize}
}

func put(k string) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put([]byte(k), []byte("v")) }
}

func has(t *testing.T, c *committer, k string) bool {
	t.Helper()
	var ok bool
	if err := c.db.View(func(tx *bolt.Tx) error { ok = tx.Bucket([]byte("b")).Get([]byte(k)) != nil; return nil }); err != nil {
		t.Fatal(err)
	}
	return ok
}

// waitFor polls cond (under the committer's lock) for up to two seconds.
func waitFor(c *committer, cond func() bool) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
	}
}

// waitLeaderBlocked waits until a leader has taken its group off the queue (it then blocks on
// the held writer lock).
func waitLeaderBlocked(c *committer) {
	waitFor(c, func() bool { return c.leading && len(c.queue) == 0 })
	time.Sleep(10 * time.Millisecond) // leading is set just before the group is taken
}

func waitQueued(c *committer, n int) { waitFor(c, func() bool { return len(c.queue) >= n }) }

// TestCommitterGroupsWaitingCallers: callers that arrive while a commit is in progress are
// committed together in the next transaction.
func TestCommitterGroupsWaitingCallers(t *testing.T) {
	c := newCommitter(t)
	hold, err := c.db.Begin(true) // the writer lock: the first leader blocks in Update
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		txs = map[*bolt.Tx]int{}
		wg  sync.WaitGroup
	)
	call := func(k string) {
		defer wg.Done()
		err := c.do(func(tx *bolt.Tx) error {
			mu.Lock()
			txs[tx]++
			mu.Unlock()
			return put(k)(tx)
		})
		if err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go call("leader")
	waitLeaderBlocked(c)
	for i := range 9 {
		wg.Add(1)
		go call(fmt.Sprint("k", i))
	}
	waitQueued(c, 9)
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(txs) > 2 {
		t.Fatalf("10 calls used %d transactions, want the leader's and one group for the 9 waiting", len(txs))
	}
	for i := range 9 {
		if !has(t, c, fmt.Sprint("k", i)) {
			t.Fatalf("k%d not written", i)
		}
	}
}

// TestCommitterIsolatesFailures: a function that fails (or panics) gets its error alone, its
// writes are rolled back, and every other function in the group still commits — after being
// run again, which is why functions must reset what they report.
func TestCommitterIsolatesFailures(t *testing.T) {
	c := newCommitter(t)
	hold, err := c.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("storage failure")
	var (
		mu   sync.Mutex
		runs = map[string]int{}
		errs = map[string]error{}
		wg   sync.WaitGroup
	)
	submit := func(k string, fn func(*bolt.Tx) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.do(func(tx *bolt.Tx) error {
				mu.Lock()
				runs[k]++
				mu.Unlock()
				return fn(tx)
			})
			mu.Lock()
			errs[k] = err
			mu.Unlock()
		}()
	}
	submit("leader", put("leader"))
	waitLeaderBlocked(c)
	// Queued one at a time so the group's order is known: ok1 runs before each failure and is
	// re-run after each (goroutines started together would queue in any order, and with both
	// failures first nothing would be re-run).
	submit("ok1", put("ok1"))
	waitQueued(c, 1)
	submit("fails", func(tx *bolt.Tx) error {
		if err := put("fails")(tx); err != nil {
			return err
		}
		return boom
	})
	waitQueued(c, 2)
	submit("panics", func(*bolt.Tx) error { panic("bad") })
	waitQueued(c, 3)
	submit("ok2", put("ok2"))
	waitQueued(c, 4)
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	for _, k := range []string{"leader", "ok1", "ok2"} {
		if errs[k] != nil || !has(t, c, k) {
			t.Fatalf("%s: error %v, written %v", k, errs[k], has(t, c, k))
		}
	}
	if !errors.Is(errs["fails"], boom) || has(t, c, "fails") {
		t.Fatalf("failing call: error %v, written %v", errs["fails"], has(t, c, "fails"))
	}
	if errs["panics"] == nil {
		t.Fatal("panicking call reported success")
	}
	if runs["ok1"] < 2 && runs["ok2"] < 2 {
		t.Fatalf("no function of the failed group was re-run (runs %v): the test did not exercise the retry", runs)
	}
}

// TestCommitterAfterClose: a closed database is an error for the caller, not a hang.
func TestCommitterAfterClose(t *testing.T) {
	c := newCommitter(t)
	c.db.Close()
	if err := c.do(put("x")); err == nil {
		t.Fatal("commit on a closed database succeeded")
	}
}
