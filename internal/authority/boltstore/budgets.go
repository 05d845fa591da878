package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/journal"
)

// Budgets in the embedded store (docs/api.md "Budgets"). A dispatch record's Charges are
// applied in the transaction that consumes its authority and writes it DISPATCH_PENDING
// (consume, issueConsumeAndPend): the consume, the record and the charges commit together or
// not at all, and bbolt's single writer makes "fits, then charge" one step, so concurrent calls
// that each fit but together exceed never all commit. The commit that makes the record FAILED
// gives the charges back; EXECUTED makes them final (putEncodedRecord).
//
//	budgets        ledger id → budget.Usage (JSON)
//	budget_scopes  scope id ‖ ledger id → empty: the ledgers of one budget, for its key bound
//	budget_ops     operation id → the ledger ids it charged (JSON), until settled or refunded
var (
	bucketBudgets      = []byte("budgets")
	bucketBudgetScopes = []byte("budget_scopes")
	bucketBudgetOps    = []byte("budget_ops")
)

// chargeTx applies op's charges inside tx, all or none: a refusal (an *budget.ExceededError,
// budget.ErrLimit) is returned with nothing written; a decoding failure is a store failure.
func chargeTx(tx *bolt.Tx, op string, charges []budget.Charge, now time.Time) error {
	if len(charges) == 0 {
		return nil
	}
	b, scopes := tx.Bucket(bucketBudgets), tx.Bucket(bucketBudgetScopes)
	out, err := budget.ApplyAll(op, charges, now, func(id string) (*budget.Usage, bool, error) {
		v := b.Get([]byte(id))
		if v == nil {
			return &budget.Usage{}, true, nil
		}
		u, err := decodeUsage(v)
		return &u, false, err
	}, func(scope string) (int, error) { return liveLedgers(tx, scope, now) })
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(out))
	for _, u := range out {
		if err := putUsage(b, u); err != nil {
			return err
		}
		if err := scopes.Put(scopeKey(u.Scope, u.Ledger), []byte{}); err != nil {
			return err
		}
		ids = append(ids, u.Ledger)
	}
	enc, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketBudgetOps).Put([]byte(op), enc)
}

// liveLedgers counts the ledgers of a scope that still count something at now, deleting the
// others (a past day's ledger, a rolling ledger whose charges have all aged out).
func liveLedgers(tx *bolt.Tx, scope string, now time.Time) (int, error) {
	b, scopes := tx.Bucket(bucketBudgets), tx.Bucket(bucketBudgetScopes)
	prefix := []byte(scope)
	// Counting the keys is cheap and over-counts only ledgers that aged out: below the bound
	// that is enough, and only at the bound are the ledgers read and the dead ones deleted.
	var all int
	c := scopes.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		all++
	}
	if all < budget.MaxKeysPerBudget {
		return all, nil
	}
	var n int
	var dead [][]byte
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		id := k[len(prefix):]
		v := b.Get(id)
		if v == nil {
			dead = append(dead, bytes.Clone(k))
			continue
		}
		u, err := decodeUsage(v)
		if err != nil {
			return 0, err
		}
		if u.Empty(now) {
			dead = append(dead, bytes.Clone(k))
			continue
		}
		n++
	}
	for _, k := range dead {
		if err := scopes.Delete(k); err != nil {
			return 0, err
		}
		if err := b.Delete(k[len(prefix):]); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// settleCharges gives back (FAILED) or makes final (EXECUTED) the charges of a record whose
// state moves from prev to rec, in the transaction that writes rec.
func settleCharges(tx *bolt.Tx, prev *journal.DispatchRecord, rec journal.DispatchRecord) error {
	if prev == nil || prev.State == rec.State || len(rec.Charges) == 0 {
		return nil
	}
	switch rec.State {
	case journal.StateFailed:
		return settleOp(tx, rec.OperationID, true)
	case journal.StateExecuted:
		return settleOp(tx, rec.OperationID, false)
	}
	return nil // INDETERMINATE and in-flight states keep the charges spent
}

// settleOp gives back (refund) or makes final op's charges in every ledger it charged, and
// forgets op. An op with no charges (or settled already) changes nothing.
func settleOp(tx *bolt.Tx, op string, refund bool) error {
	ops := tx.Bucket(bucketBudgetOps)
	v := ops.Get([]byte(op))
	if v == nil {
		return nil
	}
	var ids []string
	if err := json.Unmarshal(v, &ids); err != nil {
		return unavailablef("corrupt budget operation %q: %v", op, err)
	}
	b := tx.Bucket(bucketBudgets)
	for _, id := range ids {
		v := b.Get([]byte(id))
		if v == nil {
			continue // the ledger aged out: nothing counts any more
		}
		u, err := decodeUsage(v)
		if err != nil {
			return err
		}
		var changed bool
		if refund {
			changed = u.Refund(op)
		} else {
			changed = u.Settle(op)
		}
		if changed {
			if err := putUsage(b, &u); err != nil {
				return err
			}
		}
	}
	return ops.Delete([]byte(op))
}

func scopeKey(scope, ledger string) []byte { return []byte(scope + ledger) }

func decodeUsage(v []byte) (budget.Usage, error) {
	var u budget.Usage
	if err := json.Unmarshal(v, &u); err != nil {
		return budget.Usage{}, unavailablef("corrupt budget ledger: %v", err)
	}
	return u, nil
}

func putUsage(b *bolt.Bucket, u *budget.Usage) error {
	enc, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return b.Put([]byte(u.Ledger), enc)
}

// budgetRefusal reports whether err is a budget's refusal of a charge (not a store failure).
func budgetRefusal(err error) bool {
	return errors.Is(err, budget.ErrExceeded) || errors.Is(err, budget.ErrLimit)
}

// usage is Ledger.Usage.
func (l *local) usage(ctx context.Context, ledger string) (budget.Usage, error) {
	u := budget.Usage{Ledger: ledger}
	err := l.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBudgets).Get([]byte(ledger))
		if v == nil {
			return nil
		}
		var err error
		u, err = decodeUsage(v)
		return err
	})
	return u, err
}

// usages lists every ledger that still counts something at the store's clock.
func (l *local) usages(ctx context.Context) ([]budget.Usage, error) {
	var out []budget.Usage
	now := l.now()
	err := l.view(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		return tx.Bucket(bucketBudgets).ForEach(func(_, v []byte) error {
			u, err := decodeUsage(v)
			if err != nil {
				return err
			}
			if !u.Empty(now) {
				out = append(out, u)
			}
			return nil
		})
	})
	return out, err
}

// charge is Ledger.Charge outside a consume: its own transaction.
func (l *local) charge(ctx context.Context, op string, charges []budget.Charge) error {
	var refused error
	if err := l.batch(ctx, func(tx *bolt.Tx) error {
		refused = nil
		if err := ctx.Err(); err != nil {
			refused = unavailable(err)
			return nil
		}
		err := chargeTx(tx, op, charges, l.now())
		if budgetRefusal(err) {
			refused = err
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	return refused
}

// settle is Ledger.Refund (refund true) and Settler.Settle (refund false).
func (l *local) settle(ctx context.Context, op string, refund bool) error {
	if err := checkBudgetOp(op); err != nil {
		return err
	}
	return l.batch(ctx, func(tx *bolt.Tx) error { return settleOp(tx, op, refund) })
}

// checkBudgetOp refuses an operation id that cannot name charges.
func checkBudgetOp(op string) error {
	if op == "" || len(op) > budget.MaxOpBytes {
		return fmt.Errorf("%w: operation id of %d bytes", budget.ErrLimit, len(op))
	}
	return nil
}
