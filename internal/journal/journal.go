package journal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/actgate/actgate/internal/budget"
)

// State is a lifecycle state of one dispatch, named as in action-evidence-boundary
// ("Non-Collapsing Decision and Lifecycle Vocabulary").
type State string

// The lifecycle states a DispatchRecord can be in.
const (
	// StateConsumed: the authority is durably spent and nothing has been dispatched. A record
	// written by a store that cannot pend in the consume transaction (a Lease store) starts here.
	StateConsumed State = "CONSUMED"
	// StateDispatchPending: the durable intent record exists; dispatch may begin only from here.
	StateDispatchPending State = "DISPATCH_PENDING"
	// StateInvoked: the frozen action was dispatched with the record's operation ID.
	StateInvoked State = "INVOKED"
	// StateExecuted: authoritative evidence that the exact effect occurred. Terminal.
	StateExecuted State = "EXECUTED"
	// StateFailed: authoritative evidence that the effect did not occur. Terminal.
	StateFailed State = "FAILED"
	// StateIndeterminate: dispatch may have reached the provider and the outcome is unknown.
	// Leaves only through authenticated reconciliation.
	StateIndeterminate State = "INDETERMINATE"
)

// Valid reports whether s is one of the lifecycle states.
func (s State) Valid() bool {
	switch s {
	case StateConsumed, StateDispatchPending, StateInvoked, StateExecuted, StateFailed, StateIndeterminate:
		return true
	}
	return false
}

// Terminal reports whether no transition leaves s (EXECUTED, FAILED).
func (s State) Terminal() bool { return s == StateExecuted || s == StateFailed }

// InFlight reports whether a live invoker may still be working on a record in s
// (DISPATCH_PENDING, INVOKED); RecoverOnStart promotes these to INDETERMINATE.
func (s State) InFlight() bool { return s == StateDispatchPending || s == StateInvoked }

// Reason is a short machine-readable code recorded with a transition (snake_case, as the reason
// codes of the AEB-1 conformance suite).
type Reason string

// Reasons the journal records itself; callers add their own typed constants.
const (
	// ReasonRecoveredOnStart: a DISPATCH_PENDING/INVOKED record found on restart (AEB "Classify
	// the Effect Outcome": promoted to INDETERMINATE before any retry or release).
	ReasonRecoveredOnStart Reason = "recovered_on_start"
	// ReasonAuthenticatedReconciliation: INDETERMINATE resolved by authenticated evidence.
	ReasonAuthenticatedReconciliation Reason = "authenticated_reconciliation"
)

// DispatchRecord is the durable record of one dispatch of one consumed authority. Raw tool
// arguments are never stored: only their digests (docs/architecture.md "Privacy").
type DispatchRecord struct {
	// OperationID is random, unique, and forwarded upstream as the idempotency key.
	OperationID string
	// ActID is the AgentCandidateAct the dispatch belongs to.
	ActID string
	// AuthorityID is the single-use authority consumed for this dispatch; one record per authority.
	AuthorityID string
	// ActionDigest is the digest of {"tool":…,"args":…} (docs/architecture.md "The action an option
	// authorises").
	ActionDigest string
	// ArgumentsDigest is the digest of the canonical arguments.
	ArgumentsDigest string
	// Upstream is the destination the frozen action goes to (MCP server identity or origin).
	Upstream string
	// Tool is the tool name.
	Tool string
	// State is the lifecycle state.
	State State
	// Instance identifies the store session that wrote the record, so that recovery in a
	// multi-process store does not promote records a live process is still working on. Set by
	// the store; ignored on input.
	Instance string
	// CreatedAt, UpdatedAt, InvokedAt and CompletedAt are store-clock timestamps (zero if not reached).
	CreatedAt   time.Time
	UpdatedAt   time.Time
	InvokedAt   time.Time
	CompletedAt time.Time
	// EvidenceDigest is the digest of the latest outcome evidence (upstream response, reconciliation).
	EvidenceDigest string
	// Result is the recorded result returned again, without a second dispatch, to a retry of the
	// same consumed act. Set only with a terminal outcome.
	Result []byte
	// Reason is the reason of the latest transition.
	Reason Reason
	// Receipts are opaque receipt blobs made durable in the commit that wrote each transition.
	Receipts [][]byte
	// History lists every transition, oldest first.
	History []Step
	// Charges are what the dispatch spends of its rule's budgets (docs/api.md "Budgets"). A
	// store that journals the consume (authority.ConsumeAndPender) applies them in the consume's
	// commit, all or none, and refuses the consume when an enforced one does not fit; the
	// commit that makes the record FAILED gives them back, the one that makes it EXECUTED makes
	// them final; INDETERMINATE keeps them spent until reconciled.
	Charges []budget.Charge `json:",omitempty"`
}

// Step is one recorded transition.
type Step struct {
	From           State // empty for the record's creation
	To             State
	At             time.Time
	EvidenceDigest string
	Reason         Reason
}

// Outcome is what the invoker reports with a transition.
type Outcome struct {
	// Authoritative is true only when the evidence comes from the provider or system of record
	// (an authenticated response matched to the operation). Required for EXECUTED and FAILED.
	Authoritative bool
	// EvidenceDigest is "sha256:"+64 hex of the evidence. Required for EXECUTED and FAILED.
	EvidenceDigest string
	// Result is the result to return to a retry of this act; terminal outcomes only.
	Result []byte
	// Reason is recorded with the transition.
	Reason Reason
	// Receipt, if not nil, is appended to Receipts in the same commit.
	Receipt []byte
}

// Reconciliation is an observation from the provider or system of record about an INDETERMINATE
// operation (AEB "Perform Authenticated Reconciliation"). The reconciler authenticates the source
// before calling Reconcile and says so in Authenticated; the journal checks the match.
type Reconciliation struct {
	// Authenticated is true when the observation was authenticated and audience-bound.
	Authenticated bool
	// OperationID, ActionDigest and Upstream must equal the record's.
	OperationID  string
	ActionDigest string
	Upstream     string
	// Outcome is EXECUTED or FAILED. An observation that establishes neither leaves the record
	// INDETERMINATE: do not call Reconcile.
	Outcome        State
	EvidenceDigest string
	Result         []byte
	Reason         Reason
	Receipt        []byte
}

// Journal is the durable dispatch journal. Every method takes a context; a deadline or a store
// failure returns an error wrapping ErrUnavailable, never a guessed success.
type Journal interface {
	// Begin durably writes a new record in CONSUMED or DISPATCH_PENDING, with an optional
	// receipt in the same commit. ErrExists if the operation ID or the authority already has a
	// record: an authority is dispatched at most once.
	Begin(ctx context.Context, rec DispatchRecord, receipt []byte) (DispatchRecord, error)
	// Transition moves a record as the invoker observes it (see Apply). It never leaves
	// INDETERMINATE: that is Reconcile's job.
	Transition(ctx context.Context, operationID string, to State, o Outcome) (DispatchRecord, error)
	// Reconcile moves an INDETERMINATE record to EXECUTED or FAILED (see ApplyReconciliation).
	Reconcile(ctx context.Context, operationID string, r Reconciliation) (DispatchRecord, error)
	// Record returns the record of an operation, or ErrNotFound.
	Record(ctx context.Context, operationID string) (DispatchRecord, error)
	// ByAuthority returns the record that consumed an authority, or ErrNotFound: how a retry of a
	// consumed act finds what happened to it.
	ByAuthority(ctx context.Context, authorityID string) (DispatchRecord, error)
	// ByAct returns every record of an act, oldest operation first.
	ByAct(ctx context.Context, actID string) ([]DispatchRecord, error)
	// InState returns every record in state s (the reconciler lists INDETERMINATE), oldest
	// CreatedAt first.
	InState(ctx context.Context, s State) ([]DispatchRecord, error)
	// InStateSince is InState without the records created before since.
	InStateSince(ctx context.Context, s State, since time.Time) ([]DispatchRecord, error)
	// RecoverOnStart promotes every DISPATCH_PENDING or INVOKED record not owned by a live
	// session of the store to INDETERMINATE and returns how many it promoted. Call it before
	// serving.
	RecoverOnStart(ctx context.Context) (int, error)
}

// NewOperationID returns a fresh operation ID, suitable as an upstream idempotency key:
// "op-" + 12 hex digits of the current Unix time in milliseconds + 20 hex digits (80 bits) from
// crypto/rand. The time prefix only orders IDs (as UUIDv7 does), so a journal keyed by them
// appends instead of writing a random page per record; uniqueness and unpredictability come
// from the random part. Nothing reads the time back.
func NewOperationID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return "op-" + hex.EncodeToString(b[:])
}
