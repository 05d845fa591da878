package authority

import (
	"context"
	"fmt"

	"github.com/actgate/actgate/internal/journal"
)

// Store holds authorities and decides, once, who consumes each. It is the authority side only;
// dispatch records are the journal's (internal/journal), so a sidecar can pair a Lease-backed
// Store with a local Journal.
//
// Every method takes a context. A deadline, a failed or ambiguous store operation, or a closed
// store gives an error wrapping ErrStoreUnavailable, never a success: the caller denies (AEB
// "Atomically Consume or Reserve Before Invocation": "If the store is unavailable, non-atomic,
// stale, or reports an ambiguous result, the boundary MUST refuse before invocation").
// Implementations never answer Consume from a process-local cache (docs/architecture.md
// "Authority").
type Store interface {
	// Issue stores a signed authority in state ISSUED. The store checks the signature with its
	// Verifier before writing. Issue is create-only: an existing ID (same act and binding) is
	// ErrAlreadyIssued and the stored authority is unchanged.
	Issue(ctx context.Context, a Authority) (Record, error)
	// Get reads an authority from the store itself (no cache). ErrNotFound if there is no
	// authority with that ID in that namespace.
	Get(ctx context.Context, namespace, id string) (Record, error)
	// Consume verifies the stored authority against expect at the store's clock (see
	// Verifier.Verify) and flips it from ISSUED to CONSUMED by compare-and-swap. Of any number of
	// concurrent consumers exactly one succeeds; every other gets ErrConsumed. The namespace is
	// expect.Namespace.
	Consume(ctx context.Context, id string, expect Binding, c Consumption) (Record, error)
}

// Consumption says who consumes an authority.
type Consumption struct {
	// OperationID is the dispatch the authority is spent on (journal.DispatchRecord.OperationID).
	OperationID string
}

// ConsumeAndPender is implemented by stores that keep authorities and the journal in one
// durable transaction domain (the embedded store). ConsumeAndPend consumes the authority as
// Consume does and, in the same commit, writes rec in DISPATCH_PENDING with the optional receipt:
// either both are durable or neither is. rec must describe the same act as expect
// (PendingMatches); its State must be empty or DISPATCH_PENDING.
type ConsumeAndPender interface {
	ConsumeAndPend(ctx context.Context, id string, expect Binding, rec journal.DispatchRecord, receipt []byte) (Record, journal.DispatchRecord, error)
}

// IssueConsumeAndPender is implemented by stores that can store a freshly signed authority
// already spent: IssueConsumeAndPend is Issue, Consume and ConsumeAndPend in one commit. The
// store verifies a as Issue and Consume would (signed by a trusted key, bound to exactly expect,
// valid at the store's clock) and then, in one transaction, creates it in state CONSUMED by
// rec.OperationID together with rec in DISPATCH_PENDING and the optional receipt: either the
// authority, its consumption and the record are all durable or none is. If an authority with
// a's ID already exists nothing is written: ErrConsumed if it has been consumed (what Consume
// would say), ErrAlreadyIssued if it is still ISSUED (what Issue would say). Of concurrent
// callers with the same authority, exactly one succeeds and every other gets ErrConsumed.
// rec must describe the act of a (PendingMatches with a.ID and expect); its State must be empty
// or DISPATCH_PENDING.
//
// It is how a machine Permit pays one durable commit instead of two: the sink signs an authority
// and consumes it a moment later, and no other party may consume it in between (none can: it is
// created consumed). Stores that keep authorities elsewhere than the journal (the Lease store) do
// not implement it; callers fall back to Issue then ConsumeAndPend, or Issue, Consume and
// journal.Journal.Begin.
type IssueConsumeAndPender interface {
	IssueConsumeAndPend(ctx context.Context, a Authority, expect Binding, rec journal.DispatchRecord, receipt []byte) (Record, journal.DispatchRecord, error)
}

// PendingMatches checks that a dispatch record describes the act an authority is consumed for:
// same authority ID, act, digests, tool, and upstream = destination. A record that disagrees
// with the binding would journal one action and dispatch another; it is ErrInvalid.
func PendingMatches(rec journal.DispatchRecord, id string, expect Binding) error {
	for _, f := range []struct{ name, got, want string }{
		{"authority ID", rec.AuthorityID, id},
		{"act ID", rec.ActID, expect.ActID},
		{"action digest", rec.ActionDigest, expect.ActionDigest},
		{"arguments digest", rec.ArgumentsDigest, expect.ArgumentsDigest},
		{"tool", rec.Tool, expect.Tool},
		{"upstream", rec.Upstream, expect.Destination},
	} {
		if f.got != f.want {
			return fmt.Errorf("%w: dispatch record %s differs from the authority binding", ErrInvalid, f.name)
		}
	}
	return nil
}
