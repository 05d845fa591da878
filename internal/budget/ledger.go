package budget

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bounds of the ledger. A client chooses keys (an expression over its own arguments) and how
// many calls it makes, so both are bounded, with EF_BUDGET_LIMIT at the bound.
const (
	// MaxKeysPerBudget bounds the live ledgers (keys with charges in their current window) of
	// one budget.
	MaxKeysPerBudget = 4096
	// MaxOpsPerLedger bounds the charges one ledger holds individually: those not yet settled
	// EXECUTED (in flight, INDETERMINATE). Settled charges fold into at most SubBuckets+1
	// aggregates.
	MaxOpsPerLedger = 4096
	// MaxOpBytes bounds an operation id.
	MaxOpBytes = 256
	// MaxChargesPerOp bounds the charges one operation makes (a rule's budgets).
	MaxChargesPerOp = 8
)

var (
	// ErrExceeded is the error (an *ExceededError) of an enforced charge that does not fit:
	// EF_BUDGET_EXCEEDED.
	ErrExceeded = errors.New("budget exceeded")
	// ErrLimit marks a charge refused at a ledger bound, or a charge that is malformed:
	// EF_BUDGET_LIMIT.
	ErrLimit = errors.New("budget: ledger bound")
)

// Spec is one compiled budget of a rule (api/v1alpha1 Budget).
type Spec struct {
	// Name is the budget's name within its rule.
	Name string
	// Window is the span spending is counted over.
	Window Window
	// KeyBy is the key kind (KeyAgent, ...).
	KeyBy string
	// MaxCalls is the limit on calls per window; 0 means no count limit.
	MaxCalls int64
	// MaxSum is the limit on the sum per window; nil means no sum limit.
	MaxSum *Decimal
	// Pointer is the RFC 6901 pointer to the amount, with MaxSum.
	Pointer string
	// Unit labels the amount (EUR); shown, never converted.
	Unit string
	// Escalate is true when onExceed is Escalate: a person decides a call that does not fit.
	Escalate bool
}

// Ref names the rule a budget belongs to.
type Ref struct {
	Namespace, Policy, Rule string
}

// Charge is what one call adds to one budget's ledger.
type Charge struct {
	// Ledger is the stable id of the counters charged: a digest of namespace, policy, rule,
	// budget, key and window (LedgerID).
	Ledger string `json:"ledger"`
	// Scope is the digest of namespace, policy, rule and budget: the ledgers of one budget
	// share it (MaxKeysPerBudget counts them).
	Scope     string `json:"scope"`
	Namespace string `json:"namespace"`
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	Budget    string `json:"budget"`
	Key       string `json:"key"`
	// WindowStart and WindowEnd are the window the charge counts in (Span).
	WindowStart time.Time `json:"windowStart"`
	WindowEnd   time.Time `json:"windowEnd"`
	// Until is when the charge stops counting (Span.Until).
	Until time.Time `json:"until"`
	// Count is the calls charged (1).
	Count int64 `json:"count"`
	// Amount is the sum charged (0 for a budget without sum).
	Amount Decimal `json:"amount"`
	// MaxCalls and MaxSum are the budget's limits (0 / nil: none).
	MaxCalls int64    `json:"maxCalls,omitempty"`
	MaxSum   *Decimal `json:"maxSum,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	// Enforce is false when a person approved exceeding: the charge is recorded whatever the
	// limits say.
	Enforce bool `json:"enforce"`
}

// LedgerID returns the ledger id of a budget's key in a span's window, and the scope id of the
// budget.
func LedgerID(ref Ref, budget, key string, w Window, s Span) (ledger, scope string) {
	scope = digest(ref.Namespace, ref.Policy, ref.Rule, budget)
	return digest(ref.Namespace, ref.Policy, ref.Rule, budget, key, w.ident(s)), scope
}

// digest is the hex SHA-256 of length-prefixed fields, so no two field lists collide.
func digest(fields ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range fields {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Charge builds the enforced charge a call with these arguments makes to this budget at now,
// for the key already derived (DeriveKey). A budget with a sum reads the amount at its pointer
// (Amount); an unreadable amount is an ErrLimit error wrapping ErrAmount.
func (s Spec) Charge(ref Ref, key string, args []byte, now time.Time) (Charge, error) {
	if err := CheckKey(key); err != nil {
		return Charge{}, fmt.Errorf("%w: %w", ErrLimit, err)
	}
	span := s.Window.Span(now)
	id, scope := LedgerID(ref, s.Name, key, s.Window, span)
	c := Charge{
		Ledger: id, Scope: scope, Namespace: ref.Namespace, Policy: ref.Policy, Rule: ref.Rule, Budget: s.Name, Key: key,
		WindowStart: span.Start, WindowEnd: span.End, Until: span.Until,
		Count: 1, MaxCalls: s.MaxCalls, MaxSum: s.MaxSum, Unit: s.Unit, Enforce: true,
	}
	if s.MaxSum != nil {
		a, err := Amount(args, s.Pointer)
		if err != nil {
			return Charge{}, fmt.Errorf("%w: %w", ErrLimit, err)
		}
		c.Amount = a
	}
	return c, nil
}

// Op is one charge a ledger holds individually: until it is settled EXECUTED, it can be given
// back.
type Op struct {
	ID       string    `json:"id"`
	Until    time.Time `json:"until"`
	Count    int64     `json:"count"`
	Amount   Decimal   `json:"amount"`
	Enforced bool      `json:"enforced"`
}

// Bucket aggregates settled charges that stop counting at the same instant.
type Bucket struct {
	Until  time.Time `json:"until"`
	Count  int64     `json:"count"`
	Amount Decimal   `json:"amount"`
}

// Usage is one ledger: what a budget's key has spent in its window.
type Usage struct {
	Ledger    string `json:"ledger"`
	Scope     string `json:"scope"`
	Namespace string `json:"namespace"`
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	Budget    string `json:"budget"`
	Key       string `json:"key"`
	// MaxCalls, MaxSum and Unit are the limits the newest charge was made under (shown).
	MaxCalls int64    `json:"maxCalls,omitempty"`
	MaxSum   *Decimal `json:"maxSum,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	// WindowEnd is the newest charge's window end (shown).
	WindowEnd time.Time `json:"windowEnd"`
	// Settled are the aggregates of charges settled EXECUTED, by Until.
	Settled []Bucket `json:"settled,omitempty"`
	// Ops are the charges not settled yet, in the order made.
	Ops []Op `json:"ops,omitempty"`
}

// Spent returns the calls and the sum that count at now.
func (u *Usage) Spent(now time.Time) (int64, Decimal) {
	var n int64
	var sum Decimal
	for _, b := range u.Settled {
		if b.Until.After(now) {
			n += b.Count
			sum = sum.Add(b.Amount)
		}
	}
	for _, o := range u.Ops {
		if o.Until.After(now) {
			n += o.Count
			sum = sum.Add(o.Amount)
		}
	}
	return n, sum
}

// Empty reports whether nothing counts any more at now: the ledger can be dropped.
func (u *Usage) Empty(now time.Time) bool {
	for _, b := range u.Settled {
		if b.Until.After(now) {
			return false
		}
	}
	for _, o := range u.Ops {
		if o.Until.After(now) {
			return false
		}
	}
	return true
}

// Prune drops the settled aggregates that no longer count at now. Unsettled charges are kept
// until settled or refunded, so a late refund finds them (they no longer count either way).
func (u *Usage) Prune(now time.Time) {
	u.Settled = slices.DeleteFunc(u.Settled, func(b Bucket) bool { return !b.Until.After(now) })
}

// Has reports whether the ledger holds op unsettled.
func (u *Usage) Has(op string) bool {
	return slices.ContainsFunc(u.Ops, func(o Op) bool { return o.ID == op })
}

// ExceededError is an enforced charge that does not fit: the numbers a denial, a binding
// moment's findings and `actgate budgets` state.
type ExceededError struct {
	Budget, Rule, Key, Unit string
	// SpentCalls and Spent are what counted before this call; AddAmount is what it adds (one
	// call and AddAmount).
	SpentCalls int64
	Spent      Decimal
	AddAmount  Decimal
	// MaxCalls and MaxSum are the limits (0 / nil: none).
	MaxCalls int64
	MaxSum   *Decimal
	// Calls is true when the count limit is passed, Sum when the sum limit is.
	Calls, Sum bool
	WindowEnd  time.Time
}

func (e *ExceededError) Error() string {
	var what string
	switch {
	case e.Calls && e.Sum:
		what = fmt.Sprintf("%d of %d calls and %s of %s%s spent", e.SpentCalls, e.MaxCalls, e.Spent, e.MaxSum, unit(e.Unit))
	case e.Calls:
		what = fmt.Sprintf("%d of %d calls spent", e.SpentCalls, e.MaxCalls)
	default:
		what = fmt.Sprintf("%s of %s%s spent", e.Spent, e.MaxSum, unit(e.Unit))
	}
	return fmt.Sprintf("budget %q of rule %q exceeded: %s, this call adds 1 call and %s%s; the window ends %s",
		e.Budget, e.Rule, what, e.AddAmount, unit(e.Unit), e.WindowEnd.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrExceeded) true.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

// Fits returns nil when c may be applied at now: it is not enforced, or the usage plus c stays
// within every limit c states; else an *ExceededError.
func (u *Usage) Fits(c Charge, now time.Time) error {
	if !c.Enforce {
		return nil
	}
	n, sum := u.Spent(now)
	e := &ExceededError{
		Budget: c.Budget, Rule: c.Rule, Key: c.Key, Unit: c.Unit, SpentCalls: n, Spent: sum, AddAmount: c.Amount,
		MaxCalls: c.MaxCalls, MaxSum: c.MaxSum, WindowEnd: c.WindowEnd,
	}
	e.Calls = c.MaxCalls > 0 && n+c.Count > c.MaxCalls
	e.Sum = c.MaxSum != nil && sum.Add(c.Amount).Cmp(*c.MaxSum) > 0
	if e.Calls || e.Sum {
		return e
	}
	return nil
}

// CheckCharge refuses a malformed charge: no ledger id, a negative count, an op id out of
// bounds.
func CheckCharge(op string, c Charge) error {
	switch {
	case op == "" || len(op) > MaxOpBytes:
		return fmt.Errorf("%w: operation id of %d bytes", ErrLimit, len(op))
	case c.Ledger == "" || c.Scope == "":
		return fmt.Errorf("%w: a charge without a ledger id", ErrLimit)
	case c.Count < 0:
		return fmt.Errorf("%w: a negative count", ErrLimit)
	}
	return nil
}

// Apply charges op to the ledger at now: idempotent per op (a second Apply of the same op
// changes nothing), refused with an *ExceededError when an enforced charge does not fit, and
// with ErrLimit when the ledger holds MaxOpsPerLedger unsettled charges. On error u is
// unchanged.
func (u *Usage) Apply(op string, c Charge, now time.Time) error {
	if err := CheckCharge(op, c); err != nil {
		return err
	}
	if u.Ledger != "" && u.Ledger != c.Ledger {
		return fmt.Errorf("%w: charge for ledger %s applied to %s", ErrLimit, c.Ledger, u.Ledger)
	}
	if u.Has(op) {
		return nil
	}
	if err := u.Fits(c, now); err != nil {
		return err
	}
	if len(u.Ops) >= MaxOpsPerLedger {
		return fmt.Errorf("%w: the ledger of budget %q holds %d unsettled charges", ErrLimit, c.Budget, MaxOpsPerLedger)
	}
	u.Prune(now)
	u.Ledger, u.Scope, u.Namespace, u.Policy, u.Rule, u.Budget, u.Key = c.Ledger, c.Scope, c.Namespace, c.Policy, c.Rule, c.Budget, c.Key
	u.MaxCalls, u.MaxSum, u.Unit, u.WindowEnd = c.MaxCalls, c.MaxSum, c.Unit, c.WindowEnd
	u.Ops = append(u.Ops, Op{ID: op, Until: c.Until, Count: c.Count, Amount: c.Amount, Enforced: c.Enforce})
	return nil
}

// Refund gives back op's charge (its dispatch ended FAILED, or was reconciled FAILED). It
// reports whether the ledger held op unsettled; a settled or unknown op gives nothing back.
func (u *Usage) Refund(op string) bool {
	n := len(u.Ops)
	u.Ops = slices.DeleteFunc(u.Ops, func(o Op) bool { return o.ID == op })
	return len(u.Ops) != n
}

// Settle folds op's charge into the settled aggregates (its dispatch ended EXECUTED): it can no
// longer be given back, and the ledger no longer holds it individually. It reports whether the
// ledger held op unsettled.
func (u *Usage) Settle(op string) bool {
	i := slices.IndexFunc(u.Ops, func(o Op) bool { return o.ID == op })
	if i < 0 {
		return false
	}
	o := u.Ops[i]
	u.Ops = slices.Delete(u.Ops, i, i+1)
	j := slices.IndexFunc(u.Settled, func(b Bucket) bool { return b.Until.Equal(o.Until) })
	if j < 0 {
		u.Settled = append(u.Settled, Bucket{Until: o.Until})
		j = len(u.Settled) - 1
	}
	u.Settled[j].Count += o.Count
	u.Settled[j].Amount = u.Settled[j].Amount.Add(o.Amount)
	return true
}

// Ledger is where a deployment keeps budgets' usage. Charge is all or none: every charge of op
// applies (Usage.Apply) or none does, atomically with respect to every other Charge, Refund and
// Settle. The standalone gate's embedded store charges inside the transaction that consumes the
// authority, so a consume and its charges commit together.
type Ledger interface {
	// Usage returns the ledger's usage; a ledger never charged is a zero Usage with Ledger set.
	Usage(ctx context.Context, ledger string) (Usage, error)
	// Charge applies every charge of op, or none: an *ExceededError or ErrLimit when one does
	// not apply.
	Charge(ctx context.Context, op string, charges []Charge) error
	// Refund gives back every charge op made that is not settled; an unknown op is no error.
	Refund(ctx context.Context, op string) error
}

// Settler is a Ledger that folds settled charges (EXECUTED) into its aggregates.
type Settler interface {
	// Settle makes op's charges final; an unknown op is no error.
	Settle(ctx context.Context, op string) error
}

// ApplyAll applies op's charges to the usages get returns (a working copy the caller writes
// back only when ApplyAll returns nil), all or none. get returns the usage of a ledger id and
// whether the ledger is new; live counts the live ledgers of a scope before this call, for
// MaxKeysPerBudget. Charges to the same ledger twice in one op are refused.
func ApplyAll(op string, charges []Charge, now time.Time, get func(ledger string) (*Usage, bool, error), live func(scope string) (int, error)) ([]*Usage, error) {
	if len(charges) > MaxChargesPerOp {
		return nil, fmt.Errorf("%w: %d charges in one operation; the bound is %d", ErrLimit, len(charges), MaxChargesPerOp)
	}
	out := make([]*Usage, 0, len(charges))
	seen := map[string]bool{}
	added := map[string]int{}
	for _, c := range charges {
		if err := CheckCharge(op, c); err != nil {
			return nil, err
		}
		if seen[c.Ledger] {
			return nil, fmt.Errorf("%w: two charges of one operation to ledger %s", ErrLimit, c.Ledger)
		}
		seen[c.Ledger] = true
		u, isNew, err := get(c.Ledger)
		if err != nil {
			return nil, err
		}
		if isNew {
			n, err := live(c.Scope)
			if err != nil {
				return nil, err
			}
			if n+added[c.Scope] >= MaxKeysPerBudget {
				return nil, fmt.Errorf("%w: budget %q has %d keys with spending in their window", ErrLimit, c.Budget, MaxKeysPerBudget)
			}
			added[c.Scope]++
		}
		if err := u.Apply(op, c, now); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Assess reads the ledger of each charge and returns the enforced charges that do not fit at
// now, as *ExceededError in the order given: the check a gate makes before it decides, so a
// call over a budget is refused (or escalated) before anything is issued. It is advisory: the
// charge itself, at the consume, decides under concurrency.
func Assess(ctx context.Context, l Ledger, charges []Charge, now time.Time) ([]*ExceededError, error) {
	var out []*ExceededError
	for _, c := range charges {
		u, err := l.Usage(ctx, c.Ledger)
		if err != nil {
			return nil, err
		}
		var e *ExceededError
		if errors.As(u.Fits(c, now), &e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Finding states an exceeded budget for a principal's binding moment: the budget, what was
// spent, the limit, the window's end and what the call adds.
func Finding(e *ExceededError) string {
	var spent []string
	if e.MaxCalls > 0 {
		spent = append(spent, fmt.Sprintf("%d of %d calls", e.SpentCalls, e.MaxCalls))
	}
	if e.MaxSum != nil {
		spent = append(spent, fmt.Sprintf("%s of %s%s", e.Spent, e.MaxSum, unit(e.Unit)))
	}
	adds := "1 call"
	if e.MaxSum != nil {
		adds += " and " + e.AddAmount.String() + unit(e.Unit)
	}
	return fmt.Sprintf("Budget %s of rule %s (key %s): %s spent in the window ending %s; this call adds %s, over the limit.",
		e.Budget, e.Rule, e.Key, strings.Join(spent, " and "), e.WindowEnd.Format(time.RFC3339), adds)
}

// ChargeCall is Charge for a call whose arguments a gate holds twice: raw as the agent sent them
// (what the upstream reads) and canonical (what the authority's digest binds, RFC 8785, whose
// numbers pass through a double). The amount is read from both and must be the same exactly: a
// number that two readers could take for different amounts (an exponent, more digits than a
// double holds) is refused with ErrLimit, never counted as either.
func (s Spec) ChargeCall(ref Ref, key string, raw, canonical []byte, now time.Time) (Charge, error) {
	c, err := s.Charge(ref, key, raw, now)
	if err != nil || s.MaxSum == nil {
		return c, err
	}
	a, err := Amount(canonical, s.Pointer)
	if err != nil {
		return Charge{}, fmt.Errorf("%w: %w", ErrLimit, err)
	}
	if a.Cmp(c.Amount) != 0 {
		return Charge{}, fmt.Errorf("%w: %w at %s: %s reads as %s in canonical form", ErrLimit, ErrAmount, s.Pointer, c.Amount, a)
	}
	return c, nil
}

// Judge decides a call from its exceeded budgets (Assess): the first over a budget whose
// onExceed is Deny refuses it (deny, EF_BUDGET_EXCEEDED); otherwise the exceeded ones, all
// Escalate, go to a person (escalate). specs are the rule's budgets by name.
func Judge(specs []Spec, over []*ExceededError) (deny *ExceededError, escalate []*ExceededError) {
	for _, e := range over {
		i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == e.Budget })
		if i < 0 || !specs[i].Escalate {
			return e, nil
		}
		escalate = append(escalate, e)
	}
	return nil, escalate
}

// PriorSpending is a charge standing for what a key already spent in the current window (a
// policy test's stated spending): count calls and amount, not enforced.
func (s Spec) PriorSpending(ref Ref, key string, calls int64, amount Decimal, now time.Time) Charge {
	span := s.Window.Span(now)
	id, scope := LedgerID(ref, s.Name, key, s.Window, span)
	return Charge{
		Ledger: id, Scope: scope, Namespace: ref.Namespace, Policy: ref.Policy, Rule: ref.Rule, Budget: s.Name, Key: key,
		WindowStart: span.Start, WindowEnd: span.End, Until: span.Until,
		Count: calls, Amount: amount, MaxCalls: s.MaxCalls, MaxSum: s.MaxSum, Unit: s.Unit,
	}
}
