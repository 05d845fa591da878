package boltstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/journal"
)

// Defaults for Options.
const (
	DefaultOpenTimeout = 5 * time.Second
	// DefaultMaxBatchSize caps the callers in one commit.
	DefaultMaxBatchSize = 256
)

// Options configure Open.
type Options struct {
	// Verifier checks signatures on Issue and authorities on Consume. Required.
	Verifier *authority.Verifier
	// Now is the store's clock for expiry checks and timestamps; time.Now if nil.
	Now func() time.Time
	// Shared lets several processes use one file: the first to open it owns it and serves the
	// others on a unix socket (see the package documentation). Without Shared, Open fails while
	// another process holds the file.
	Shared bool
	// SocketPath is the owner's unix socket; path + ".sock" if empty. Unix socket paths are
	// limited to about 100 bytes.
	SocketPath string
	// OpenTimeout bounds how long Open waits for the file lock (exclusive mode) or to own the
	// file or reach its owner (shared mode); a client that lost its owner waits as long, within
	// its context, to reconnect or take over. DefaultOpenTimeout if zero.
	OpenTimeout time.Duration
	// MaxBatchSize caps the callers sharing one commit; DefaultMaxBatchSize if zero.
	MaxBatchSize int
}

// Store is the embedded store: authorities and the dispatch journal in one bbolt file, with
// fsync on every commit. It implements authority.Store, authority.ConsumeAndPender,
// authority.IssueConsumeAndPender and journal.Journal. It is safe for concurrent use.
type Store struct {
	path     string
	sock     string
	opts     Options
	instance string

	mu     sync.Mutex
	closed bool
	own    *owner  // set while this handle owns the file
	cli    *client // set while this handle talks to the owner
}

var (
	_ authority.Store                 = (*Store)(nil)
	_ authority.ConsumeAndPender      = (*Store)(nil)
	_ authority.IssueConsumeAndPender = (*Store)(nil)
	_ journal.Journal                 = (*Store)(nil)
)

type owner struct {
	db  *bolt.DB
	l   *local
	srv *server // nil in exclusive mode
}

// Open opens (creating if needed) the store file at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.Verifier == nil {
		return nil, errors.New("boltstore: Options.Verifier is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = DefaultOpenTimeout
	}
	if opts.MaxBatchSize <= 0 {
		opts.MaxBatchSize = DefaultMaxBatchSize
	}
	s := &Store{path: path, sock: opts.SocketPath, opts: opts, instance: newInstanceID()}
	if s.sock == "" {
		s.sock = path + ".sock"
	}
	if !opts.Shared {
		db, err := bolt.Open(path, 0o600, boltOptions(opts.OpenTimeout))
		if err != nil {
			if errors.Is(err, berrors.ErrTimeout) {
				return nil, unavailablef("%s is locked by another process (open it with Options.Shared to share it)", path)
			}
			return nil, unavailable(err)
		}
		if err := s.becomeOwner(db); err != nil {
			return nil, err
		}
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.OpenTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.connectLocked(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// boltOptions are the bbolt options of every open. NoSync stays false: every commit is
// fdatasync'ed. NoFreelistSync skips writing the freelist on each commit (etcd's setting): it is
// derived data, rebuilt by scanning the file on open, so durability of what was committed is
// unchanged, while each commit writes fewer pages. The map freelist keeps allocation cheap as
// the file grows.
func boltOptions(lockTimeout time.Duration) *bolt.Options {
	return &bolt.Options{
		Timeout:        lockTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	}
}

func newInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return "in-" + hex.EncodeToString(b[:])
}

// becomeOwner initialises an opened file and, in shared mode, starts serving other processes.
func (s *Store) becomeOwner(db *bolt.DB) error {
	if err := initFile(db); err != nil {
		db.Close()
		return unavailable(err)
	}
	o := &owner{db: db}
	o.l = &local{db: db, commit: &committer{db: db, maxBatch: s.opts.MaxBatchSize}, verifier: s.opts.Verifier, now: s.opts.Now, live: func() map[string]bool {
		live := map[string]bool{s.instance: true}
		if o.srv != nil {
			for _, in := range o.srv.sessions() {
				live[in] = true
			}
		}
		return live
	}}
	if s.opts.Shared {
		srv, err := listen(s.sock, o.l)
		if err != nil {
			db.Close()
			return unavailable(err)
		}
		o.srv = srv
	}
	s.own = o
	return nil
}

// connectLocked makes this handle the owner of the file if no process holds it, or a client
// of the process that does. s.mu is held.
func (s *Store) connectLocked(ctx context.Context) error {
	var lastErr error
	for {
		// Timeout of 1ns: bbolt tries the flock once and gives up (it retries only within
		// Timeout-50ms).
		db, err := bolt.Open(s.path, 0o600, boltOptions(time.Nanosecond))
		if err == nil {
			return s.becomeOwner(db)
		}
		if !errors.Is(err, berrors.ErrTimeout) {
			return unavailable(err)
		}
		c, err := dial(ctx, s.sock, s.instance)
		if err == nil {
			s.cli = c
			return nil
		}
		lastErr = err // the owner may be starting or stopping; try again
		select {
		case <-ctx.Done():
			return unavailablef("%s is held by another process whose socket %s does not answer: %v (%v)", s.path, s.sock, lastErr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// backend returns what executes operations for this handle, reconnecting (or taking over the
// file) if the owner this handle talked to has gone.
func (s *Store) backend(ctx context.Context) (interface {
	do(context.Context, string, *wire.Request) (wire.Response, error)
}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, unavailable(ErrClosed)
	case s.own != nil:
		return s.own.l, nil
	case s.cli != nil && !s.cli.broken.Load():
		return s.cli, nil
	}
	if s.cli != nil {
		s.cli.close()
		s.cli = nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpenTimeout)
	defer cancel()
	if err := s.connectLocked(ctx); err != nil {
		return nil, err
	}
	if s.own != nil {
		return s.own.l, nil
	}
	return s.cli, nil
}

// do executes req. A request that could not be sent because the owner had gone (errNotSent) is
// tried once more after reconnecting or taking the file over. (net/rpc also reports ErrShutdown
// to calls in flight when this handle closes its own client; even then a repeat is harmless:
// every operation, repeated, is either refused — consumed, exists, invalid transition — or a
// no-op, never applied twice.)
func (s *Store) do(ctx context.Context, req *wire.Request) (wire.Response, error) {
	for attempt := 0; ; attempt++ {
		b, err := s.backend(ctx)
		if err != nil {
			return wire.Response{}, err
		}
		resp, err := b.do(ctx, s.instance, req)
		if err != nil {
			if attempt == 0 && errors.Is(err, errNotSent) {
				continue
			}
			return wire.Response{}, err
		}
		return resp, nil
	}
}

// Close releases the file (and, for the owner, stops serving clients: their in-flight operations
// fail as unavailable and they take over or reconnect on their next operation).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.cli != nil {
		s.cli.close()
		s.cli = nil
	}
	if s.own != nil {
		if s.own.srv != nil {
			s.own.srv.close()
		}
		err = s.own.db.Close()
		s.own = nil
	}
	return err
}

// Instance is this handle's session ID, recorded in the dispatch records it writes.
func (s *Store) Instance() string { return s.instance }

// Owner reports whether this handle currently owns the file (as opposed to talking to the
// process that does).
func (s *Store) Owner() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own != nil
}

// Path returns the store file's path.
func (s *Store) Path() string { return s.path }

// String describes the store for logs.
func (s *Store) String() string {
	return fmt.Sprintf("boltstore(%s, instance %s, pid %d)", s.path, s.instance, os.Getpid())
}

// Issue implements authority.Store.
func (s *Store) Issue(ctx context.Context, a authority.Authority) (authority.Record, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpIssue, Authority: a})
	return resp.Authority, err
}

// Get implements authority.Store.
func (s *Store) Get(ctx context.Context, namespace, id string) (authority.Record, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpGet, Namespace: namespace, ID: id})
	return resp.Authority, err
}

// Consume implements authority.Store: full verification (signature, binding, time) of the
// stored authority, then the compare-and-swap in a group commit.
func (s *Store) Consume(ctx context.Context, id string, expect authority.Binding, c authority.Consumption) (authority.Record, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpConsume, ID: id, Expect: expect, Consumption: c})
	return resp.Authority, err
}

// ConsumeAndPend implements authority.ConsumeAndPender: Consume and journal.Begin (in
// DISPATCH_PENDING, with receipt) in one transaction and one fsync. The authority's ConsumedBy
// is rec.OperationID.
func (s *Store) ConsumeAndPend(ctx context.Context, id string, expect authority.Binding, rec journal.DispatchRecord,
	receipt []byte) (authority.Record, journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpConsumeAndPend, ID: id, Expect: expect, Record: rec, Receipt: receipt})
	return resp.Authority, resp.Record, err
}

// IssueConsumeAndPend implements authority.IssueConsumeAndPender: Issue, Consume and
// journal.Begin (in DISPATCH_PENDING, with receipt) of a freshly signed authority in one
// transaction and one fsync, shared with every concurrent writer. The authority is verified
// (signature, binding equal to expect, time) exactly once, and is created already CONSUMED by
// rec.OperationID, so it never exists unconsumed.
func (s *Store) IssueConsumeAndPend(ctx context.Context, a authority.Authority, expect authority.Binding,
	rec journal.DispatchRecord, receipt []byte) (authority.Record, journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpIssueConsumeAndPend, Authority: a, Expect: expect, Record: rec, Receipt: receipt})
	return resp.Authority, resp.Record, err
}

// Begin implements journal.Journal.
func (s *Store) Begin(ctx context.Context, rec journal.DispatchRecord, receipt []byte) (journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpBegin, Record: rec, Receipt: receipt})
	return resp.Record, err
}

// Transition implements journal.Journal.
func (s *Store) Transition(ctx context.Context, operationID string, to journal.State, o journal.Outcome) (journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpTransition, OperationID: operationID, To: to, Outcome: o})
	return resp.Record, err
}

// Reconcile implements journal.Journal.
func (s *Store) Reconcile(ctx context.Context, operationID string, r journal.Reconciliation) (journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpReconcile, OperationID: operationID, Reconciliation: r})
	return resp.Record, err
}

// Record implements journal.Journal.
func (s *Store) Record(ctx context.Context, operationID string) (journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpRecord, OperationID: operationID})
	return resp.Record, err
}

// ByAuthority implements journal.Journal.
func (s *Store) ByAuthority(ctx context.Context, authorityID string) (journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpByAuthority, ID: authorityID})
	return resp.Record, err
}

// ByAct implements journal.Journal.
func (s *Store) ByAct(ctx context.Context, actID string) ([]journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpByAct, ActID: actID})
	return resp.Records, err
}

// InState implements journal.Journal.
func (s *Store) InState(ctx context.Context, st journal.State) ([]journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpInState, State: st})
	return resp.Records, err
}

// InStateSince implements journal.Journal: it reads only the index keys from since on.
func (s *Store) InStateSince(ctx context.Context, st journal.State, since time.Time) ([]journal.DispatchRecord, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpInState, State: st, Since: since})
	return resp.Records, err
}

// RecoverOnStart implements journal.Journal. The sessions left alone are this handle and, in
// shared mode, every process connected to the owner at that moment; a process that has lost
// its connection and not yet reconnected counts as gone, and its in-flight records become
// INDETERMINATE (the conservative direction: they then need reconciliation, never a replay).
func (s *Store) RecoverOnStart(ctx context.Context) (int, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpRecoverOnStart})
	return resp.N, err
}

// Usage implements budget.Ledger: the ledger as committed (no cache).
func (s *Store) Usage(ctx context.Context, ledger string) (budget.Usage, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpBudgetUsage, Ledger: ledger})
	return resp.Usage, err
}

// Charge implements budget.Ledger in a transaction of its own. A dispatch charges its budgets
// through its record's Charges instead, in the commit that consumes its authority.
func (s *Store) Charge(ctx context.Context, op string, charges []budget.Charge) error {
	_, err := s.do(ctx, &wire.Request{Op: wire.OpBudgetCharge, OperationID: op, Charges: charges})
	return err
}

// Refund implements budget.Ledger.
func (s *Store) Refund(ctx context.Context, op string) error {
	_, err := s.do(ctx, &wire.Request{Op: wire.OpBudgetRefund, OperationID: op})
	return err
}

// Settle implements budget.Settler.
func (s *Store) Settle(ctx context.Context, op string) error {
	_, err := s.do(ctx, &wire.Request{Op: wire.OpBudgetSettle, OperationID: op})
	return err
}

// Budgets lists every budget ledger that still counts something (`actgate budgets`).
func (s *Store) Budgets(ctx context.Context) ([]budget.Usage, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpBudgetUsages})
	return resp.Usages, err
}

var (
	_ budget.Ledger  = (*Store)(nil)
	_ budget.Settler = (*Store)(nil)
)
