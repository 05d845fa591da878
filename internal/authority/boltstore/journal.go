package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/journal"
)

// The dispatch journal half of local: records, their act, authority and state indexes, the
// transitions of journal.Store and the recovery at start (the buckets are listed in local.go).

func decodeRecord(v []byte) (journal.DispatchRecord, error) {
	var r journal.DispatchRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return journal.DispatchRecord{}, unavailablef("corrupt dispatch record: %v", err)
	}
	return r, nil
}

func actKey(actID, operationID string) []byte {
	k := binary.BigEndian.AppendUint16(nil, uint16(len(actID)))
	k = append(k, actID...)
	return append(k, operationID...)
}

// stateKey is the dispatch_by_state key of a record; with an empty operationID, the first key of
// state st at or after createdAt.
func stateKey(st journal.State, createdAt time.Time, operationID string) []byte {
	k := binary.BigEndian.AppendUint64(statePrefix(st), uint64(createdAt.UnixNano()))
	return append(k, operationID...)
}

// statePrefix is the prefix of every dispatch_by_state key of state st.
func statePrefix(st journal.State) []byte { return append([]byte(st), 0) }

// putRecord writes rec, which replaces prev (nil for a new record), and moves its state index
// key; for a new record also the act index and, if indexAuthority, the authority index.
func putRecord(tx *bolt.Tx, prev *journal.DispatchRecord, rec journal.DispatchRecord, indexAuthority bool) error {
	enc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return putEncodedRecord(tx, prev, rec, enc, indexAuthority)
}

// putEncodedRecord is putRecord with rec already encoded (enc = json.Marshal(rec)).
func putEncodedRecord(tx *bolt.Tx, prev *journal.DispatchRecord, rec journal.DispatchRecord, enc []byte, indexAuthority bool) error {
	if err := settleCharges(tx, prev, rec); err != nil {
		return err
	}
	if err := tx.Bucket(bucketDispatch).Put([]byte(rec.OperationID), enc); err != nil {
		return err
	}
	if prev == nil || prev.State != rec.State || !prev.CreatedAt.Equal(rec.CreatedAt) {
		byState := tx.Bucket(bucketByState)
		if prev != nil {
			if err := byState.Delete(stateKey(prev.State, prev.CreatedAt, prev.OperationID)); err != nil {
				return err
			}
		}
		if err := byState.Put(stateKey(rec.State, rec.CreatedAt, rec.OperationID), []byte{}); err != nil {
			return err
		}
	}
	if prev != nil {
		return nil
	}
	if indexAuthority {
		if err := tx.Bucket(bucketByAuthority).Put([]byte(rec.AuthorityID), []byte(rec.OperationID)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketByAct).Put(actKey(rec.ActID, rec.OperationID), []byte{})
}

// operationOfAuthority returns the operation ID of the dispatch record of an authority, or nil:
// from the Begin index, or from the ConsumedBy of an authority held in this file whose
// consuming operation has a record (ConsumeAndPend).
func operationOfAuthority(tx *bolt.Tx, authorityID string) ([]byte, error) {
	if op := tx.Bucket(bucketByAuthority).Get([]byte(authorityID)); op != nil {
		return op, nil
	}
	v := tx.Bucket(bucketAuthorities).Get([]byte(authorityID))
	if v == nil {
		return nil, nil
	}
	st, err := decodeStored(v)
	if err != nil {
		return nil, err
	}
	if st.ConsumedBy == "" {
		return nil, nil
	}
	rv := tx.Bucket(bucketDispatch).Get([]byte(st.ConsumedBy))
	if rv == nil {
		return nil, nil
	}
	r, err := decodeRecord(rv)
	if err != nil {
		return nil, err
	}
	if r.AuthorityID != authorityID { // consumed by Consume under an ID some other record uses
		return nil, nil
	}
	return []byte(st.ConsumedBy), nil
}

func (l *local) begin(ctx context.Context, inst string, rec journal.DispatchRecord, receipt []byte) (journal.DispatchRecord, error) {
	if _, err := journal.NewRecord(rec, receipt, inst, l.now()); err != nil {
		return journal.DispatchRecord{}, err
	}
	var res struct {
		rec journal.DispatchRecord
		err error
	}
	if err := l.batch(ctx, func(tx *bolt.Tx) error {
		res.rec, res.err = journal.DispatchRecord{}, nil
		if err := ctx.Err(); err != nil {
			res.err = unavailable(err)
			return nil
		}
		if tx.Bucket(bucketDispatch).Get([]byte(rec.OperationID)) != nil {
			res.err = fmt.Errorf("%w: operation %s", journal.ErrExists, rec.OperationID)
			return nil
		}
		if op, err := operationOfAuthority(tx, rec.AuthorityID); err != nil || op != nil {
			res.err = fmt.Errorf("%w: authority %s already has a dispatch record", journal.ErrExists, rec.AuthorityID)
			if err != nil {
				res.err = err
			}
			return nil
		}
		r, err := journal.NewRecord(rec, receipt, inst, l.now())
		if err != nil {
			res.err = err
			return nil
		}
		if err := chargeTx(tx, r.OperationID, r.Charges, r.CreatedAt); err != nil {
			if budgetRefusal(err) {
				res.err = err
				return nil
			}
			return err
		}
		if err := putRecord(tx, nil, r, true); err != nil {
			return err
		}
		res.rec = r
		return nil
	}); err != nil {
		return journal.DispatchRecord{}, err
	}
	return res.rec, res.err
}

// update applies a journal rule to one record. The record is read, the rule applied and the
// result encoded outside the write lock; inside the group commit the record is written only if
// it is byte for byte the one read (a compare-and-swap on the stored bytes), so the commit's one
// writer does no decoding or encoding. If the record changed in between (another process of a
// shared store, recovery), the rule is applied again inside the commit, to what is there then.
// A refusal computed outside (ErrNotFound, an invalid transition) is returned as it is: it was
// true of the record as committed when read.
func (l *local) update(ctx context.Context, operationID string, apply func(journal.DispatchRecord, time.Time) (journal.DispatchRecord, error)) (journal.DispatchRecord, error) {
	key := []byte(operationID)
	var seen []byte
	if err := l.view(ctx, func(tx *bolt.Tx) error {
		seen = bytes.Clone(tx.Bucket(bucketDispatch).Get(key))
		return nil
	}); err != nil {
		return journal.DispatchRecord{}, err
	}
	if seen == nil {
		return journal.DispatchRecord{}, fmt.Errorf("%w: operation %s", journal.ErrNotFound, operationID)
	}
	cur, err := decodeRecord(seen)
	if err != nil {
		return journal.DispatchRecord{}, err
	}
	next, err := apply(cur, l.now())
	if err != nil {
		return journal.DispatchRecord{}, err
	}
	write := len(next.History) != len(cur.History) // an idempotent repeat writes nothing
	var enc []byte
	if write {
		if enc, err = json.Marshal(next); err != nil {
			return journal.DispatchRecord{}, unavailable(err)
		}
	}

	var res struct {
		rec journal.DispatchRecord
		err error
	}
	if err := l.batch(ctx, func(tx *bolt.Tx) error {
		res.rec, res.err = journal.DispatchRecord{}, nil
		if err := ctx.Err(); err != nil {
			res.err = unavailable(err)
			return nil
		}
		v := tx.Bucket(bucketDispatch).Get(key)
		if bytes.Equal(v, seen) {
			if write {
				if err := putEncodedRecord(tx, &cur, next, enc, false); err != nil {
					return err
				}
			}
			res.rec = next
			return nil
		}
		// Changed since it was read: decide again on what is there now.
		if v == nil {
			res.err = fmt.Errorf("%w: operation %s", journal.ErrNotFound, operationID)
			return nil
		}
		cur, err := decodeRecord(v)
		if err != nil {
			res.err = err
			return nil
		}
		again, err := apply(cur, l.now())
		if err != nil {
			res.err = err
			return nil
		}
		if len(again.History) != len(cur.History) {
			if err := putRecord(tx, &cur, again, false); err != nil {
				return err
			}
		}
		res.rec = again
		return nil
	}); err != nil {
		return journal.DispatchRecord{}, err
	}
	return res.rec, res.err
}

func (l *local) record(ctx context.Context, operationID string) (journal.DispatchRecord, error) {
	var (
		rec   journal.DispatchRecord
		found bool
	)
	err := l.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDispatch).Get([]byte(operationID))
		if v == nil {
			return nil
		}
		var err error
		rec, err = decodeRecord(v)
		found = err == nil
		return err
	})
	if err != nil {
		return journal.DispatchRecord{}, err
	}
	if !found {
		return journal.DispatchRecord{}, fmt.Errorf("%w: operation %s", journal.ErrNotFound, operationID)
	}
	return rec, nil
}

func (l *local) byAuthority(ctx context.Context, authorityID string) (journal.DispatchRecord, error) {
	var (
		rec   journal.DispatchRecord
		found bool
	)
	err := l.view(ctx, func(tx *bolt.Tx) error {
		op, err := operationOfAuthority(tx, authorityID)
		if err != nil || op == nil {
			return err
		}
		v := tx.Bucket(bucketDispatch).Get(op)
		if v == nil {
			return unavailablef("index names missing operation %s", op)
		}
		rec, err = decodeRecord(v)
		found = err == nil
		return err
	})
	if err != nil {
		return journal.DispatchRecord{}, err
	}
	if !found {
		return journal.DispatchRecord{}, fmt.Errorf("%w: no dispatch for authority %s", journal.ErrNotFound, authorityID)
	}
	return rec, nil
}

func (l *local) byAct(ctx context.Context, actID string) ([]journal.DispatchRecord, error) {
	var recs []journal.DispatchRecord
	prefix := actKey(actID, "")
	err := l.view(ctx, func(tx *bolt.Tx) error {
		ops := tx.Bucket(bucketDispatch)
		c := tx.Bucket(bucketByAct).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			op := k[len(prefix):]
			v := ops.Get(op)
			if v == nil {
				return unavailablef("index names missing operation %s", op)
			}
			r, err := decodeRecord(v)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(recs, func(a, b journal.DispatchRecord) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return recs, nil
}

// inState scans every record: the reconciler lists INDETERMINATE records rarely, and the journal
// of one embedded sink is small. A state index is the change to make if that stops being true.
func (l *local) inState(ctx context.Context, s journal.State, since time.Time) ([]journal.DispatchRecord, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: unknown state %q", journal.ErrInvalidRecord, s)
	}
	var recs []journal.DispatchRecord
	err := l.view(ctx, func(tx *bolt.Tx) error {
		var err error
		recs, err = recordsInState(tx, s, since)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// recordsInState reads the records of state st created at or after since (zero: all) through
// dispatch_by_state, oldest first.
func recordsInState(tx *bolt.Tx, st journal.State, since time.Time) ([]journal.DispatchRecord, error) {
	var recs []journal.DispatchRecord
	prefix := statePrefix(st)
	from := prefix
	if since.After(time.Unix(0, 0)) {
		from = stateKey(st, since, "")
	}
	ops := tx.Bucket(bucketDispatch)
	c := tx.Bucket(bucketByState).Cursor()
	for k, _ := c.Seek(from); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) < len(prefix)+8 {
			return nil, unavailablef("corrupt state index key %q", k)
		}
		op := k[len(prefix)+8:]
		v := ops.Get(op)
		if v == nil {
			return nil, unavailablef("state index names operation %q, which has no record", op)
		}
		r, err := decodeRecord(v)
		if err != nil {
			return nil, err
		}
		if r.State != st {
			return nil, unavailablef("state index holds operation %q as %s, its record says %s", op, st, r.State)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// inFlightStates are the states journal.Recover moves to INDETERMINATE (State.InFlight;
// TestInFlightStatesMatchJournal).
var inFlightStates = []journal.State{journal.StateDispatchPending, journal.StateInvoked}

func (l *local) recoverOnStart(ctx context.Context) (int, error) {
	live := l.live()
	var n int
	err := run(ctx, func() error {
		if err := l.db.Update(func(tx *bolt.Tx) error {
			n = 0
			now := l.now()
			var prev, changed []journal.DispatchRecord
			for _, st := range inFlightStates {
				recs, err := recordsInState(tx, st, time.Time{})
				if err != nil {
					return err
				}
				for _, r := range recs {
					if live[r.Instance] {
						continue
					}
					if out, ok := journal.Recover(r, now); ok {
						prev, changed = append(prev, r), append(changed, out)
					}
				}
			}
			for i, r := range changed {
				if err := putRecord(tx, &prev[i], r, false); err != nil {
					return err
				}
			}
			n = len(changed)
			return nil
		}); err != nil {
			return unavailable(err)
		}
		return nil
	})
	return n, err
}
