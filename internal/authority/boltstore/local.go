package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
	"github.com/actgate/actgate/internal/journal"
)

// File layout: one bbolt file, ten buckets (the three budget buckets are described in budgets.go).
//
//	meta                  "schema" → schemaVersion
//	authorities           authority ID → storedAuthority (JSON; the exact signed payload bytes)
//	dispatch              operation ID → journal.DispatchRecord (JSON)
//	dispatch_by_authority authority ID → operation ID, for records written by Begin (at most one
//	                      dispatch per authority); a record written by ConsumeAndPend is found
//	                      through its authority's ConsumedBy instead, which saves a random page
//	                      write per consume
//	dispatch_by_act       uint16 len(act ID) ‖ act ID ‖ operation ID → empty
//	dispatch_by_state     state ‖ 0x00 ‖ uint64 CreatedAt (Unix ns) ‖ operation ID → empty,
//	                      one key per record, moved with each transition in the same
//	                      transaction: InState and RecoverOnStart read the records of one
//	                      state without scanning the journal (schema 2)
//	moments               moment ID → storedMoment (JSON; the gate's record of one binding
//	                      moment, its votes, resolution and grants) (schema 3)
//	moments_by_settled    uint64 Settled (Unix ns) ‖ moment ID → empty, one key per moment,
//	                      moved with each write: retention deletes the settled ones without
//	                      reading the others (schema 3)
var (
	bucketMeta        = []byte("meta")
	bucketAuthorities = []byte("authorities")
	bucketDispatch    = []byte("dispatch")
	bucketByAuthority = []byte("dispatch_by_authority")
	bucketByAct       = []byte("dispatch_by_act")
	bucketByState     = []byte("dispatch_by_state")
	bucketMoments     = []byte("moments")
	bucketBySettled   = []byte("moments_by_settled")
	// The budget buckets (budgets.go) are schema 4.
	keySchema = []byte("schema")
)

// schemaVersion is the layout this build writes. A file of schemaVersion1 (no
// dispatch_by_state) or schemaVersion2 (no moments buckets) is migrated when opened for
// writing; a file of a newer schema is refused, and so is a file of this schema by a build that
// reads an older one (no downgrade: such a build would not maintain the index, and would
// forget the stored moments).
const (
	schemaVersion  = "actgate-boltstore/4"
	schemaVersion3 = "actgate-boltstore/3"
	schemaVersion2 = "actgate-boltstore/2"
	schemaVersion1 = "actgate-boltstore/1"
)

// local executes operations on a bbolt file this process owns.
type local struct {
	db       *bolt.DB
	commit   *committer
	verifier *authority.Verifier
	now      func() time.Time
	// live returns the instances whose in-flight records RecoverOnStart must leave alone: this
	// process and every client connected to it.
	live func() map[string]bool
}

// initFile creates the buckets of a new file and checks the schema of an existing one.
func initFile(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		v := meta.Get(keySchema)
		migrate := string(v) == schemaVersion1
		if v != nil && !migrate && string(v) != schemaVersion2 && string(v) != schemaVersion3 && string(v) != schemaVersion {
			return fmt.Errorf("boltstore: file has schema %q, this build reads %q", v, schemaVersion)
		}
		// Schema 2 → 3 adds the (empty) moments buckets, 3 → 4 the (empty) budget buckets.
		for _, name := range [][]byte{bucketAuthorities, bucketDispatch, bucketByAuthority, bucketByAct, bucketByState, bucketMoments, bucketBySettled,
			bucketBudgets, bucketBudgetScopes, bucketBudgetOps} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if migrate {
			// Schema 1 → 2: index every record by state, in the transaction that records
			// the new schema (all or nothing).
			if err := tx.Bucket(bucketDispatch).ForEach(func(k, v []byte) error {
				r, err := decodeRecord(v)
				if err != nil {
					return fmt.Errorf("operation %q: %w", k, err)
				}
				return tx.Bucket(bucketByState).Put(stateKey(r.State, r.CreatedAt, r.OperationID), []byte{})
			}); err != nil {
				return fmt.Errorf("boltstore: migrating to %s: %w", schemaVersion, err)
			}
		}
		if string(v) != schemaVersion {
			return meta.Put(keySchema, []byte(schemaVersion))
		}
		return nil
	})
}

// run executes fn, returning early with an unavailability error when ctx ends first. fn keeps
// running in the background in that case; whatever it commits stays committed, and the caller,
// told only "unavailable", denies (fail closed).
func run(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	if ctx.Done() == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
}

func (l *local) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	return run(ctx, func() error {
		var inner error
		if err := l.db.View(func(tx *bolt.Tx) error {
			inner = fn(tx)
			return nil
		}); err != nil {
			return unavailable(err)
		}
		return inner
	})
}

// batch runs fn in a group commit (committer): concurrent callers share one write transaction
// and one fsync. As with bbolt's DB.Batch, whose contract the committer keeps, fn may run more
// than once (when another function in the same group fails, the group is rolled back and re-run
// without it), so every fn given here:
//   - starts by resetting the variables it reports through, so only its last run counts;
//   - checks ctx before writing, so a caller that has given up leaves nothing behind when it can;
//   - reports business outcomes (consumed, exists, ...) through those variables and returns nil
//     for them, so one caller's refusal never rolls back or delays the others;
//   - returns an error only for a storage failure, which the committer turns into a solo retry
//     for that caller and reports to it alone.
//
// The caller reads the captured variables only when batch returns nil: then the transaction
// that ran fn's last run has committed (and been fsynced).
func (l *local) batch(ctx context.Context, fn func(*bolt.Tx) error) error {
	return run(ctx, func() error {
		if err := l.commit.do(fn); err != nil {
			return unavailable(err)
		}
		return nil
	})
}

func (l *local) do(ctx context.Context, inst string, req *wire.Request) (wire.Response, error) {
	var (
		resp wire.Response
		err  error
	)
	switch req.Op {
	case wire.OpIssue:
		resp.Authority, err = l.issue(ctx, req.Authority)
	case wire.OpGet:
		resp.Authority, err = l.get(ctx, req.Namespace, req.ID)
	case wire.OpConsume:
		resp.Authority, _, err = l.consume(ctx, inst, req.ID, req.Expect, req.Consumption.OperationID, nil, nil)
	case wire.OpConsumeAndPend:
		rec := req.Record
		resp.Authority, resp.Record, err = l.consume(ctx, inst, req.ID, req.Expect, rec.OperationID, &rec, req.Receipt)
	case wire.OpIssueConsumeAndPend:
		resp.Authority, resp.Record, err = l.issueConsumeAndPend(ctx, inst, req.Authority, req.Expect, req.Record, req.Receipt)
	case wire.OpBegin:
		resp.Record, err = l.begin(ctx, inst, req.Record, req.Receipt)
	case wire.OpTransition:
		resp.Record, err = l.update(ctx, req.OperationID, func(r journal.DispatchRecord, now time.Time) (journal.DispatchRecord, error) {
			return journal.Apply(r, req.To, req.Outcome, now)
		})
	case wire.OpReconcile:
		resp.Record, err = l.update(ctx, req.OperationID, func(r journal.DispatchRecord, now time.Time) (journal.DispatchRecord, error) {
			return journal.ApplyReconciliation(r, req.Reconciliation, now)
		})
	case wire.OpRecord:
		resp.Record, err = l.record(ctx, req.OperationID)
	case wire.OpByAuthority:
		resp.Record, err = l.byAuthority(ctx, req.ID)
	case wire.OpByAct:
		resp.Records, err = l.byAct(ctx, req.ActID)
	case wire.OpInState:
		resp.Records, err = l.inState(ctx, req.State, req.Since)
	case wire.OpRecoverOnStart:
		resp.N, err = l.recoverOnStart(ctx)
	case wire.OpPutMoment:
		err = l.putMoment(ctx, req.Moment)
	case wire.OpLoadMoments:
		resp.Moments, err = l.loadMoments(ctx, req.Since)
	case wire.OpBudgetUsage:
		resp.Usage, err = l.usage(ctx, req.Ledger)
	case wire.OpBudgetUsages:
		resp.Usages, err = l.usages(ctx)
	case wire.OpBudgetCharge:
		err = l.charge(ctx, req.OperationID, req.Charges)
	case wire.OpBudgetRefund:
		err = l.settle(ctx, req.OperationID, true)
	case wire.OpBudgetSettle:
		err = l.settle(ctx, req.OperationID, false)
	default:
		err = unavailablef("unknown operation %q", req.Op)
	}
	return resp, err
}
