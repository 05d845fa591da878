package sink

import (
	"context"
	"encoding/json"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink/moment"
)

// RequestBindingMomentTool is the name of the virtual tool through which an agent asks the gate
// for a binding moment (docs/architecture.md "Human decisions").
const RequestBindingMomentTool = "request_binding_moment"

// Call is one live tool call as a transport (MCP proxy, HTTP host-loop endpoint) received it.
type Call struct {
	Session     string          // transport session id (MCP session / host-loop session); required
	Agent       string          // initiating agent identity (embedded: configured name; k8s: SA user)
	Server      string          // ToolServer.name of the upstream the call is addressed to
	Destination string          // live upstream identity (URL the sink will actually contact)
	Tool        string          // tool name as called
	Args        json.RawMessage // raw arguments as received (the sink canonicalizes them itself)
	Provenance  string          // instruction provenance if the transport knows it ("" = unknown)
	Vendor      act.Vendor      // for vendor-shaped denies (MCP here)
	VendorID    string          // JSON-RPC id text etc., never used as the act id
}

// InvokeOutcome says how authoritative the outcome of one upstream invocation is. The zero
// value is OutcomeIndeterminate: an Invoker that says nothing has said nothing authoritative.
type InvokeOutcome int

const (
	// OutcomeIndeterminate — bytes may have left but no authoritative result came back (timeout,
	// connection loss).
	OutcomeIndeterminate InvokeOutcome = iota
	// OutcomeExecuted — the upstream returned an authoritative success result.
	OutcomeExecuted
	// OutcomeFailed — the upstream returned an authoritative error result (the action did not
	// take effect).
	OutcomeFailed
	// OutcomeNotSent — the invocation failed before any byte left; the upstream cannot have
	// acted. Report it only when that is certain (e.g. the connection was never established).
	OutcomeNotSent
	// OutcomeAccepted — the upstream accepted the call to run it on its own time and answered
	// with a handle to it (an MCP task's CreateTaskResult, which is Result): the act was
	// dispatched and is running. The dispatch is recorded INVOKED, and its outcome is recorded
	// later with Gate.Settle.
	OutcomeAccepted
)

// String names the outcome.
func (o InvokeOutcome) String() string {
	switch o {
	case OutcomeNotSent:
		return "NotSent"
	case OutcomeExecuted:
		return "Executed"
	case OutcomeFailed:
		return "Failed"
	case OutcomeIndeterminate:
		return "Indeterminate"
	case OutcomeAccepted:
		return "Accepted"
	}
	return "InvokeOutcome(?)"
}

// Invoker contacts the upstream exactly once. operationID is the idempotency key to forward
// (MCP `_meta["actgate.io/operation-id"]` and HTTP `Idempotency-Key`). It returns the upstream's
// result bytes and how authoritative the outcome is. A transport error or timeout after bytes may
// have left → Outcome Indeterminate; an error before any byte left → NotSent.
type Invoker func(ctx context.Context, operationID string) (InvokeResult, error)

// Invocation is what the gate says about an invocation it is making, for an Invoker that needs
// more than the operation id (InvocationFrom).
type Invocation struct {
	// OperationID is the idempotency key (the Invoker's argument).
	OperationID string
	// AuthorityID is the consumed authority of a journaled dispatch ("" on the hot path).
	AuthorityID string
	// Journaled is true for a dispatch of a consumed authority: its DISPATCH_PENDING record is
	// durable and its outcome is recorded from what the Invoker returns. False on the hot path,
	// where nothing is journaled.
	Journaled bool
}

type invocationKey struct{}

// InvocationFrom returns the Invocation of the context the gate passes to an Invoker.
func InvocationFrom(ctx context.Context) (Invocation, bool) {
	i, ok := ctx.Value(invocationKey{}).(Invocation)
	return i, ok
}

func withInvocation(ctx context.Context, i Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, i)
}

// InvokeResult is what an Invoker returns.
type InvokeResult struct {
	Result  json.RawMessage // e.g. the MCP CallToolResult JSON
	Outcome InvokeOutcome   // Executed | Failed (authoritative upstream error result) | Indeterminate | NotSent
}

// Result is what the transport returns to the agent. The cases:
//   - deny or escalation: Allowed false, Invoked false, Code set, Deny (vendor-shaped) set when
//     the call named its vendor, Moment set for EF_ESCALATION_REQUIRED with a binding moment;
//   - allowed and answered: Allowed and Invoked, Upstream the upstream's result, State EXECUTED
//     or FAILED for a dispatch that consumed authority ("" on the hot path);
//   - allowed, outcome unknown: Allowed and Invoked, Code EF_INDETERMINATE, State
//     INDETERMINATE: the effect may have happened; the agent must not retry it;
//   - a retry of a dispatched act: Allowed, Replayed, Invoked false, Upstream the recorded
//     result (or Allowed false with EF_INDETERMINATE when the earlier outcome is unknown);
//   - RequestMoment accepted: Allowed, Invoked false, Moment set.
type Result struct {
	Invoked  bool            // the upstream was contacted by THIS call
	Allowed  bool            // the call was allowed (it ran, or a recorded result is replayed)
	Code     ef.EFCode       // deny/escalate code
	Message  string          // safe to show the agent
	Upstream json.RawMessage // upstream result (allowed and executed, or a recorded result on retry)
	Moment   *MomentRef      // escalation: moment id + envelope (for the additive binding_moment member)
	ActID    string          // the act id the gate assigned
	State    journal.State   // AEB state of the dispatch, if any
	Replayed bool            // recorded result returned to a retry, upstream NOT contacted
	// Deny is the vendor-shaped deny payload (act.DenyResult) when the call was not allowed and
	// the vendor is known; nil otherwise.
	Deny json.RawMessage
	// AuditCode is set in audit mode when enforcement would have denied with this code; the call
	// proceeded as allow (never called enforcement).
	AuditCode ef.EFCode
	// Resolutions are binding-moment resolutions made since this session's previous call,
	// delivered with this result whatever happened to the call itself (envelope-04 §7.3: the
	// agent's continuation differs for option, answer, question and declined).
	Resolutions []Delivery
	// OperationID is the dispatch's idempotency key, when one was used.
	OperationID string
	// RetryAfter is, for EF_RATE_LIMITED, how long until the rule's bucket holds a call again
	// (whole seconds, rounded up); 0 otherwise. Transports that have a Retry-After say it.
	RetryAfter time.Duration
	// Accepted is the upstream's acceptance of a journaled dispatch it runs on its own time
	// (OutcomeAccepted: an MCP CreateTaskResult), to the call that dispatched it (State
	// INVOKED) and to a retry of it (Replayed), which gets the same handle, never a second
	// dispatch. Upstream is then the settled outcome's result, when there is one.
	Accepted json.RawMessage
}

// Delivery is one binding-moment resolution returned to the agent of the moment's session
// (moment.Delivery).
type Delivery = moment.Delivery

// MomentRef points at a binding moment the gate registered: its id and the gate-authored
// envelope (the transport adds it as the additive `binding_moment` member, plus a plain-text
// fallback).
type MomentRef struct {
	ID       string             // envelope moment_id
	Envelope *envelope.Envelope // the registered envelope
	Digest   string             // envelope digest
	Text     string             // plain-text rendering for clients without binding-moment support
	Expires  time.Time          // when the moment expires
	// Namespace is the BindingMoment's namespace in a cluster, where its principal resolves it
	// with kubectl; empty for the standalone gate's moments.
	Namespace string
}

// Decision is the result of Enforce (tool-use-binding §16): allow only after the authority was
// consumed.
type Decision struct {
	Allow       bool
	Code        ef.EFCode // set when !Allow
	Message     string    // safe to show the agent
	AuthorityID string    // the consumed authority (Allow)
	Retryable   bool      // true only for EF060 (§23)
	// OperationID is the dispatch record written in DISPATCH_PENDING with the consume (Allow):
	// the idempotency key to forward, and the record Gate.Complete moves to its outcome.
	OperationID string
	// State is the journal state of that record (DISPATCH_PENDING on Allow).
	State journal.State
}

// ResolveResult is what Resolve returns to the resolving principal.
type ResolveResult struct {
	MomentID    string
	Kind        string // option | answer | question | declined
	OptionID    string // the chosen option (Kind == option)
	AuthorityID string // issued authority (Kind == option and the requirement is met)
	Pending     bool   // an option vote was recorded but more distinct principals are required
	Votes       int    // distinct principals who chose this option so far
	Required    int    // distinct principals required
}

// MomentFilter selects moments for Moments.
type MomentFilter struct {
	Pending bool   // only unresolved, unexpired moments
	Session string // only this session ("" = all)
}

// Moment is a registered binding moment as an operator sees it (moment.View).
type Moment = moment.View

// Gate is the finality sink: policy, authority store, journal, receipt log, moments, clock and
// sink id. Build it with New.
type Gate struct {
	g *gate
}

// Handle is the whole flow of one call (docs/architecture.md "The flow of one call"); it never
// calls inv on deny. Denies are Results, not errors. The error is non-nil only when the Invoker
// returned one (wrapped in ErrUpstream), when the outcome of an invocation could not be recorded,
// or for a Gate not built with New or a nil Invoker; the Result still says what is known.
func (g *Gate) Handle(ctx context.Context, c Call, inv Invoker) (Result, error) {
	return g.g.handle(ctx, c, inv)
}

// Enforce implements tool-use-binding §16 for one act whose live arguments are liveArgs.
func (g *Gate) Enforce(ctx context.Context, a *act.AgentCandidateAct, liveArgs json.RawMessage) (Decision, error) {
	return g.g.enforce(ctx, a, liveArgs)
}

// RequestMoment is the virtual request_binding_moment tool.
func (g *Gate) RequestMoment(ctx context.Context, session, agent string, p Proposal) (Result, error) {
	return g.g.requestMoment(ctx, session, agent, p)
}

// Resolve applies a principal's resolution (envelope-04 §7.3 JSON) to a moment.
func (g *Gate) Resolve(ctx context.Context, momentID, principal string, resolution []byte) (ResolveResult, error) {
	return g.g.resolve(ctx, momentID, principal, resolution)
}

// Moments lists moments (pending or all).
func (g *Gate) Moments(ctx context.Context, filter MomentFilter) ([]Moment, error) {
	return g.g.momentsList(ctx, filter)
}

// CanEscalate reports whether a call of tool on server may escalate to a binding moment (the
// tools/list emits_binding_moment annotation).
func (g *Gate) CanEscalate(server, tool string) bool {
	return g.g.canEscalate(server, tool)
}
