package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tracing"
)

// Defaults of Options.
const (
	// DefaultReviewTimeout bounds one POST to the authority service (Review or Consume). The
	// service's own bound is 5 s (service.DefaultReviewTimeout); the sidecar allows for the
	// round trip.
	DefaultReviewTimeout = 6 * time.Second
	// DefaultActTTL is expires_at - created_at of the acts the sidecar builds.
	DefaultActTTL = 5 * time.Minute
	// DefaultReportTimeout bounds one Report of an outcome to the service: short, because the
	// report is best effort and the agent's answer waits for it.
	DefaultReportTimeout = 2 * time.Second
	// DefaultRecordTimeout bounds one journal write.
	DefaultRecordTimeout = 10 * time.Second
	// RuntimeID is the act's agent.runtime_id for calls through the sidecar.
	RuntimeID = "actgate-sidecar"
)

// Journal reasons the sidecar records beside internal/sink's.
const (
	// ReasonHostExecuted: the host loop reported that the tool ran (POST /v1/complete).
	ReasonHostExecuted journal.Reason = "host_loop_executed"
	// ReasonHostFailed: the host loop reported that the tool failed.
	ReasonHostFailed journal.Reason = "host_loop_failed"
	// ReasonHostUnknown: the host loop reported that it does not know the outcome.
	ReasonHostUnknown journal.Reason = "host_loop_outcome_unknown"
)

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("sidecar: invalid configuration")

// Server is one protected upstream: its ToolPolicy server name and the URL the sidecar forwards
// its calls to (the policy's spec.servers[].url; the service refuses any other destination).
type Server struct {
	Name string
	URL  string
}

// Options wire a Gate.
type Options struct {
	// Review asks the authority service. Required.
	Review *review.Client
	// Verifier holds the authority service's public keys: every authority is verified with it
	// before it is consumed. Required.
	Verifier *authority.Verifier
	// Journal is the dispatch journal (boltstore in the pod's emptyDir). Required.
	Journal journal.Journal
	// Namespace is the pod's namespace: authorities are bound to it. Required.
	Namespace string
	// SinkID is this sink's id (the governing ToolPolicy's spec.sink.id). Required.
	SinkID string
	// Servers are the protected upstreams; a call addressed anywhere else is refused. Required.
	Servers []Server
	// Principal is the act's initiating principal; empty means the agent's own identity.
	Principal string
	// IDKey keys the act ids (act.IDIssuer); at least act.MinIDKeyBytes. Empty means a random
	// key for this process.
	IDKey []byte
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// ReviewTimeout bounds one POST to the service. Optional: DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// ActTTL is the lifetime of an act. Optional: DefaultActTTL.
	ActTTL time.Duration
	// RecordTimeout bounds one journal write. Optional: DefaultRecordTimeout.
	RecordTimeout time.Duration
	// ReportTimeout bounds one Report of an outcome. Optional: DefaultReportTimeout.
	ReportTimeout time.Duration
	// Log receives act ids, digests and codes, never argument values. Optional: discard.
	Log logr.Logger
	// Observer is told every call Handle answered (internal/metrics). Optional: nothing. The
	// sidecar emits no binding moments itself (the authority service does), so only
	// CallDecided is called.
	Observer sink.Observer
	// TracerProvider records a span per call (internal/tracing). Optional: nil is tracing off.
	TracerProvider trace.TracerProvider
	// Receipts is the signed, hash-chained receipt log (receipts.go). Optional: no receipts
	// (unit tests); the sidecar always opens one in its journal directory.
	Receipts *receipt.Log
}

// Gate is the sidecar's finality sink: it satisfies mcpproxy.Gate with decisions from the
// authority service, and serves host loops (Enforce, Complete). Build it with NewGate.
type Gate struct {
	review    *review.Client
	verifier  *authority.Verifier
	journal   journal.Journal
	namespace string
	sinkID    string
	servers   map[string]string // name → URL
	principal string
	ids       *act.IDIssuer
	now       func() time.Time
	timeout   time.Duration
	actTTL    time.Duration
	recordTO  time.Duration
	reportTO  time.Duration
	log       logr.Logger
	observer  sink.Observer
	tracer    trace.Tracer // nil: tracing off
	receipts  *receipt.Log
	// unsettled refuses a call of an action whose earlier dispatch has no outcome yet.
	unsettled *unsettled
	// retries answers a same-session retry of a settled dispatch with its recorded result.
	retries *retries
}

var _ mcpproxy.Gate = (*Gate)(nil)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// NewGate validates opts and returns the Gate.
func NewGate(opts Options) (*Gate, error) {
	switch {
	case opts.Review == nil:
		return nil, fmt.Errorf("%w: Review is required", ErrConfig)
	case opts.Verifier == nil:
		return nil, fmt.Errorf("%w: Verifier is required", ErrConfig)
	case opts.Journal == nil:
		return nil, fmt.Errorf("%w: Journal is required", ErrConfig)
	case !dnsLabel.MatchString(opts.Namespace) || len(opts.Namespace) > 63:
		return nil, fmt.Errorf("%w: Namespace %q is not a namespace name", ErrConfig, opts.Namespace)
	case opts.SinkID == "":
		return nil, fmt.Errorf("%w: SinkID is required", ErrConfig)
	case len(opts.Servers) == 0:
		return nil, fmt.Errorf("%w: at least one server is required", ErrConfig)
	case opts.ReviewTimeout < 0 || opts.ActTTL < 0 || opts.RecordTimeout < 0 || opts.ReportTimeout < 0:
		return nil, fmt.Errorf("%w: durations must not be negative", ErrConfig)
	case opts.ActTTL > act.MaxTTL:
		return nil, fmt.Errorf("%w: ActTTL above %s", ErrConfig, act.MaxTTL)
	}
	g := &Gate{
		review: opts.Review, verifier: opts.Verifier, journal: opts.Journal, namespace: opts.Namespace,
		sinkID: opts.SinkID, servers: map[string]string{}, principal: opts.Principal, now: opts.Now,
		timeout: opts.ReviewTimeout, actTTL: opts.ActTTL, recordTO: opts.RecordTimeout, reportTO: opts.ReportTimeout, log: opts.Log,
		observer: opts.Observer, receipts: opts.Receipts, tracer: tracing.TracerOf(opts.TracerProvider),
	}
	if g.observer == nil {
		g.observer = sink.NopObserver{}
	}
	for i, s := range opts.Servers {
		if !dnsLabel.MatchString(s.Name) || len(s.Name) > 63 {
			return nil, fmt.Errorf("%w: servers[%d]: name %q is not a DNS label", ErrConfig, i, s.Name)
		}
		if _, dup := g.servers[s.Name]; dup {
			return nil, fmt.Errorf("%w: servers[%d]: server %q listed twice", ErrConfig, i, s.Name)
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("%w: servers[%d] (%s): URL must be an absolute http or https URL without user info", ErrConfig, i, s.Name)
		}
		g.servers[s.Name] = s.URL
	}
	key := opts.IDKey
	if len(key) == 0 {
		key = make([]byte, act.MinIDKeyBytes)
		_, _ = rand.Read(key) // never fails (Go 1.24+)
	}
	ids, err := act.NewIDIssuer(key, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: IDKey: %w", ErrConfig, err)
	}
	g.ids = ids
	if g.now == nil {
		g.now = time.Now
	}
	if g.timeout == 0 {
		g.timeout = DefaultReviewTimeout
	}
	if g.actTTL == 0 {
		g.actTTL = DefaultActTTL
	}
	if g.recordTO == 0 {
		g.recordTO = DefaultRecordTimeout
	}
	if g.reportTO == 0 {
		g.reportTO = DefaultReportTimeout
	}
	if g.log.GetSink() == nil {
		g.log = logr.Discard()
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.recordTO)
	defer cancel()
	if g.unsettled, err = loadUnsettled(ctx, g.journal); err != nil {
		return nil, err
	}
	g.retries = newRetries()
	return g, nil
}

// ServerURL returns the URL the sidecar forwards server's calls to.
func (g *Gate) ServerURL(server string) (string, bool) {
	u, ok := g.servers[server]
	return u, ok
}

// Handle is the whole flow of one tools/call (see the package documentation); it never calls
// inv on a deny. Denies are Results. The error is non-nil only when the invoker returned one
// (wrapped in sink.ErrUpstream) or the outcome could not be recorded; the Result still says
// what is known.
func (g *Gate) Handle(ctx context.Context, c sink.Call, inv sink.Invoker) (sink.Result, error) {
	if inv == nil {
		return sink.Result{}, errors.New("sidecar: Handle needs an Invoker")
	}
	start := g.now()
	ctx, span := tracing.Start(ctx, g.tracer, "actgate.sidecar.handle", trace.SpanKindInternal)
	defer span.End()
	var obs callObservation
	res, err := g.handle(ctx, c, inv, &obs)
	if !res.Allowed && res.Code != "" && c.Vendor != "" {
		if b, derr := act.DenyResult(c.Vendor, c.VendorID, act.Denial{Code: res.Code, Message: res.Message}); derr == nil {
			res.Deny = b
		}
	}
	e := obs.event(c, res, g.now().Sub(start))
	g.observer.CallDecided(e)
	if span.IsRecording() {
		se := e
		se.Tool = logfield.Bound(e.Tool) // the agent's tool name, bounded as in logs
		span.SetAttributes(se.SpanAttributes()...)
	}
	return res, err
}

// callObservation is what handle learnt about a call for the Observer: classes, the service's
// decision and the action digest, never arguments.
type callObservation struct {
	class        act.ConsequenceClass
	outcome      sink.PolicyOutcome
	audit        bool
	actionDigest string
}

func (o *callObservation) event(c sink.Call, res sink.Result, d time.Duration) sink.CallEvent {
	e := sink.CallEvent{
		ActID: res.ActID, Server: c.Server, Tool: c.Tool, Class: o.class, Outcome: o.outcome, Audit: o.audit,
		Allowed: res.Allowed, Invoked: res.Invoked, Replayed: res.Replayed, State: res.State, Code: res.Code,
		ActionDigest: o.actionDigest, Duration: d,
	}
	if e.Audit && e.Code == "" {
		e.Code = res.AuditCode
	}
	return e
}

func (g *Gate) handle(ctx context.Context, c sink.Call, inv sink.Invoker, obs *callObservation) (sink.Result, error) {
	if c.Session == "" || c.Agent == "" || c.Server == "" || c.Destination == "" {
		return refusal(ef.EFActInvalid, "The call is missing its session, agent, server or destination."), nil
	}
	dest, ok := g.servers[c.Server]
	switch {
	case !ok:
		return refusal(ef.EFUnknownTool, "This sidecar does not front that server."), nil
	case dest != c.Destination:
		// The proxy forwards to c.Destination; only the configured URL is bound by authorities.
		return refusal(ef.EFDestinationMismatch, ""), nil
	}
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	cand, err := act.NewCandidate(act.Input{Vendor: c.Vendor, VendorID: c.VendorID, ToolName: c.Tool, Arguments: args},
		g.mapping(c.Session, c.Agent, c.Server, sourceType(c.Provenance)))
	if err != nil {
		g.log.V(1).Info("Call not mapped to an act", "server", c.Server, "cause", actCode(err))
		d := act.DenialFor(err)
		return refusal(d.Code, d.Message), nil
	}
	obs.class, obs.actionDigest = cand.Act.ConsequenceClass, cand.ActionDigest()
	if res, ok := g.replay(cand, c.Session, dest); ok {
		return res, nil
	}
	ad := g.admit(ctx, cand, c.Server)
	if ad.class != "" {
		obs.class = ad.class
	}
	obs.outcome, obs.audit = ad.outcome, ad.audit
	if !ad.ok {
		g.receiptRefusal(cand, c.Server, ad.class, ad.res.Code)
		return ad.res, nil
	}
	if ad.rec == nil {
		return g.invokeHot(ctx, cand, c.Server, ad, inv)
	}
	return g.invokeDispatch(ctx, cand, c.Server, ad, inv)
}

// mapping is the act.MappingContext of a call: what the sidecar knows, never the model.
func (g *Gate) mapping(session, agent, server string, prov act.SourceType) act.MappingContext {
	principal := g.principal
	if principal == "" {
		principal = agent
	}
	dest := g.servers[server]
	return act.MappingContext{
		SessionID:   session,
		Principal:   act.Principal{PrincipalID: principal},
		Agent:       act.Agent{AgentID: agent, RuntimeID: RuntimeID},
		Server:      act.ServerIdentity{Name: server, URL: dest},
		Destination: dest,
		SinkID:      g.sinkID,
		Provenance:  prov,
		Now:         g.now,
		TTL:         g.actTTL,
		IDs:         g.ids,
	}
}

// invokeHot invokes a call the service allowed without authority (the policy's hot path, or
// audit mode): nothing to consume, nothing journaled (as internal/sink's hot path).
func (g *Gate) invokeHot(ctx context.Context, cand *act.Candidate, server string, ad admission, inv sink.Invoker) (sink.Result, error) {
	opID := journal.NewOperationID()
	if res, ok := g.receiptHot(cand, server, ad, opID); !ok {
		return res, nil
	}
	out, ierr := inv(ctx, opID)
	res := sink.Result{
		Allowed: true, Invoked: out.Outcome != sink.OutcomeNotSent, Upstream: out.Result,
		ActID: cand.Act.CandidateActID, AuditCode: ad.auditCode, OperationID: opID, Resolutions: ad.deliveries,
	}
	if ierr != nil {
		res.Message = "The upstream call did not complete."
		g.log.Info("Upstream outcome unknown", "act", res.ActID, "actionDigest", cand.ActionDigest(), "operation", opID)
		return res, fmt.Errorf("%w: %w", sink.ErrUpstream, ierr)
	}
	return res, nil
}

// invokeDispatch invokes a consumed, journaled dispatch exactly once and records its outcome.
func (g *Gate) invokeDispatch(ctx context.Context, cand *act.Candidate, server string, ad admission, inv sink.Invoker) (sink.Result, error) {
	rec := *ad.rec
	if res, ok := g.receiptDispatch(ctx, cand, server, ad); !ok {
		return res, nil
	}
	out, ierr := inv(ctx, rec.OperationID)
	state, cerr := g.record(rec, out, ierr)
	if cerr == nil && state.Terminal() {
		recorded := out.Result
		if len(recorded) > journal.MaxResultBytes {
			recorded = nil // as the journal keeps it
		}
		g.retries.add(actionKey{rec.ActionDigest, rec.Upstream}, settledDispatch{
			actID: rec.ActID, operationID: rec.OperationID, authorityID: rec.AuthorityID, state: state,
			result: append(json.RawMessage(nil), recorded...), expires: ad.expires,
		}, g.now())
	}
	res := sink.Result{
		Allowed: true, Invoked: out.Outcome != sink.OutcomeNotSent, Upstream: out.Result,
		ActID: cand.Act.CandidateActID, State: state, OperationID: rec.OperationID, Resolutions: ad.deliveries,
	}
	if state == journal.StateIndeterminate {
		res.Code = ef.EFIndeterminate
		res.Message = ef.EFIndeterminate.Description()
	}
	// The journal is the source of truth; record has reported the outcome to the service, best
	// effort, for the Act.
	g.log.Info("Dispatch outcome", "act", rec.ActID, "actObject", ad.actObject, "authority", rec.AuthorityID,
		"operation", rec.OperationID, "actionDigest", rec.ActionDigest, "state", state)
	switch {
	case ierr != nil:
		return res, fmt.Errorf("%w: %w", sink.ErrUpstream, ierr)
	case cerr != nil:
		return res, cerr
	}
	return res, nil
}

// replay answers a retry of a settled dispatch of this session (retries.go) without asking the
// service and without invoking: Allowed, Replayed, the recorded result, Invoked false.
func (g *Gate) replay(cand *act.Candidate, session, dest string) (sink.Result, bool) {
	d, ok := g.retries.lookup(actionKey{cand.ActionDigest(), dest}, g.now(), func(actID string) bool {
		return g.ids.CheckSession(actID, session) == nil
	})
	if !ok {
		return sink.Result{}, false
	}
	g.log.V(1).Info("Retry answered from the journal", "act", d.actID, "operation", d.operationID,
		"actionDigest", cand.ActionDigest(), "state", d.state)
	r := g.receiptFor(cand, g.serverOf(dest), "", receipt.DecisionOutcome, "")
	r.Code, r.ActID, r.AuthorityID, r.OperationID, r.State = sink.ReceiptCodeReplayed, d.actID, d.authorityID, d.operationID, string(d.state)
	if err := g.appendReceipt(r); err != nil {
		g.log.Error(err, "Receipt append failed", "act", d.actID, "operation", d.operationID)
	}
	return sink.Result{
		Allowed: true, Replayed: true, Upstream: d.result, ActID: d.actID, State: d.state,
		OperationID: d.operationID,
		Message:     "A retry of an act already dispatched: the recorded result, not a second invocation.",
	}, true
}

// RequestMoment is the virtual request_binding_moment tool. The review protocol has no
// operation for an agent-proposed binding moment, so it is refused (package documentation);
// calling the human-gated tool itself escalates with a gate-authored envelope.
func (g *Gate) RequestMoment(_ context.Context, _, _ string, _ sink.Proposal) (sink.Result, error) {
	return refusal(ef.EFMomentInvalid, "Proposed binding moments are not available through the authority service; call the tool itself and the gate escalates it."), nil
}

// CanEscalate is false: the sidecar does not hold the policy (package documentation).
func (g *Gate) CanEscalate(string, string) bool { return false }

// refusal is a call refused before anything was invoked.
func refusal(code ef.EFCode, msg string) sink.Result {
	if !code.Known() {
		code = ef.EFPolicyDenied
	}
	if msg == "" {
		msg = code.Description()
	}
	return sink.Result{Code: code, Message: msg}
}

// sourceType maps a transport's provenance (ToolPolicy spelling) to the act's source type, as
// internal/sink does; anything else is unknown, which policy treats as the worst source.
func sourceType(p string) act.SourceType {
	switch p {
	case "user", "system":
		return act.SourceUser
	case "retrieval":
		return act.SourceRetrieval
	case "tool_output", "tool":
		return act.SourceTool
	}
	return act.SourceUnknown
}

func actCode(err error) string {
	if c, ok := act.CodeOf(err); ok {
		return string(c)
	}
	return "unknown"
}
