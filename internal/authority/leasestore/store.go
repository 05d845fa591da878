package leasestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// DefaultTimeout bounds one store operation when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// DefaultFieldManager is the field manager of the store's writes when Options.FieldManager is
// empty.
const DefaultFieldManager = "actgate-authority"

// Options wire a Store.
type Options struct {
	// Leases is a typed coordination/v1 client. It talks to the API server on every call: it is
	// never an informer cache, so every read the consume decision rests on is a quorum read
	// (docs/architecture.md "Authority": never consulted from a process-local cache). Required.
	Leases coordinationv1client.LeasesGetter
	// Verifier checks the signature of an authority before it is stored and every time one is
	// read back. Required.
	Verifier *authority.Verifier
	// Now is the store's clock (expiry at Issue and Consume). Optional: time.Now.
	Now func() time.Time
	// Timeout bounds each operation, on top of the caller's context. Optional: DefaultTimeout.
	Timeout time.Duration
	// FieldManager names the store's writes in managedFields. Optional: DefaultFieldManager.
	FieldManager string
}

// Store is an authority.Store on Kubernetes Leases. It is safe for concurrent use, and any
// number of Stores (in any number of processes) may share the same Leases.
type Store struct {
	leases   coordinationv1client.LeasesGetter
	verifier *authority.Verifier
	now      func() time.Time
	timeout  time.Duration
	manager  string
}

var _ authority.Store = (*Store)(nil)

// New returns a Store.
func New(opts Options) (*Store, error) {
	switch {
	case opts.Leases == nil:
		return nil, errors.New("leasestore: Options.Leases is required")
	case opts.Verifier == nil:
		return nil, errors.New("leasestore: Options.Verifier is required")
	case opts.Timeout < 0:
		return nil, errors.New("leasestore: Options.Timeout is negative")
	}
	s := &Store{leases: opts.Leases, verifier: opts.Verifier, now: opts.Now, timeout: opts.Timeout, manager: opts.FieldManager}
	if s.now == nil {
		s.now = time.Now
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.manager == "" {
		s.manager = DefaultFieldManager
	}
	return s, nil
}

// NewForConfig is New with a typed client built from cfg (opts.Leases is ignored).
func NewForConfig(cfg *rest.Config, opts Options) (*Store, error) {
	c, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leasestore: client: %w", err)
	}
	opts.Leases = c
	return New(opts)
}

// unavailable wraps an API error (or a context error) as a store failure: deny, never allow.
// The cause stays in the chain so callers can tell a timeout (context.DeadlineExceeded,
// apierrors.IsTimeout) from other failures.
func unavailable(op string, err error) error {
	return fmt.Errorf("leasestore: %s: %w: %w", op, authority.ErrStoreUnavailable, err)
}

func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// checkNamespace refuses an empty namespace: a Lease lives in the agent's namespace, and an
// authority without one (embedded mode) has no Lease.
func checkNamespace(ns string) error {
	if ns == "" {
		return fmt.Errorf("%w: a Lease-backed authority needs the agent's namespace", authority.ErrInvalid)
	}
	return nil
}

// Issue stores a signed authority as a new Lease in state ISSUED (create-only: an existing
// Lease of that name is authority.ErrAlreadyIssued and is left unchanged). The signature is
// checked first, and an authority already expired at the store's clock is refused.
func (s *Store) Issue(ctx context.Context, a authority.Authority) (authority.Record, error) {
	if err := s.verifier.VerifySignature(a); err != nil {
		return authority.Record{}, err
	}
	if err := checkNamespace(a.Binding.Namespace); err != nil {
		return authority.Record{}, err
	}
	if !s.now().Before(a.ExpiresAt) {
		return authority.Record{}, fmt.Errorf("%w: not storing an authority that expired at %s", authority.ErrExpired, a.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return authority.Record{}, unavailable("issue", err)
	}
	_, err := s.leases.Leases(a.Binding.Namespace).Create(ctx, leaseFor(a), metav1.CreateOptions{FieldManager: s.manager})
	switch {
	case apierrors.IsAlreadyExists(err):
		return authority.Record{}, fmt.Errorf("%w: %s/%s", authority.ErrAlreadyIssued, a.Binding.Namespace, a.ID)
	case err != nil:
		return authority.Record{}, unavailable("issue", err)
	}
	return authority.Record{Authority: a, State: authority.StateIssued}, nil
}

// Get reads the authority's Lease from the API server (no cache) and checks its signature.
func (s *Store) Get(ctx context.Context, namespace, id string) (authority.Record, error) {
	if err := checkNamespace(namespace); err != nil {
		return authority.Record{}, err
	}
	if !authority.ValidID(id) {
		return authority.Record{}, fmt.Errorf("%w: %q is not an authority ID", authority.ErrInvalid, clip(id))
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return authority.Record{}, unavailable("get", err)
	}
	l, err := s.leases.Leases(namespace).Get(ctx, id, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return authority.Record{}, fmt.Errorf("%w: %q in namespace %q", authority.ErrNotFound, id, namespace)
	case err != nil:
		return authority.Record{}, unavailable("get", err)
	}
	return decode(l, s.verifier)
}

// Consume verifies the stored authority against expect at the store's clock and flips it to
// CONSUMED with an Update carrying the resourceVersion of the uncached read it verified. Of
// concurrent consumers exactly one succeeds; a 409 conflict means another won
// (authority.ErrConsumed). A refusal leaves the Lease unchanged.
func (s *Store) Consume(ctx context.Context, id string, expect authority.Binding, c authority.Consumption) (authority.Record, error) {
	if err := expect.Validate(); err != nil {
		return authority.Record{}, fmt.Errorf("expected binding: %w", err)
	}
	if err := checkNamespace(expect.Namespace); err != nil {
		return authority.Record{}, err
	}
	if !authority.ValidID(id) {
		return authority.Record{}, fmt.Errorf("%w: %q is not an authority ID", authority.ErrInvalid, clip(id))
	}
	if c.OperationID == "" || len(c.OperationID) > journal.MaxIDLength {
		return authority.Record{}, fmt.Errorf("%w: consumption needs an operation ID of 1..%d bytes", authority.ErrInvalid, journal.MaxIDLength)
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return authority.Record{}, unavailable("consume", err)
	}
	leases := s.leases.Leases(expect.Namespace)

	// An uncached read: GetOptions{} without a resourceVersion is served from etcd by quorum.
	l, err := leases.Get(ctx, id, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return authority.Record{}, fmt.Errorf("%w: %q in namespace %q", authority.ErrNotFound, id, expect.Namespace)
	case err != nil:
		return authority.Record{}, unavailable("consume: read", err)
	}
	cur, err := decode(l, s.verifier)
	if err != nil {
		return authority.Record{}, err
	}
	if cur.State == authority.StateConsumed {
		return authority.Record{}, consumedErr(cur)
	}
	now := s.now()
	if err := s.verifier.Verify(cur.Authority, expect, now); err != nil {
		return authority.Record{}, err
	}

	// The compare-and-swap: the API server applies this Update only if the Lease still has the
	// resourceVersion read above.
	_, err = leases.Update(ctx, markConsumed(l, c.OperationID, now), metav1.UpdateOptions{FieldManager: s.manager})
	switch {
	case apierrors.IsConflict(err):
		return authority.Record{}, s.lost(ctx, leases, id, err)
	case apierrors.IsNotFound(err):
		return authority.Record{}, unavailable("consume", fmt.Errorf("lease %s/%s vanished while being consumed: %w", expect.Namespace, id, err))
	case err != nil:
		return authority.Record{}, unavailable("consume: update", err)
	}
	rec := cur
	rec.State, rec.ConsumedAt, rec.ConsumedBy = authority.StateConsumed, now, c.OperationID
	return rec, nil
}

// lost explains a 409: someone else changed the Lease between the read and the Update, which
// for an authority Lease means someone else consumed it. It reads the Lease once more only to
// say who; whatever that read shows, this consume did not happen and is denied.
func (s *Store) lost(ctx context.Context, leases coordinationv1client.LeaseInterface, id string, conflict error) error {
	l, err := leases.Get(ctx, id, metav1.GetOptions{})
	if err == nil {
		if rec, derr := decode(l, s.verifier); derr == nil && rec.State == authority.StateConsumed {
			return consumedErr(rec)
		}
		if !consumed(l) {
			return unavailable("consume", fmt.Errorf("lease %s changed while being consumed and is not consumed: %w", id, conflict))
		}
	}
	if apierrors.IsNotFound(err) {
		return unavailable("consume", fmt.Errorf("lease %s deleted while being consumed: %w", id, conflict))
	}
	return fmt.Errorf("%w: lease %s: another consumer won the compare-and-swap (%v)", authority.ErrConsumed, id, conflict)
}

func consumedErr(r authority.Record) error {
	at := "unknown time"
	if !r.ConsumedAt.IsZero() {
		at = r.ConsumedAt.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Errorf("%w: %s by operation %s at %s", authority.ErrConsumed, r.Authority.ID, clip(r.ConsumedBy), at)
}

func clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
