package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/review"
)

// OutboxFile is the outbox's file name in Config.JournalDir.
const OutboxFile = "outbox.db"

// OutboxWindow is how far back a start looks in the journal for outcomes not yet
// acknowledged, and how long an acknowledgement is remembered.
const OutboxWindow = 24 * time.Hour

// Retry pacing of the outbox while the service does not acknowledge.
const (
	outboxMinBackoff = 250 * time.Millisecond
	outboxMaxBackoff = 10 * time.Second
)

var outboxBucket = []byte("acknowledged")

// Outbox reports the outcome of every consumed dispatch — EXECUTED, FAILED or INDETERMINATE,
// with its evidence digest and never its result — to the authority service until the service
// acknowledges it (operation Report, idempotent), so that every Act reaches the state the
// journal holds. The journal is the outbox's content: an outcome is queued when it is journaled
// and, at a start, every outcome in the journal (INDETERMINATE ones, and terminal ones of the
// last OutboxWindow) that the outbox file does not record as acknowledged in that state is
// queued again. Reporting never delays the agent: it runs on its own goroutine, retrying with
// backoff while the service is unreachable or refuses for a reason that may pass (timeout,
// unavailable, authentication); a refusal that will not pass (the Act is in another state) is
// logged and not retried.
type Outbox struct {
	db *bolt.DB // nil: acknowledgements in memory only

	mu      sync.Mutex
	pending map[string]journal.DispatchRecord // operation id → the latest outcome to report
	acked   map[string]journal.State          // in-memory acknowledgements (db == nil)
	sent    int                               // reports acknowledged (or refused for good)

	client  *review.Client
	store   journal.Journal
	timeout time.Duration
	now     func() time.Time
	log     logr.Logger
	wake    chan struct{}
	done    chan struct{}
	exited  chan struct{}
	started bool
}

// OpenOutbox opens (creating) the outbox file at path.
func OpenOutbox(path string) (*Outbox, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(outboxBucket); return err }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o := NewMemoryOutbox()
	o.db = db
	return o, nil
}

// NewMemoryOutbox is an outbox whose acknowledgements are not kept across restarts: a start
// reports again what the journal holds.
func NewMemoryOutbox() *Outbox {
	return &Outbox{pending: map[string]journal.DispatchRecord{}, acked: map[string]journal.State{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
}

// Close stops reporting and closes the outbox file.
func (o *Outbox) Close() error {
	o.stop()
	if o.db == nil {
		return nil
	}
	return o.db.Close()
}

// Pending is how many outcomes await the service's acknowledgement.
func (o *Outbox) Pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

// Delivered is how many reports the service acknowledged (or refused for good) since start.
func (o *Outbox) Delivered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sent
}

func (o *Outbox) start(c *review.Client, store *boltstore.Store, timeout time.Duration, now func() time.Time, log logr.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started {
		return
	}
	o.client, o.store, o.timeout, o.now, o.log, o.started = c, store, timeout, now, log, true
	go o.run()
}

func (o *Outbox) stop() {
	o.mu.Lock()
	started := o.started
	select {
	case <-o.done:
	default:
		close(o.done)
	}
	o.mu.Unlock()
	if started {
		<-o.exited
	}
}

// reportable reports whether rec is an outcome the service records on its Act.
func reportable(rec journal.DispatchRecord) bool {
	switch rec.State {
	case journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate:
		return rec.AuthorityID != "" && rec.OperationID != ""
	}
	return false
}

// add queues rec's outcome.
func (o *Outbox) add(rec journal.DispatchRecord) {
	if !reportable(rec) {
		return
	}
	o.mu.Lock()
	o.pending[rec.OperationID] = rec
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// load queues every outcome in the journal that is not acknowledged in its state.
func (o *Outbox) load(ctx context.Context) error {
	acked, err := o.acknowledged()
	if err != nil {
		return err
	}
	since := o.now().Add(-OutboxWindow)
	var recs []journal.DispatchRecord
	for _, st := range []journal.State{journal.StateIndeterminate, journal.StateExecuted, journal.StateFailed} {
		var rs []journal.DispatchRecord
		if st == journal.StateIndeterminate {
			rs, err = o.store.InState(ctx, st)
		} else {
			rs, err = o.store.InStateSince(ctx, st, since)
		}
		if err != nil {
			return fmt.Errorf("outbox: reading %s dispatches: %w", st, err)
		}
		recs = append(recs, rs...)
	}
	n := 0
	for _, r := range recs {
		if reportable(r) && acked[r.OperationID] != r.State {
			o.add(r)
			n++
		}
	}
	if n > 0 {
		o.log.Info("Outcomes not yet acknowledged by the authority service are reported again", "count", n)
	}
	return nil
}

// acknowledged reads the acknowledgements, forgetting those older than OutboxWindow.
func (o *Outbox) acknowledged() (map[string]journal.State, error) {
	if o.db == nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		out := make(map[string]journal.State, len(o.acked))
		for k, v := range o.acked {
			out[k] = v
		}
		return out, nil
	}
	out := map[string]journal.State{}
	cutoff := o.now().Add(-OutboxWindow).Unix()
	err := o.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(outboxBucket)
		var old [][]byte
		err := b.ForEach(func(k, v []byte) error {
			st, at, _ := strings.Cut(string(v), " ")
			if t, err := strconv.ParseInt(at, 10, 64); err == nil && t < cutoff {
				old = append(old, append([]byte(nil), k...))
				return nil
			}
			out[string(k)] = journal.State(st)
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return out, nil
}

// ack records that the outcomes recs need no further report, in one commit of the outbox file.
func (o *Outbox) ack(recs []journal.DispatchRecord) {
	if len(recs) == 0 {
		return
	}
	if o.db != nil {
		at := " " + strconv.FormatInt(o.now().Unix(), 10)
		err := o.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(outboxBucket)
			for _, rec := range recs {
				if err := b.Put([]byte(rec.OperationID), []byte(string(rec.State)+at)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			// Not remembered: the next start reports them again, which the service answers as
			// recorded.
			o.log.Error(err, "Outbox acknowledgements not stored", "count", len(recs), "operation", recs[0].OperationID)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rec := range recs {
		o.acked[rec.OperationID] = rec.State
		if cur, ok := o.pending[rec.OperationID]; ok && cur.State == rec.State {
			delete(o.pending, rec.OperationID)
		}
		o.sent++
	}
}

// OutboxInFlight bounds the reports the outbox has in flight at once. Each waits on the
// authority service and its API server writes (tens of milliseconds under load); one at a
// time, the outbox falls behind a pod making more protected calls a second than that allows.
const OutboxInFlight = 8

// sendAll reports batch with at most OutboxInFlight reports in flight, and records the
// acknowledged ones in one commit. It starts no report once one was not acknowledged or the
// outbox is stopping; failed says whether one was not acknowledged.
func (o *Outbox) sendAll(batch []journal.DispatchRecord) (failed bool) {
	var (
		mu   sync.Mutex
		done []journal.DispatchRecord
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, OutboxInFlight)
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
launch:
	for _, r := range batch {
		select {
		case <-o.done:
			break launch
		case slots <- struct{}{}:
		}
		if stopped() {
			<-slots
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			err := o.send(r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = true
				return
			}
			done = append(done, r)
		})
	}
	wg.Wait()
	o.ack(done)
	return failed
}

func (o *Outbox) run() {
	defer close(o.exited)
	var backoff time.Duration
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			t := time.NewTimer(backoff)
			retry = t.C
			select {
			case <-o.done:
				t.Stop()
				return
			case <-retry:
			}
		} else {
			select {
			case <-o.done:
				return
			case <-o.wake:
			}
		}
		o.mu.Lock()
		batch := make([]journal.DispatchRecord, 0, len(o.pending))
		for _, r := range o.pending {
			batch = append(batch, r)
		}
		o.mu.Unlock()
		failed := o.sendAll(batch)
		select {
		case <-o.done:
			return
		default:
		}
		if failed {
			backoff = min(max(2*backoff, outboxMinBackoff), outboxMaxBackoff)
			continue
		}
		backoff = 0
		if o.Pending() > 0 {
			select {
			case o.wake <- struct{}{}:
			default:
			}
		}
	}
}

// errRetry: the service did not acknowledge, for a reason that may pass.
var errRetry = errors.New("sidecar: outcome not acknowledged yet")

// send reports one outcome. nil means acknowledged, or refused for good (logged).
func (o *Outbox) send(rec journal.DispatchRecord) error {
	var state v1alpha1.ActState
	switch rec.State {
	case journal.StateExecuted:
		state = v1alpha1.ActStateExecuted
	case journal.StateFailed:
		state = v1alpha1.ActStateFailed
	default:
		state = v1alpha1.ActStateIndeterminate
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	resp, err := o.client.Do(ctx, review.Request{Operation: review.OperationReport, Report: &review.ReportRequest{
		ActID: rec.ActID, AuthorityID: rec.AuthorityID, OperationID: rec.OperationID, State: state, EvidenceDigest: rec.EvidenceDigest,
	}})
	switch {
	case err != nil:
		o.log.V(1).Info("Outcome not reported yet: the authority service did not answer", "act", rec.ActID,
			"operation", rec.OperationID, "state", state, "cause", err.Error())
		return errRetry
	case resp.Allowed && resp.Reported != nil && resp.Reported.State == state && resp.Reported.OperationID == rec.OperationID:
		o.log.V(1).Info("Outcome reported", "act", rec.ActID, "actObject", resp.Act, "operation", rec.OperationID, "state", state)
		return nil
	}
	switch resp.Reason {
	case review.ReasonTimeout, review.ReasonUnavailable, review.ReasonUnauthenticated, review.ReasonUnboundToken,
		review.ReasonPodNotFound, review.ReasonNotGoverned, review.ReasonAmbiguousPolicy:
		o.log.V(1).Info("Outcome not reported yet", "act", rec.ActID, "operation", rec.OperationID, "state", state,
			"code", resp.Code, "reason", resp.Reason)
		return errRetry
	}
	o.log.Info("Outcome report refused by the authority service", "act", rec.ActID, "authority", rec.AuthorityID,
		"operation", rec.OperationID, "actionDigest", rec.ActionDigest, "state", state, "evidence", rec.EvidenceDigest,
		"code", resp.Code, "reason", resp.Reason)
	return nil
}

// reportingJournal is the sidecar's journal as the sink writes it: every outcome it records is
// queued in the outbox.
type reportingJournal struct {
	*boltstore.Store
	outbox *Outbox
}

// Transition records an outcome and queues it for the service.
func (j reportingJournal) Transition(ctx context.Context, operationID string, to journal.State, o journal.Outcome) (journal.DispatchRecord, error) {
	rec, err := j.Store.Transition(ctx, operationID, to, o)
	if err == nil {
		j.outbox.add(rec)
	}
	return rec, err
}
