package kubeledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/budget"
)

// Defaults of Options.
const (
	DefaultTimeout      = 5 * time.Second
	DefaultMaxAttempts  = 128
	DefaultFieldManager = "actgate-authority"
	// maxRemembered bounds the objects a Ledger remembers; at the bound it forgets them all.
	maxRemembered = 4096
)

// ErrUnavailable: the API server failed, timed out, answered ambiguously, or the ledger stayed
// contended past Options.MaxAttempts. Nothing may be concluded from it but "refuse".
var ErrUnavailable = errors.New("kubeledger: budget ledger unavailable")

// ErrNamespace: a charge names another namespace than the ledger's.
var ErrNamespace = errors.New("kubeledger: charge for another namespace")

// Options wire a Ledger.
type Options struct {
	// Client reads and writes BudgetLedgers and reads ToolPolicies (the ledger's owner). It must
	// talk to the API server (client.New), never through an informer cache: every decision
	// rests on a quorum read or a compare-and-swap. Required.
	Client client.Client
	// Now is the ledger's clock (windows, ageing out). Optional: time.Now.
	Now func() time.Time
	// Timeout bounds each Charge, Refund, Settle and Usage. Optional: DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the compare-and-swap attempts of one ledger write. Optional:
	// DefaultMaxAttempts.
	MaxAttempts int
	// FieldManager names the writes in managedFields. Optional: DefaultFieldManager.
	FieldManager string
}

// Ledger keeps budgets in BudgetLedger objects. It is safe for concurrent use, and any number
// of Ledgers in any number of processes may share the same objects. In returns the
// budget.Ledger of one namespace.
type Ledger struct {
	c        client.Client
	now      func() time.Time
	timeout  time.Duration
	attempts int
	manager  string

	mu   sync.Mutex
	seen map[client.ObjectKey]*v1alpha1.BudgetLedger
	// turns serializes this process's writes of one ledger: they take turns on the object
	// it remembers instead of racing each other to 409s (other processes still race by
	// compare-and-swap). An entry lives while someone holds or awaits its turn.
	turns map[client.ObjectKey]*turn
}

// turn is one ledger's write lock: a token in a channel, so a wait can end with its context.
type turn struct {
	ch      chan struct{}
	waiters int
}

// New returns a Ledger.
func New(opts Options) (*Ledger, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("kubeledger: Options.Client is required")
	case opts.Timeout < 0, opts.MaxAttempts < 0:
		return nil, errors.New("kubeledger: Options.Timeout and MaxAttempts must not be negative")
	}
	l := &Ledger{c: opts.Client, now: opts.Now, timeout: opts.Timeout, attempts: opts.MaxAttempts, manager: opts.FieldManager,
		seen: map[client.ObjectKey]*v1alpha1.BudgetLedger{}, turns: map[client.ObjectKey]*turn{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.timeout == 0 {
		l.timeout = DefaultTimeout
	}
	if l.attempts == 0 {
		l.attempts = DefaultMaxAttempts
	}
	if l.manager == "" {
		l.manager = DefaultFieldManager
	}
	return l, nil
}

// In returns the ledger of namespace: its charges must all name that namespace.
func (l *Ledger) In(namespace string) *Namespaced { return &Namespaced{l: l, ns: namespace} }

// Namespaced is a budget.Ledger (and budget.Settler) over the BudgetLedgers of one namespace.
type Namespaced struct {
	l  *Ledger
	ns string
}

var (
	_ budget.Ledger  = (*Namespaced)(nil)
	_ budget.Settler = (*Namespaced)(nil)
)

func unavailable(what string, err error) error {
	return fmt.Errorf("kubeledger: %s: %w: %w", what, ErrUnavailable, err)
}

// Usage implements budget.Ledger: the ledger read by quorum, or a zero Usage when it does not
// exist.
func (n *Namespaced) Usage(ctx context.Context, ledger string) (budget.Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, n.l.timeout)
	defer cancel()
	obj := &v1alpha1.BudgetLedger{}
	err := n.l.c.Get(ctx, client.ObjectKey{Namespace: n.ns, Name: ledger}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return budget.Usage{Ledger: ledger}, nil
	case err != nil:
		return budget.Usage{}, unavailable("read "+ledger, err)
	}
	return usageOf(obj)
}

// Charge implements budget.Ledger: every charge applies or none does (see the package doc).
func (n *Namespaced) Charge(ctx context.Context, op string, charges []budget.Charge) error {
	if len(charges) > budget.MaxChargesPerOp {
		return fmt.Errorf("%w: %d charges in one operation; the bound is %d", budget.ErrLimit, len(charges), budget.MaxChargesPerOp)
	}
	sorted := slices.Clone(charges)
	slices.SortFunc(sorted, func(a, b budget.Charge) int {
		switch {
		case a.Ledger < b.Ledger:
			return -1
		case a.Ledger > b.Ledger:
			return 1
		}
		return 0
	})
	for i, c := range sorted {
		if err := budget.CheckCharge(op, c); err != nil {
			return err
		}
		if c.Namespace != n.ns {
			return fmt.Errorf("%w: %q in the ledger of %q", ErrNamespace, c.Namespace, n.ns)
		}
		if i > 0 && sorted[i-1].Ledger == c.Ledger {
			return fmt.Errorf("%w: two charges of one operation to ledger %s", budget.ErrLimit, c.Ledger)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, n.l.timeout)
	defer cancel()
	for i, c := range sorted {
		if err := n.charge(ctx, op, c); err != nil {
			// All or none: give back what this operation holds in the ledgers charged before.
			// A refund that fails leaves the charge counted (more, never less).
			for _, done := range sorted[:i] {
				_ = n.modify(ctx, done.Ledger, nil, func(u *budget.Usage, _ time.Time) (bool, error) { return u.Refund(op), nil })
			}
			return err
		}
	}
	return nil
}

// charge applies one charge, creating its ledger when it does not exist.
func (n *Namespaced) charge(ctx context.Context, op string, c budget.Charge) error {
	create := func(ctx context.Context) (*v1alpha1.BudgetLedger, error) { return n.newLedger(ctx, c) }
	return n.modify(ctx, c.Ledger, create, func(u *budget.Usage, now time.Time) (bool, error) {
		if u.Has(op) {
			return false, nil
		}
		makeRoom(u, now)
		if err := u.Apply(op, c, now); err != nil {
			return false, err
		}
		return true, nil
	})
}

// makeRoom folds into the settled aggregates the charges that no longer count (a refund of
// them gives nothing back anyway) and, while the ledger holds MaxLedgerOps charges
// individually, the oldest; it drops what no longer counts.
func makeRoom(u *budget.Usage, now time.Time) {
	for _, o := range slices.Clone(u.Ops) {
		if !o.Until.After(now) {
			u.Settle(o.ID)
		}
	}
	for len(u.Ops) >= v1alpha1.MaxLedgerOps {
		u.Settle(u.Ops[0].ID)
	}
	u.Prune(now)
}

// Refund implements budget.Ledger: op's charges are given back in every ledger of the
// namespace that holds them, found by one quorum list (refunds are rare: a FAILED outcome).
func (n *Namespaced) Refund(ctx context.Context, op string) error {
	return n.each(ctx, op, func(u *budget.Usage) bool { return u.Refund(op) })
}

// Settle implements budget.Settler: op's charges are folded into the aggregates.
func (n *Namespaced) Settle(ctx context.Context, op string) error {
	return n.each(ctx, op, func(u *budget.Usage) bool { return u.Settle(op) })
}

// RefundLedgers gives back op's charges in the named ledgers only: the refund of a caller that
// recorded which ledgers it charged, without a list.
func (n *Namespaced) RefundLedgers(ctx context.Context, op string, ledgers []string) error {
	ctx, cancel := context.WithTimeout(ctx, n.l.timeout)
	defer cancel()
	errs := make([]error, 0, len(ledgers))
	for _, id := range ledgers {
		errs = append(errs, n.modify(ctx, id, nil, func(u *budget.Usage, _ time.Time) (bool, error) { return u.Refund(op), nil }))
	}
	return errors.Join(errs...)
}

func (n *Namespaced) each(ctx context.Context, op string, fn func(*budget.Usage) bool) error {
	ctx, cancel := context.WithTimeout(ctx, n.l.timeout)
	defer cancel()
	list := &v1alpha1.BudgetLedgerList{}
	if err := n.l.c.List(ctx, list, client.InNamespace(n.ns)); err != nil {
		return unavailable("list", err)
	}
	var errs []error
	for i := range list.Items {
		if !slices.ContainsFunc(list.Items[i].Status.Ops, func(o v1alpha1.LedgerOp) bool { return o.ID == op }) {
			continue
		}
		errs = append(errs, n.modify(ctx, list.Items[i].Name, nil, func(u *budget.Usage, _ time.Time) (bool, error) { return fn(u), nil }))
	}
	return errors.Join(errs...)
}

// newLedger builds the object of c's ledger, owned by its ToolPolicy, after checking that its
// budget has room for one more key with spending.
func (n *Namespaced) newLedger(ctx context.Context, c budget.Charge) (*v1alpha1.BudgetLedger, error) {
	scope := scopeLabel(c.Scope)
	list := &v1alpha1.BudgetLedgerList{}
	if err := n.l.c.List(ctx, list, client.InNamespace(n.ns), client.MatchingLabels{v1alpha1.LabelBudgetScope: scope}); err != nil {
		return nil, unavailable("count the budget's keys", err)
	}
	now, live := n.l.now(), 0
	for i := range list.Items {
		if u, err := usageOf(&list.Items[i]); err != nil || !u.Empty(now) {
			live++
		}
	}
	if live >= budget.MaxKeysPerBudget {
		return nil, fmt.Errorf("%w: budget %q has %d keys with spending in their window", budget.ErrLimit, c.Budget, budget.MaxKeysPerBudget)
	}
	p := &v1alpha1.ToolPolicy{}
	if err := n.l.c.Get(ctx, client.ObjectKey{Namespace: n.ns, Name: c.Policy}, p); err != nil {
		return nil, unavailable("read the budget's ToolPolicy", err)
	}
	return &v1alpha1.BudgetLedger{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Ledger, Namespace: n.ns,
			Labels: map[string]string{v1alpha1.LabelBudgetPolicy: c.Policy, v1alpha1.LabelBudgetScope: scope},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolPolicy", Name: p.Name, UID: p.UID,
			}},
		},
		Spec: v1alpha1.BudgetLedgerSpec{Policy: c.Policy, Rule: c.Rule, Budget: c.Budget, Key: c.Key, Scope: c.Scope},
	}, nil
}

// scopeLabel is the label value of a scope digest: its first 63 characters (a label value's
// bound).
func scopeLabel(scope string) string {
	if len(scope) > 63 {
		return scope[:63]
	}
	return scope
}

// mutation changes a ledger's usage at now and reports whether it changed it.
type mutation func(u *budget.Usage, now time.Time) (bool, error)

// modify applies fn to ledger id by compare-and-swap (see the package doc). create builds the
// ledger's object when it does not exist; nil means a missing ledger is left missing.
func (n *Namespaced) modify(ctx context.Context, id string, create func(context.Context) (*v1alpha1.BudgetLedger, error), fn mutation) error {
	key := client.ObjectKey{Namespace: n.ns, Name: id}
	release, err := n.l.take(ctx, key)
	if err != nil {
		return unavailable("charge "+id, err)
	}
	defer release()
	cur, remembered := n.l.remembered(key)
	for attempt := 0; ; attempt++ {
		if attempt == n.l.attempts {
			return unavailable("charge "+id, fmt.Errorf("still contended after %d attempts", attempt))
		}
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return unavailable("charge "+id, err)
			}
		}
		if cur == nil {
			got := &v1alpha1.BudgetLedger{}
			err := n.l.c.Get(ctx, key, got)
			switch {
			case apierrors.IsNotFound(err) && create == nil:
				return nil
			case apierrors.IsNotFound(err):
				obj, err := create(ctx)
				if err != nil {
					return err
				}
				err = n.l.c.Create(ctx, obj, client.FieldOwner(n.l.manager))
				switch {
				case apierrors.IsAlreadyExists(err):
					continue
				case err != nil:
					return unavailable("create "+id, err)
				}
				got = obj
			case err != nil:
				return unavailable("read "+id, err)
			}
			cur, remembered = got, false
		}
		u, err := usageOf(cur)
		if err != nil {
			return err
		}
		now := n.l.now()
		changed, err := fn(&u, now)
		if (err != nil || !changed) && remembered {
			// Refuse or skip only on what the API server holds now.
			cur = nil
			continue
		}
		if err != nil || !changed {
			return err
		}
		next := cur.DeepCopy()
		next.Status = statusOf(u, now)
		err = n.l.c.Status().Update(ctx, next, client.FieldOwner(n.l.manager))
		switch {
		case err == nil:
			n.l.remember(key, next)
			return nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			n.l.forget(key)
			cur = nil
		default:
			// A timeout or another failure: the write may or may not have happened.
			n.l.forget(key)
			return unavailable("write "+id, err)
		}
	}
}

// backoff waits a short random time that grows with the attempt (at most 20ms), so contending
// writers spread out.
func backoff(ctx context.Context, attempt int) error {
	ceil := min(attempt, 20)
	t := time.NewTimer(time.Duration(rand.IntN(ceil*1000)+1) * time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (l *Ledger) remembered(key client.ObjectKey) (*v1alpha1.BudgetLedger, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.seen[key]; ok {
		return o.DeepCopy(), true
	}
	return nil, false
}

func (l *Ledger) remember(key client.ObjectKey, o *v1alpha1.BudgetLedger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) >= maxRemembered {
		clear(l.seen)
	}
	l.seen[key] = o.DeepCopy()
}

func (l *Ledger) forget(key client.ObjectKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.seen, key)
}

// Sweep deletes the namespace's ledgers in which nothing counts any more at now, each with a
// precondition on the resourceVersion it was listed at, so a ledger charged meanwhile stays. It
// returns how many it deleted. A ledger is also deleted with its ToolPolicy (owner reference).
func (n *Namespaced) Sweep(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.l.timeout)
	defer cancel()
	list := &v1alpha1.BudgetLedgerList{}
	if err := n.l.c.List(ctx, list, client.InNamespace(n.ns)); err != nil {
		return 0, unavailable("list", err)
	}
	now, deleted := n.l.now(), 0
	var errs []error
	for i := range list.Items {
		o := &list.Items[i]
		u, err := usageOf(o)
		if err != nil || !u.Empty(now) {
			continue
		}
		rv := o.ResourceVersion
		err = n.l.c.Delete(ctx, o, client.Preconditions{ResourceVersion: &rv})
		switch {
		case err == nil:
			deleted++
			n.l.forget(client.ObjectKeyFromObject(o))
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			errs = append(errs, unavailable("delete "+o.Name, err))
		}
	}
	return deleted, errors.Join(errs...)
}

// take waits for this process's turn to write ledger key, or for ctx to end.
func (l *Ledger) take(ctx context.Context, key client.ObjectKey) (release func(), _ error) {
	l.mu.Lock()
	t, ok := l.turns[key]
	if !ok {
		t = &turn{ch: make(chan struct{}, 1)}
		t.ch <- struct{}{}
		l.turns[key] = t
	}
	t.waiters++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if t.waiters--; t.waiters == 0 {
			delete(l.turns, key)
		}
		l.mu.Unlock()
	}
	select {
	case <-t.ch:
		return func() { t.ch <- struct{}{}; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}
