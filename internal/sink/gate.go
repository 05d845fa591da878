package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/ratelimit"
	"github.com/actgate/actgate/internal/sink/moment"
	"github.com/actgate/actgate/internal/sink/toolpin"
	"github.com/actgate/actgate/internal/tracing"
)

// Defaults for Options.
const (
	DefaultActTTL        = 5 * time.Minute
	DefaultMomentTTL     = 15 * time.Minute
	DefaultAuthorityTTL  = 60 * time.Second
	DefaultRecordTimeout = 5 * time.Second
	DefaultStartTimeout  = 30 * time.Second
)

// DefaultMaxPendingMomentsPerAgent and DefaultMaxPendingMomentsPerSession bound the binding
// moments an agent (and one of its sessions) may have pending at once.
const (
	DefaultMaxPendingMomentsPerAgent   = 64
	DefaultMaxPendingMomentsPerSession = 16
)

// Options wire a Gate. Policy, Store, Journal, IDs and SinkID are required, and Signer unless
// Authority is set.
type Options struct {
	// SinkID is this finality sink's identity, bound into every authority it issues and checked
	// on every authority it consumes (tool-use-binding §16 MUST 3, "sink-mismatched" → EF_040).
	SinkID string
	// Namespace is the Kubernetes namespace authorities live in; empty in embedded mode.
	Namespace string
	// Policy decides each call.
	Policy PolicyEvaluator
	// Store holds authorities. When it also implements authority.ConsumeAndPender (the embedded
	// bbolt store), consumption and the DISPATCH_PENDING record are one commit; otherwise the
	// record is written by Journal.Begin right after the consume, and a failure there withholds
	// the dispatch. When it implements authority.IssueConsumeAndPender (the embedded store), a
	// machine Permit issues, consumes and pends in that one commit; otherwise (a Lease store)
	// Issue comes first.
	Store authority.Store
	// Journal is the dispatch journal (the same bbolt store in embedded mode).
	Journal journal.Journal
	// Signer signs the authorities the gate issues; Store's verifier must trust its key.
	Signer *authority.Signer
	// IDs mints session-bound act ids. Its key must persist across restarts for a retry made
	// after a restart to be recognised as a retry of its own session's act (see doc.go).
	IDs *act.IDIssuer
	// Receipts is the receipt log. Optional: without it receipts are still written into the
	// journal commit of every consumed authority, but no chained log is kept.
	Receipts ReceiptLog
	// Registry holds emitted binding-moment envelopes and their single final resolution.
	// Optional: an envelope.MemoryRegistry on the gate's clock.
	Registry envelope.Registry
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// Log receives act ids, digests and codes, never argument values. Optional: discard.
	Log logr.Logger
	// Principal is the initiating principal written into acts (whom the agent acts for).
	// Optional: the calling agent's identity.
	Principal string
	// RuntimeID names this sink in acts' agent.runtime_id. Optional.
	RuntimeID string
	// ActTTL is an act's expires_at - created_at. Optional: DefaultActTTL.
	ActTTL time.Duration
	// MomentTTL bounds how long a binding moment awaits its resolution. Optional:
	// DefaultMomentTTL.
	MomentTTL time.Duration
	// AuthorityTTL is the lifetime of an authority when policy sets none. Optional:
	// DefaultAuthorityTTL; at most authority.MaxTTL.
	AuthorityTTL time.Duration
	// RecordTimeout bounds the journal writes after an invocation, which run even when the
	// caller's context has ended (an outcome must be recorded whatever the caller does).
	// Optional: DefaultRecordTimeout.
	RecordTimeout time.Duration
	// StartTimeout bounds recovery in New. Optional: DefaultStartTimeout.
	StartTimeout time.Duration
	// Observer is told every decision and every moment's life (metrics, Events,
	// notifications). Optional: NopObserver. Combine several with Observers.
	Observer Observer
	// MaxPendingMomentsPerAgent and MaxPendingMomentsPerSession bound the binding moments
	// (proposed or gate-authored) pending at once for one agent and for one session: a moment
	// beyond either is not registered, and the call or proposal is refused with
	// EF_MOMENT_LIMIT. Optional: DefaultMaxPendingMomentsPerAgent and
	// DefaultMaxPendingMomentsPerSession.
	MaxPendingMomentsPerAgent, MaxPendingMomentsPerSession int
	// Moments keeps binding moments, votes, resolutions and grants across restarts (the
	// embedded store). Optional: without it they live in memory, and a restart forgets them.
	Moments MomentStore
	// TracerProvider records the spans of each call (internal/tracing). Optional: nil is
	// tracing off.
	TracerProvider trace.TracerProvider
	// Authority, when set, issues and consumes the authority of protected acts instead of the
	// gate (a pod: the authority service; remote.go). Permits are one request to it, escalated
	// calls ask it about their binding moments (which then live there, not in the gate), and
	// Store must implement authority.IssueConsumeAndPender: it verifies each authority with
	// its trust anchors and journals it consumed with DISPATCH_PENDING in one commit. Signer
	// is then optional and unused. Optional: nil, the gate signs and the Store consumes.
	Authority AuthorityService
	// Pins keeps the tool definition digests recorded on first use or accepted by an operator
	// (toolpin.go). Optional: without it only digests the policy lists are accepted, and a
	// rule's onFirstUse records nothing, so its tools stay refused (fail closed).
	Pins PinStore
	// Budgets is where the gate reads the usage of the governing rule's budgets before it
	// decides (budget.go). Optional: without an Authority, the Store when it implements
	// budget.Ledger (the embedded store, which also charges them in the consume commit); with
	// an Authority, none (the pod's journal sees no other pod's spending). Without one, a call
	// whose rule has budgets is refused with EF_BUDGET_LIMIT (fail closed).
	Budgets budget.Ledger
}

// gate is the implementation behind Gate.
type gate struct {
	sinkID, namespace string
	policy            PolicyEvaluator
	store             authority.Store
	pender            authority.ConsumeAndPender      // nil when the store cannot pend in the consume commit
	issuer            authority.IssueConsumeAndPender // nil when the store cannot issue in the consume commit
	budgets           budget.Ledger                   // nil: budgeted calls are refused
	journal           journal.Journal
	signer            *authority.Signer
	ids               *act.IDIssuer
	receipts          ReceiptLog
	registry          envelope.Registry
	now               func() time.Time
	log               logr.Logger
	principal         string
	runtimeID         string
	actTTL            time.Duration
	momentTTL         time.Duration
	authorityTTL      time.Duration
	recordTimeout     time.Duration
	observer          Observer
	momentStore       MomentStore      // nil: moments live in memory
	tracer            trace.Tracer     // nil: tracing off
	remote            AuthorityService // nil: the gate issues and the store consumes
	pins              *toolpin.Table   // the pinned tool definitions (toolpin.go)

	issuedMu      sync.Mutex
	issued        map[string]issuedAuthority // act id → authority the gate issued for it
	issuedSweepAt int

	dispatches *dispatchIndex
	moments    *moment.Table
	rates      *ratelimit.Set // the rules' rate limits, in this process
}

type issuedAuthority struct {
	id      string
	expires time.Time
}

// ErrConfig is returned by New for an unusable Options.
var ErrConfig = errors.New("sink: invalid options")

// New wires a Gate and recovers the journal before it serves: every DISPATCH_PENDING or
// INVOKED record left by a previous process becomes INDETERMINATE (journal.RecoverOnStart,
// action-evidence-boundary "Classify the Effect Outcome"), and the dispatches that a retry must
// not repeat are loaded (docs/architecture.md "Retries").
func New(opts Options) (*Gate, error) {
	switch {
	case opts.SinkID == "":
		return nil, fmt.Errorf("%w: SinkID is required", ErrConfig)
	case opts.Policy == nil:
		return nil, fmt.Errorf("%w: Policy is required", ErrConfig)
	case opts.Store == nil:
		return nil, fmt.Errorf("%w: Store is required", ErrConfig)
	case opts.Journal == nil:
		return nil, fmt.Errorf("%w: Journal is required", ErrConfig)
	case opts.Signer == nil && opts.Authority == nil:
		return nil, fmt.Errorf("%w: Signer is required", ErrConfig)
	case opts.IDs == nil:
		return nil, fmt.Errorf("%w: IDs is required", ErrConfig)
	case opts.AuthorityTTL < 0 || opts.AuthorityTTL > authority.MaxTTL:
		return nil, fmt.Errorf("%w: AuthorityTTL must be within (0, %s]", ErrConfig, authority.MaxTTL)
	case opts.ActTTL < 0 || opts.ActTTL > act.MaxTTL:
		return nil, fmt.Errorf("%w: ActTTL must be within (0, %s]", ErrConfig, act.MaxTTL)
	case opts.MomentTTL < 0:
		return nil, fmt.Errorf("%w: MomentTTL is negative", ErrConfig)
	case opts.MaxPendingMomentsPerAgent < 0 || opts.MaxPendingMomentsPerSession < 0:
		return nil, fmt.Errorf("%w: pending-moment limits must not be negative", ErrConfig)
	}
	if sp, ok := opts.Policy.(interface{ SinkID() string }); ok && sp.SinkID() != "" && sp.SinkID() != opts.SinkID {
		// Authorities are bound to the gate's sink id; a policy naming another sink would have
		// every one of them refused (EF_040) or, worse, honoured by the other sink.
		return nil, fmt.Errorf("%w: policy names sink %q, this gate is %q", ErrConfig, sp.SinkID(), opts.SinkID)
	}
	g := &gate{
		sinkID:        opts.SinkID,
		namespace:     opts.Namespace,
		policy:        opts.Policy,
		store:         opts.Store,
		journal:       opts.Journal,
		signer:        opts.Signer,
		ids:           opts.IDs,
		receipts:      opts.Receipts,
		registry:      opts.Registry,
		now:           opts.Now,
		log:           opts.Log,
		principal:     opts.Principal,
		runtimeID:     opts.RuntimeID,
		actTTL:        orDefault(opts.ActTTL, DefaultActTTL),
		momentTTL:     orDefault(opts.MomentTTL, DefaultMomentTTL),
		authorityTTL:  orDefault(opts.AuthorityTTL, DefaultAuthorityTTL),
		recordTimeout: orDefault(opts.RecordTimeout, DefaultRecordTimeout),
		observer:      opts.Observer,
		momentStore:   opts.Moments,
		issued:        map[string]issuedAuthority{},
		issuedSweepAt: minSweep,
	}
	if g.now == nil {
		g.now = time.Now
	}
	g.rates = ratelimit.New(ratelimit.Options{Now: g.now})
	if g.observer == nil {
		g.observer = NopObserver{}
	}
	if g.log.GetSink() == nil {
		g.log = logr.Discard()
	}
	g.pins = g.newPinTable(opts.Pins)
	if p, ok := opts.Store.(authority.ConsumeAndPender); ok {
		g.pender = p
	}
	if p, ok := opts.Store.(authority.IssueConsumeAndPender); ok {
		g.issuer = p
	}
	g.budgets = budgetLedger(opts)
	if opts.Authority != nil {
		if g.issuer == nil {
			return nil, fmt.Errorf("%w: with an Authority the Store must journal consumed authorities (authority.IssueConsumeAndPender)", ErrConfig)
		}
		g.remote = opts.Authority
	}
	if g.registry == nil {
		g.registry = envelope.NewMemoryRegistry(g.now)
	}
	g.tracer = tracing.TracerOf(opts.TracerProvider)
	g.dispatches = newDispatchIndex(opts.IDs)
	g.moments = moment.NewTable()
	g.moments.PerAgent = cmp.Or(opts.MaxPendingMomentsPerAgent, DefaultMaxPendingMomentsPerAgent)
	g.moments.PerSession = cmp.Or(opts.MaxPendingMomentsPerSession, DefaultMaxPendingMomentsPerSession)

	ctx, cancel := context.WithTimeout(context.Background(), orDefault(opts.StartTimeout, DefaultStartTimeout))
	defer cancel()
	if err := g.recover(ctx); err != nil {
		return nil, err
	}
	if err := g.loadMoments(ctx); err != nil {
		return nil, err
	}
	return &Gate{g: g}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// remember records the authority issued for an act, so Enforce finds it by act id (§30
// store.get(act.candidate_act_id)) and can say which bound field a live call differs in.
func (g *gate) remember(actID, authorityID string, expires time.Time) {
	g.issuedMu.Lock()
	defer g.issuedMu.Unlock()
	if len(g.issued) >= g.issuedSweepAt {
		now := g.now()
		for k, v := range g.issued {
			if !now.Before(v.expires) {
				delete(g.issued, k)
			}
		}
		g.issuedSweepAt = max(minSweep, 2*len(g.issued))
	}
	g.issued[actID] = issuedAuthority{id: authorityID, expires: expires}
}

func (g *gate) issuedFor(actID string) (string, bool) {
	g.issuedMu.Lock()
	defer g.issuedMu.Unlock()
	a, ok := g.issued[actID]
	return a.id, ok
}

func (g *gate) forget(actID string) {
	g.issuedMu.Lock()
	defer g.issuedMu.Unlock()
	delete(g.issued, actID)
}

func (g *gate) canEscalate(server, tool string) bool {
	if g == nil {
		return false
	}
	return g.policy.CanEscalate(server, tool)
}

// Complete records the outcome of an invocation made after a successful Enforce (for hosts
// that call Enforce and invoke the tool themselves; Handle does this itself). It classifies the
// outcome as Handle does and returns the recorded state. A failure to record leaves the
// dispatch INDETERMINATE.
func (g *Gate) Complete(ctx context.Context, d Decision, out InvokeResult, invokeErr error) (journal.State, error) {
	if g == nil || g.g == nil {
		return "", errNoGate
	}
	if !d.Allow || d.OperationID == "" {
		return "", errors.New("sink: Complete needs the Decision of an allowed Enforce")
	}
	rec, err := g.g.journal.Record(ctx, d.OperationID)
	if err != nil {
		return "", fmt.Errorf("sink: reading dispatch %s: %w", d.OperationID, err)
	}
	st, _, err := g.g.complete(rec, out, invokeErr)
	return st, err
}
