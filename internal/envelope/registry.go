package envelope

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Sentinel errors of a Registry that are not about a resolution's content.
var (
	// ErrAlreadyEmitted: an envelope with this digest was emitted before. Two byte-identical
	// envelopes share a digest, so re-emitting one would let a resolution of the first
	// resolve the second (envelope-04 §12.5); make the envelopes differ instead.
	ErrAlreadyEmitted = errors.New("envelope: an envelope with this digest was already emitted")
	// ErrNotFound: no envelope with this digest was emitted.
	ErrNotFound = errors.New("envelope: no envelope with this digest was emitted")
)

// Registry holds the envelopes emitted and their single resolution. It refuses a
// resolution that names an unknown envelope or one already resolved (envelope-04 §7.3,
// §12.5), and records which principal resolved each. Implementations are safe for
// concurrent use, and Resolve is atomic: of two concurrent resolutions of one envelope
// exactly one succeeds.
type Registry interface {
	// Emit records env as emitted and awaiting one resolution.
	Emit(ctx context.Context, env *Envelope, opts EmitOptions) (Record, error)
	// Resolve verifies r against the envelope it names (Verify) and records it as that
	// envelope's resolution, made by principal. A refusal is a *ValidationError whose
	// codes include CodeResUnknownEnvelope, CodeResAlreadyResolved, CodeResExpired,
	// CodeResWrongPrincipal or CodeResNoPrincipal; nothing is recorded then.
	Resolve(ctx context.Context, r *Resolution, principal string) (Record, error)
	// Get returns the record of the envelope with this digest, or ErrNotFound.
	Get(ctx context.Context, digest string) (Record, error)
}

// EmitOptions says to whom an envelope is routed and for how long it stands.
type EmitOptions struct {
	// Principal is the only principal who may resolve the envelope (envelope-04 §12.4,
	// docs/architecture.md "Principals"). Empty means any principal; the resolver is still
	// recorded.
	Principal string
	// TTL bounds how long the envelope awaits a resolution; zero means no expiry.
	TTL time.Duration
}

// Record is what a Registry knows of one emitted envelope.
type Record struct {
	Envelope  *Envelope
	Principal string
	EmittedAt time.Time
	// ExpiresAt is zero when the envelope does not expire.
	ExpiresAt time.Time
	// Resolution is nil until the envelope is resolved.
	Resolution *Resolution
	ResolvedBy string
	ResolvedAt time.Time
}

// Resolved reports whether the envelope has been resolved.
func (r Record) Resolved() bool { return r.Resolution != nil }

func (r Record) clone() Record {
	if r.Resolution != nil {
		res := *r.Resolution
		r.Resolution = &res
	}
	return r
}

// MemoryRegistry is an in-process Registry. It keeps every digest it has seen for its
// lifetime, so a resolved digest can never be resolved again; it does not persist.
type MemoryRegistry struct {
	now     func() time.Time
	mu      sync.Mutex
	records map[string]*Record
}

var _ Registry = (*MemoryRegistry)(nil)

// NewMemoryRegistry returns an empty registry reading time from now.
func NewMemoryRegistry(now func() time.Time) *MemoryRegistry {
	return &MemoryRegistry{now: now, records: map[string]*Record{}}
}

// Emit implements Registry.
func (m *MemoryRegistry) Emit(ctx context.Context, env *Envelope, opts EmitOptions) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if env == nil {
		return Record{}, errors.New("envelope: emit of a nil envelope")
	}
	if opts.TTL < 0 {
		return Record{}, fmt.Errorf("envelope: negative TTL %v", opts.TTL)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, seen := m.records[env.Digest()]; seen {
		return Record{}, fmt.Errorf("%w: %s", ErrAlreadyEmitted, env.Digest())
	}
	now := m.now()
	rec := &Record{Envelope: env, Principal: opts.Principal, EmittedAt: now}
	if opts.TTL > 0 {
		rec.ExpiresAt = now.Add(opts.TTL)
	}
	m.records[env.Digest()] = rec
	return rec.clone(), nil
}

// Resolve implements Registry.
func (m *MemoryRegistry) Resolve(ctx context.Context, r *Resolution, principal string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	ps := &problems{}
	const digestPath = "$.binding_moment_resolution.envelope_digest"
	if r == nil {
		ps.add(CodeResMissingMember, "$", "no resolution")
		return Record{}, ps.err("resolution")
	}
	if principal == "" {
		ps.add(CodeResNoPrincipal, "$", "a resolution is recorded with the principal who made it")
		return Record{}, ps.err("resolution")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[r.EnvelopeDigest]
	switch {
	case !ok:
		ps.add(CodeResUnknownEnvelope, digestPath, "names no envelope emitted here; it is not a decision (§7.3)")
	case rec.Resolution != nil:
		ps.add(CodeResAlreadyResolved, digestPath, "names an envelope already resolved at %s; a replay is not a decision (§12.5)",
			rec.ResolvedAt.UTC().Format(time.RFC3339))
	case !rec.ExpiresAt.IsZero() && !m.now().Before(rec.ExpiresAt):
		ps.add(CodeResExpired, digestPath, "names an envelope that expired at %s", rec.ExpiresAt.UTC().Format(time.RFC3339))
	case rec.Principal != "" && rec.Principal != principal:
		ps.add(CodeResWrongPrincipal, "$", "the envelope is routed to another principal; only that principal may resolve it (§12.4)")
	}
	if err := ps.err("resolution"); err != nil {
		return Record{}, err
	}
	if err := Verify(rec.Envelope, r); err != nil {
		return Record{}, err
	}
	res := *r
	rec.Resolution = &res
	rec.ResolvedBy = principal
	rec.ResolvedAt = m.now()
	return rec.clone(), nil
}

// Get implements Registry.
func (m *MemoryRegistry) Get(ctx context.Context, digest string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[digest]
	if !ok {
		return Record{}, ErrNotFound
	}
	return rec.clone(), nil
}
