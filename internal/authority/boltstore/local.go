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

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
	"github.com/actgate/actgate/internal/journal"
)

// File layout: one bbolt file, seven buckets.
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
	keySchema         = []byte("schema")
)

// schemaVersion is the layout this build writes. A file of schemaVersion1 (no
// dispatch_by_state) or schemaVersion2 (no moments buckets) is migrated when opened for
// writing; a file of a newer schema is refused, and so is a file of this schema by a build that
// reads an older one (no downgrade: such a build would not maintain the index, and would
// forget the stored moments).
const (
	schemaVersion  = "actgate-boltstore/3"
	schemaVersion2 = "actgate-boltstore/2"
	schemaVersion1 = "actgate-boltstore/1"
)

// storedAuthority is an authority as the file holds it. Payload is the signed canonical bytes
// (authority.ParsePayload), so what is read back is exactly what was signed.
type storedAuthority struct {
	Payload    []byte          `json:"payload"`
	Signature  []byte          `json:"signature"`
	State      authority.State `json:"state"`
	ConsumedAt time.Time       `json:"consumed_at"`
	ConsumedBy string          `json:"consumed_by,omitempty"`
}

func (s storedAuthority) record() (authority.Record, error) {
	a, err := authority.ParsePayload(s.Payload)
	if err != nil {
		return authority.Record{}, unavailablef("corrupt authority record: %v", err)
	}
	a.Signature = bytes.Clone(s.Signature)
	if s.State != authority.StateIssued && s.State != authority.StateConsumed {
		return authority.Record{}, unavailablef("corrupt authority record: state %q", s.State)
	}
	return authority.Record{Authority: a, State: s.State, ConsumedAt: s.ConsumedAt, ConsumedBy: s.ConsumedBy}, nil
}

func decodeStored(v []byte) (storedAuthority, error) {
	var s storedAuthority
	if err := json.Unmarshal(v, &s); err != nil {
		return storedAuthority{}, unavailablef("corrupt authority record: %v", err)
	}
	return s, nil
}

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
		if v != nil && !migrate && string(v) != schemaVersion2 && string(v) != schemaVersion {
			return fmt.Errorf("boltstore: file has schema %q, this build reads %q", v, schemaVersion)
		}
		// Schema 2 → 3 adds the (empty) moments buckets.
		for _, name := range [][]byte{bucketAuthorities, bucketDispatch, bucketByAuthority, bucketByAct, bucketByState, bucketMoments, bucketBySettled} {
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

// stateKey is the dispatch_by_state key of a record; with an empty operationID, the first key of
// state st at or after createdAt.
func stateKey(st journal.State, createdAt time.Time, operationID string) []byte {
	k := binary.BigEndian.AppendUint64(statePrefix(st), uint64(createdAt.UnixNano()))
	return append(k, operationID...)
}

// statePrefix is the prefix of every dispatch_by_state key of state st.
func statePrefix(st journal.State) []byte { return append([]byte(st), 0) }

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
	default:
		err = unavailablef("unknown operation %q", req.Op)
	}
	return resp, err
}

func (l *local) issue(ctx context.Context, a authority.Authority) (authority.Record, error) {
	if err := l.verifier.VerifySignature(a); err != nil {
		return authority.Record{}, err
	}
	payload, err := a.Payload()
	if err != nil {
		return authority.Record{}, err
	}
	stored := storedAuthority{Payload: payload, Signature: a.Signature, State: authority.StateIssued}
	rec, err := stored.record()
	if err != nil {
		return authority.Record{}, err
	}
	if !l.now().Before(rec.Authority.ExpiresAt) {
		return authority.Record{}, fmt.Errorf("%w: not storing an authority that expired at %s", authority.ErrExpired, rec.Authority.ExpiresAt.Format(time.RFC3339Nano))
	}
	enc, err := json.Marshal(stored)
	if err != nil {
		return authority.Record{}, unavailable(err)
	}
	key := []byte(a.ID)
	var res struct{ err error }
	if err := l.batch(ctx, func(tx *bolt.Tx) error {
		res.err = nil
		if err := ctx.Err(); err != nil {
			res.err = unavailable(err)
			return nil
		}
		b := tx.Bucket(bucketAuthorities)
		if b.Get(key) != nil {
			res.err = fmt.Errorf("%w: %s", authority.ErrAlreadyIssued, a.ID)
			return nil
		}
		return b.Put(key, enc)
	}); err != nil {
		return authority.Record{}, err
	}
	if res.err != nil {
		return authority.Record{}, res.err
	}
	return rec, nil
}

func (l *local) get(ctx context.Context, namespace, id string) (authority.Record, error) {
	var (
		rec   authority.Record
		found bool
	)
	err := l.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAuthorities).Get([]byte(id))
		if v == nil {
			return nil
		}
		s, err := decodeStored(v)
		if err != nil {
			return err
		}
		rec, err = s.record()
		found = err == nil
		return err
	})
	if err != nil {
		return authority.Record{}, err
	}
	if !found || rec.Authority.Binding.Namespace != namespace {
		return authority.Record{}, fmt.Errorf("%w: %q in namespace %q", authority.ErrNotFound, id, namespace)
	}
	return rec, nil
}

// consume is Consume (pend == nil) and ConsumeAndPend. It verifies outside the write
// transaction (the signature check is the expensive part and needs no lock), then, inside the
// group commit, compares the stored authority with the one verified and flips ISSUED to
// CONSUMED. Authorities are create-only and never rewritten except by this flip, so "same
// payload and signature, still ISSUED, not expired at commit time" inside the transaction is
// exactly the compare-and-swap: of concurrent consumers, the first in commit order wins and
// every later one reads CONSUMED.
func (l *local) consume(ctx context.Context, inst, id string, expect authority.Binding, operationID string,
	pend *journal.DispatchRecord, receipt []byte) (authority.Record, journal.DispatchRecord, error) {
	var none journal.DispatchRecord
	if err := expect.Validate(); err != nil {
		return authority.Record{}, none, fmt.Errorf("expected binding: %w", err)
	}
	if !authority.ValidID(id) {
		return authority.Record{}, none, fmt.Errorf("%w: %q is not an authority ID", authority.ErrInvalid, id)
	}
	if operationID == "" || len(operationID) > journal.MaxIDLength {
		return authority.Record{}, none, fmt.Errorf("%w: consumption needs an operation ID of 1..%d bytes", authority.ErrInvalid, journal.MaxIDLength)
	}
	var pending journal.DispatchRecord
	if pend != nil {
		var err error
		if pending, err = l.checkPending(*pend, id, expect, receipt, inst); err != nil {
			return authority.Record{}, none, err
		}
	}

	// Read and verify.
	key := []byte(id)
	var (
		seen  storedAuthority
		cur   authority.Record
		found bool
	)
	if err := l.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAuthorities).Get(key)
		if v == nil {
			return nil
		}
		var err error
		if seen, err = decodeStored(v); err != nil {
			return err
		}
		cur, err = seen.record()
		found = err == nil
		return err
	}); err != nil {
		return authority.Record{}, none, err
	}
	if !found || cur.Authority.Binding.Namespace != expect.Namespace {
		return authority.Record{}, none, fmt.Errorf("%w: %q in namespace %q", authority.ErrNotFound, id, expect.Namespace)
	}
	if cur.State == authority.StateConsumed {
		return authority.Record{}, none, consumedErr(cur)
	}
	if err := l.verifier.Verify(cur.Authority, expect, l.now()); err != nil {
		return authority.Record{}, none, err
	}

	// Compare and swap, with the dispatch record in the same commit.
	var res struct {
		auth authority.Record
		rec  journal.DispatchRecord
		err  error
	}
	err := l.batch(ctx, func(tx *bolt.Tx) error {
		res.auth, res.rec, res.err = authority.Record{}, journal.DispatchRecord{}, nil
		if err := ctx.Err(); err != nil {
			res.err = unavailable(err)
			return nil
		}
		b := tx.Bucket(bucketAuthorities)
		v := b.Get(key)
		if v == nil {
			res.err = unavailablef("authority %s vanished while being consumed", id)
			return nil
		}
		st, err := decodeStored(v)
		if err != nil {
			res.err = err
			return nil
		}
		if !bytes.Equal(st.Payload, seen.Payload) || !bytes.Equal(st.Signature, seen.Signature) {
			res.err = unavailablef("authority %s changed while being consumed", id)
			return nil
		}
		if st.State == authority.StateConsumed {
			r, _ := st.record()
			res.err = consumedErr(r)
			return nil
		}
		now := l.now()
		if err := authority.CheckTime(cur.Authority, now, authority.DefaultSkew); err != nil {
			res.err = err
			return nil
		}
		var rec journal.DispatchRecord
		if pend != nil {
			if tx.Bucket(bucketDispatch).Get([]byte(operationID)) != nil {
				res.err = fmt.Errorf("%w: operation %s", journal.ErrExists, operationID)
				return nil
			}
			if op, err := operationOfAuthority(tx, id); err != nil || op != nil {
				res.err = fmt.Errorf("%w: authority %s already has a dispatch record", authority.ErrConsumed, id)
				if err != nil {
					res.err = err
				}
				return nil
			}
			if rec, err = journal.NewRecord(pending, receipt, inst, now); err != nil {
				res.err = err
				return nil
			}
		}
		st.State, st.ConsumedAt, st.ConsumedBy = authority.StateConsumed, now, operationID
		enc, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if err := b.Put(key, enc); err != nil {
			return err
		}
		if pend != nil {
			if err := putRecord(tx, nil, rec, false); err != nil {
				return err
			}
		}
		res.auth = cur
		res.auth.State, res.auth.ConsumedAt, res.auth.ConsumedBy = st.State, st.ConsumedAt, st.ConsumedBy
		res.rec = rec
		return nil
	})
	if err != nil {
		return authority.Record{}, none, err
	}
	return res.auth, res.rec, res.err
}

// checkPending validates the DISPATCH_PENDING record a consume writes: in DISPATCH_PENDING
// (an empty State means that), describing the act authority id is bound to, and well formed.
func (l *local) checkPending(rec journal.DispatchRecord, id string, expect authority.Binding, receipt []byte, inst string) (journal.DispatchRecord, error) {
	switch rec.State {
	case "":
		rec.State = journal.StateDispatchPending
	case journal.StateDispatchPending:
	default:
		return journal.DispatchRecord{}, fmt.Errorf("%w: a consume writes %s, not %s", journal.ErrInvalidRecord, journal.StateDispatchPending, rec.State)
	}
	if err := authority.PendingMatches(rec, id, expect); err != nil {
		return journal.DispatchRecord{}, err
	}
	if _, err := journal.NewRecord(rec, receipt, inst, l.now()); err != nil {
		return journal.DispatchRecord{}, err
	}
	return rec, nil
}

// issueConsumeAndPend is IssueConsumeAndPend: a freshly signed authority is created already
// CONSUMED, with its DISPATCH_PENDING record and receipt, in one group commit (one fsync shared
// with every concurrent writer) instead of Issue's commit followed by ConsumeAndPend's.
//
// Every check of Issue and of Consume is made, once each:
//   - the authority is well formed (Payload: ID derived from the binding, times, key ID) and its
//     signature verifies under a trusted key — Issue's check. Issue then Consume verified the
//     same bytes twice; here they are verified once, and the bytes verified are the bytes
//     written (Payload and Signature, as Issue stores them);
//   - its binding equals expect field by field and it is valid at the store's clock —
//     Consume's Verifier.Verify, with the expiry checked again inside the commit;
//   - the record describes the act the authority is bound to (PendingMatches) and is well formed;
//   - inside the commit: no authority with this ID exists (create-only, so nobody can have
//     consumed it before: it never existed unconsumed), and the operation ID is unused.
//
// Single use: bbolt has one writer at a time, and the authority comes into existence
// CONSUMED in the same transaction, so a concurrent Consume or ConsumeAndPend sees either no
// authority (ErrNotFound) or a consumed one (ErrConsumed), and a concurrent
// IssueConsumeAndPend of the same authority sees it exists (ErrConsumed).
func (l *local) issueConsumeAndPend(ctx context.Context, inst string, a authority.Authority, expect authority.Binding,
	pend journal.DispatchRecord, receipt []byte) (authority.Record, journal.DispatchRecord, error) {
	var none journal.DispatchRecord
	if err := expect.Validate(); err != nil {
		return authority.Record{}, none, fmt.Errorf("expected binding: %w", err)
	}
	payload, err := a.Payload()
	if err != nil {
		return authority.Record{}, none, err
	}
	pending, err := l.checkPending(pend, a.ID, expect, receipt, inst)
	if err != nil {
		return authority.Record{}, none, err
	}
	key := []byte(a.ID)
	// An authority that exists already is refused without verifying or committing anything: a
	// cheap read, so that racing duplicates cost no signature check and no fsync. The commit
	// checks again.
	var existing error
	if err := l.view(ctx, func(tx *bolt.Tx) error {
		existing = nil
		if v := tx.Bucket(bucketAuthorities).Get(key); v != nil {
			existing = alreadyThere(v, a.ID)
		}
		return nil
	}); err != nil {
		return authority.Record{}, none, err
	}
	if existing != nil {
		return authority.Record{}, none, existing
	}
	if err := l.verifier.Verify(a, expect, l.now()); err != nil {
		return authority.Record{}, none, err
	}
	stored := storedAuthority{Payload: payload, Signature: a.Signature, State: authority.StateIssued}
	// The record as Get will read it back (ParsePayload of these bytes), built without parsing
	// them again: Payload succeeded, so the bytes hold exactly a's fields, times at their signed
	// millisecond precision in UTC.
	issued := authority.Record{Authority: a, State: authority.StateIssued}
	issued.Authority.IssuedAt = time.UnixMilli(a.IssuedAt.UnixMilli()).UTC()
	issued.Authority.ExpiresAt = time.UnixMilli(a.ExpiresAt.UnixMilli()).UTC()
	issued.Authority.Signature = bytes.Clone(a.Signature)
	// Everything written is built and encoded here, outside the write lock, so that the group
	// commit — one writer at a time — spends its time on the checks and the fsync. The
	// timestamps (ConsumedAt, the record's CreatedAt) are therefore the time of the request,
	// a moment before the commit; expiry is still checked at the commit's time, inside it.
	now := l.now()
	rec, err := journal.NewRecord(pending, receipt, inst, now)
	if err != nil {
		return authority.Record{}, none, err
	}
	consumed := stored
	consumed.State, consumed.ConsumedAt, consumed.ConsumedBy = authority.StateConsumed, now, rec.OperationID
	encAuth, err := json.Marshal(consumed)
	if err != nil {
		return authority.Record{}, none, unavailable(err)
	}
	encRec, err := json.Marshal(rec)
	if err != nil {
		return authority.Record{}, none, unavailable(err)
	}
	opKey := []byte(rec.OperationID)

	var refused error
	err = l.batch(ctx, func(tx *bolt.Tx) error {
		refused = nil
		if err := ctx.Err(); err != nil {
			refused = unavailable(err)
			return nil
		}
		b := tx.Bucket(bucketAuthorities)
		if v := b.Get(key); v != nil {
			refused = alreadyThere(v, a.ID)
			return nil
		}
		if tx.Bucket(bucketDispatch).Get(opKey) != nil {
			refused = fmt.Errorf("%w: operation %s", journal.ErrExists, rec.OperationID)
			return nil
		}
		if err := authority.CheckTime(issued.Authority, l.now(), authority.DefaultSkew); err != nil {
			refused = err
			return nil
		}
		if err := b.Put(key, encAuth); err != nil {
			return err
		}
		// No dispatch_by_authority entry: the record is found through ConsumedBy, as for
		// ConsumeAndPend.
		return putEncodedRecord(tx, nil, rec, encRec, false)
	})
	if err != nil {
		return authority.Record{}, none, err
	}
	if refused != nil {
		return authority.Record{}, none, refused
	}
	out := issued
	out.State, out.ConsumedAt, out.ConsumedBy = consumed.State, consumed.ConsumedAt, consumed.ConsumedBy
	return out, rec, nil
}

// alreadyThere is IssueConsumeAndPend's refusal of an authority that exists: consumed, or still
// issued.
func alreadyThere(v []byte, id string) error {
	st, err := decodeStored(v)
	if err != nil {
		return err
	}
	if st.State == authority.StateConsumed {
		r, err := st.record()
		if err != nil {
			return err
		}
		return consumedErr(r)
	}
	return fmt.Errorf("%w: %s", authority.ErrAlreadyIssued, id)
}

func consumedErr(r authority.Record) error {
	return fmt.Errorf("%w: %s by operation %s at %s", authority.ErrConsumed, r.Authority.ID, r.ConsumedBy, r.ConsumedAt.UTC().Format(time.RFC3339Nano))
}

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
