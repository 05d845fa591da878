package journal

import (
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/budget"
)

// Limits on what a record may carry, so one record cannot grow a store without bound.
const (
	MaxIDLength     = 253      // operation, act and authority IDs (a Kubernetes object name fits)
	MaxFieldLength  = 2048     // upstream and tool
	MaxResultBytes  = 1 << 20  // recorded result for retry-returns
	MaxReceiptBytes = 64 << 10 // one receipt blob
	MaxReceipts     = 16       // receipts per record
)

// allowed lists, for each non-terminal state, the states Transition may move it to. INDETERMINATE
// has no entry: only ApplyReconciliation leaves it. EXECUTED and FAILED have none: terminal.
//
// DISPATCH_PENDING may go straight to a terminal outcome: AEB "Invoke the Frozen Action" requires
// INVOKED "or a terminal outcome" to be durable before success is reported, so a sink may skip the
// extra commit for INVOKED.
var allowed = map[State][]State{
	StateConsumed:        {StateDispatchPending},
	StateDispatchPending: {StateInvoked, StateExecuted, StateFailed, StateIndeterminate},
	StateInvoked:         {StateExecuted, StateFailed, StateIndeterminate},
}

// CanTransition reports whether Transition may move a record from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range allowed[from] {
		if s == to {
			return true
		}
	}
	return false
}

// ValidateNew checks a record handed to Journal.Begin.
func ValidateNew(rec DispatchRecord) error {
	for _, f := range []struct {
		name string
		v    string
		max  int
	}{
		{"operation ID", rec.OperationID, MaxIDLength},
		{"act ID", rec.ActID, MaxIDLength},
		{"authority ID", rec.AuthorityID, MaxIDLength},
		{"upstream", rec.Upstream, MaxFieldLength},
		{"tool", rec.Tool, MaxFieldLength},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: %s is empty", ErrInvalidRecord, f.name)
		}
		if len(f.v) > f.max {
			return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalidRecord, f.name, f.max)
		}
	}
	if !IsDigest(rec.ActionDigest) {
		return fmt.Errorf("%w: action digest %q is not sha256:<64 hex>", ErrInvalidRecord, rec.ActionDigest)
	}
	if !IsDigest(rec.ArgumentsDigest) {
		return fmt.Errorf("%w: arguments digest %q is not sha256:<64 hex>", ErrInvalidRecord, rec.ArgumentsDigest)
	}
	if rec.State != StateConsumed && rec.State != StateDispatchPending {
		return fmt.Errorf("%w: a record begins in %s or %s, not %q", ErrInvalidRecord, StateConsumed, StateDispatchPending, rec.State)
	}
	if len(rec.Charges) > budget.MaxChargesPerOp {
		return fmt.Errorf("%w: %d budget charges; the bound is %d", ErrInvalidRecord, len(rec.Charges), budget.MaxChargesPerOp)
	}
	if rec.EvidenceDigest != "" || len(rec.Result) != 0 || len(rec.History) != 0 || len(rec.Receipts) != 0 {
		return fmt.Errorf("%w: a new record carries no evidence, result, receipts or history", ErrInvalidRecord)
	}
	return nil
}

// NewRecord returns rec as Begin stores it: timestamps set, the creation step and the receipt
// recorded, owned by instance.
func NewRecord(rec DispatchRecord, receipt []byte, instance string, now time.Time) (DispatchRecord, error) {
	if err := ValidateNew(rec); err != nil {
		return DispatchRecord{}, err
	}
	if err := checkReceipt(nil, receipt); err != nil {
		return DispatchRecord{}, err
	}
	rec.Instance = instance
	rec.CreatedAt, rec.UpdatedAt = now, now
	rec.InvokedAt, rec.CompletedAt = time.Time{}, time.Time{}
	rec.Reason = ""
	rec.History = []Step{{To: rec.State, At: now}}
	if receipt != nil {
		rec.Receipts = [][]byte{clone(receipt)}
	}
	return rec, nil
}

// Apply returns rec moved to state to by the invoker's outcome o, or an error and no change:
//   - EXECUTED and FAILED need o.Authoritative and an evidence digest (AEB "Classify the Effect
//     Outcome": a local exception, timeout or missing response is not FAILED);
//   - a result may be recorded only with a terminal outcome;
//   - repeating the transition that made a record terminal, with the same evidence, returns the
//     record unchanged, so an invoker that lost the reply of its own write can retry it;
//   - everything else not in the allowed table is ErrInvalidTransition.
func Apply(rec DispatchRecord, to State, o Outcome, now time.Time) (DispatchRecord, error) {
	if !to.Valid() {
		return rec, fmt.Errorf("%w: unknown state %q", ErrInvalidTransition, to)
	}
	if to.Terminal() {
		if !o.Authoritative || !IsDigest(o.EvidenceDigest) {
			return rec, fmt.Errorf("%w: %s needs authoritative evidence with a sha256 digest", ErrEvidenceRequired, to)
		}
		if rec.State == to && rec.EvidenceDigest == o.EvidenceDigest {
			return rec, nil
		}
	} else {
		if len(o.Result) != 0 {
			return rec, fmt.Errorf("%w: a result is recorded only with a terminal outcome", ErrInvalidRecord)
		}
		if o.EvidenceDigest != "" && !IsDigest(o.EvidenceDigest) {
			return rec, fmt.Errorf("%w: evidence digest %q is not sha256:<64 hex>", ErrInvalidRecord, o.EvidenceDigest)
		}
	}
	if rec.State == StateIndeterminate {
		return rec, fmt.Errorf("%w: %s leaves only through authenticated reconciliation", ErrInvalidTransition, StateIndeterminate)
	}
	if !CanTransition(rec.State, to) {
		return rec, fmt.Errorf("%w: %s to %s", ErrInvalidTransition, rec.State, to)
	}
	return step(rec, to, o.EvidenceDigest, o.Result, o.Reason, o.Receipt, now)
}

// ApplyReconciliation returns rec moved from INDETERMINATE to r.Outcome, or an error and no
// change (AEB "Perform Authenticated Reconciliation"):
//   - only INDETERMINATE is reconciled (a live DISPATCH_PENDING/INVOKED record belongs to its
//     invoker; recovery promotes stranded ones first);
//   - the observation must be authenticated and match the operation ID, action digest and
//     upstream, else ErrReconciliationRefused;
//   - the outcome is EXECUTED or FAILED with an evidence digest;
//   - repeating an accepted reconciliation with the same outcome and evidence is a no-op.
//
// Reconciliation never resurrects the consumed authority: no state here releases it.
func ApplyReconciliation(rec DispatchRecord, r Reconciliation, now time.Time) (DispatchRecord, error) {
	if r.Outcome != StateExecuted && r.Outcome != StateFailed {
		return rec, fmt.Errorf("%w: reconciliation outcome must be %s or %s, not %q", ErrInvalidTransition, StateExecuted, StateFailed, r.Outcome)
	}
	if !r.Authenticated {
		return rec, fmt.Errorf("%w: observation is not authenticated", ErrReconciliationRefused)
	}
	for _, f := range []struct{ name, got, want string }{
		{"operation ID", r.OperationID, rec.OperationID},
		{"action digest", r.ActionDigest, rec.ActionDigest},
		{"upstream", r.Upstream, rec.Upstream},
	} {
		if f.got != f.want {
			return rec, fmt.Errorf("%w: %s does not match the record", ErrReconciliationRefused, f.name)
		}
	}
	if !IsDigest(r.EvidenceDigest) {
		return rec, fmt.Errorf("%w: reconciliation needs an evidence digest", ErrEvidenceRequired)
	}
	if rec.State == r.Outcome && rec.EvidenceDigest == r.EvidenceDigest {
		return rec, nil
	}
	if rec.State != StateIndeterminate {
		return rec, fmt.Errorf("%w: only %s is reconciled, record is %s", ErrInvalidTransition, StateIndeterminate, rec.State)
	}
	reason := r.Reason
	if reason == "" {
		reason = ReasonAuthenticatedReconciliation
	}
	return step(rec, r.Outcome, r.EvidenceDigest, r.Result, reason, r.Receipt, now)
}

// Recover returns rec promoted to INDETERMINATE if it is in flight (DISPATCH_PENDING, INVOKED),
// and whether it changed (AEB "Classify the Effect Outcome": a stranded intent is uncertain, not
// unused authority).
func Recover(rec DispatchRecord, now time.Time) (DispatchRecord, bool) {
	if !rec.State.InFlight() {
		return rec, false
	}
	out, err := step(rec, StateIndeterminate, "", nil, ReasonRecoveredOnStart, nil, now)
	if err != nil { // step fails only on receipt limits, and no receipt is added here
		return rec, false
	}
	return out, true
}

func step(rec DispatchRecord, to State, evidence string, result []byte, reason Reason, receipt []byte, now time.Time) (DispatchRecord, error) {
	if len(result) > MaxResultBytes {
		return rec, fmt.Errorf("%w: result of %d bytes exceeds %d", ErrInvalidRecord, len(result), MaxResultBytes)
	}
	if err := checkReceipt(rec.Receipts, receipt); err != nil {
		return rec, err
	}
	out := rec
	out.History = append(append([]Step(nil), rec.History...), Step{From: rec.State, To: to, At: now, EvidenceDigest: evidence, Reason: reason})
	out.State = to
	out.UpdatedAt = now
	out.Reason = reason
	if evidence != "" {
		out.EvidenceDigest = evidence
	}
	if to == StateInvoked {
		out.InvokedAt = now
	}
	if to.Terminal() {
		out.CompletedAt = now
		out.Result = clone(result)
	}
	if receipt != nil {
		out.Receipts = append(append([][]byte(nil), rec.Receipts...), clone(receipt))
	}
	return out, nil
}

func checkReceipt(have [][]byte, receipt []byte) error {
	if receipt == nil {
		return nil
	}
	if len(receipt) > MaxReceiptBytes {
		return fmt.Errorf("%w: receipt of %d bytes exceeds %d", ErrInvalidRecord, len(receipt), MaxReceiptBytes)
	}
	if len(have) >= MaxReceipts {
		return fmt.Errorf("%w: record already holds %d receipts", ErrInvalidRecord, MaxReceipts)
	}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// IsDigest reports whether s is "sha256:" followed by 64 lowercase hex digits (docs/architecture.md
// "Digests").
func IsDigest(s string) bool {
	const prefix = "sha256:"
	if len(s) != len(prefix)+64 || s[:len(prefix)] != prefix {
		return false
	}
	for _, c := range s[len(prefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
