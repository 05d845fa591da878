package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// The authority half of local: Issue, Get, Consume and the combined ConsumeAndPend and
// IssueConsumeAndPend, each one bbolt transaction (the buckets are listed in local.go).

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
			// The budgets' charges, in this commit: a charge that no longer fits refuses the
			// consume and nothing is written (docs/api.md "Budgets").
			if err := chargeTx(tx, operationID, rec.Charges, now); err != nil {
				if budgetRefusal(err) {
					res.err = err
					return nil
				}
				return err
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
		commitAt := l.now()
		if err := authority.CheckTime(issued.Authority, commitAt, authority.DefaultSkew); err != nil {
			refused = err
			return nil
		}
		if err := chargeTx(tx, rec.OperationID, rec.Charges, commitAt); err != nil {
			if budgetRefusal(err) {
				refused = err
				return nil
			}
			return err
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
