package policysource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// Defaults for Options.
const (
	// DefaultWatch is how long one long poll waits for a change.
	DefaultWatch = 30 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait after a failed request.
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// ErrNoPolicy is returned by WaitReady when ctx ended before a policy was held.
var ErrNoPolicy = errors.New("policysource: no current policy")

// Fetcher asks the authority service for the pod's policy: *review.Client.
type Fetcher interface {
	PodPolicy(ctx context.Context, version string, watch time.Duration) (*review.PodPolicy, error)
}

// Options configure a Source.
type Options struct {
	// Client asks the service. Required.
	Client Fetcher
	// SinkID is the sidecar's sink id: a policy naming another sink (spec.sink.id) is held but
	// refuses every call with EF_040, since every authority would be bound to the wrong sink.
	// Optional.
	SinkID string
	// Watch is how long one long poll waits. Optional: DefaultWatch.
	Watch time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed request (doubling from min to
	// max). Optional: DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Log receives the policy's name, epoch and version and the reasons of refusals.
	// Optional: discard.
	Log logr.Logger
}

// Status is what a Source holds.
type Status struct {
	// Ready is true when a compiled policy is held: calls are decided by it.
	Ready bool
	// Policy is namespace/name of the policy held ("" when none).
	Policy string
	// Epoch is the policy epoch of the policy held (0 when none).
	Epoch int64
	// Version is the service's version of the last answer applied ("" before the first).
	Version string
	// Reason says why no policy is held: a review.Reason of the service's, "Refused",
	// "CompileError", "SinkMismatch" or "NotYetReceived". Empty when Ready.
	Reason string
	// Message says it in a sentence, safe to show the agent.
	Message string
	// Updated is when the Source last applied an answer.
	Updated time.Time
	// Authority is why the last request to the authority service got no policy answer
	// (diag.AuthorityUnreachable, diag.AuthorityTLSFailure, diag.AuthorityRefused, and for an
	// answer of another review protocol level diag.AuthorityTooOld, diag.SidecarTooOld); empty
	// when it answered. AuthorityDetail is that request's error, without the token.
	Authority, AuthorityDetail string
	// AuthoritySince is when the requests began failing (zero when Authority is empty).
	AuthoritySince time.Time
}

// Source is a sink.PolicyEvaluator that follows the pod's governing policy. Build it with New
// and run it with Run; it is safe for concurrent use.
type Source struct {
	opts Options
	log  logr.Logger

	mu      sync.RWMutex
	status  Status
	eval    sink.PolicyEvaluator         // nil: refuse every call
	sinkID  string                       // the held policy's spec.sink.id
	pins    map[[2]string]sink.PinRecord // the held policy's status.toolPins by server and tool
	readyCh chan struct{}                // closed while a policy is held
	// The last request's failure (Status.Authority and AuthorityDetail), kept apart from the
	// policy held: a failure does not replace the policy, an answer clears it.
	authReason, authDetail string
	authSince              time.Time
}

// New returns a Source holding no policy: it refuses every call until Run receives one.
func New(opts Options) (*Source, error) {
	if opts.Client == nil {
		return nil, errors.New("policysource: Options.Client is required")
	}
	if opts.Watch <= 0 {
		opts.Watch = DefaultWatch
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Source{opts: opts, log: opts.Log, readyCh: make(chan struct{}), status: Status{
		Reason: "NotYetReceived", Message: "The sidecar has not received its pod's ToolPolicy from the authority service yet.",
	}}, nil
}

// Run follows the policy until ctx ends: one request for the current answer, then long polls
// from the version held. It returns ctx's error.
func (s *Source) Run(ctx context.Context) error {
	backoff := s.opts.MinBackoff
	var watch time.Duration // the first request answers at once
	for {
		held := s.Status().Version
		rctx, cancel := context.WithTimeout(ctx, watch+30*time.Second)
		p, err := s.opts.Client.PodPolicy(rctx, held, watch)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.noteAuthority(err)
		if err == nil {
			backoff = s.opts.MinBackoff
			watch = s.opts.Watch
			s.apply(p)
			continue
		}
		// A refusal or an answer that does not decode is authoritative: hold nothing. The
		// service unreachable: keep what is held.
		if errors.Is(err, review.ErrPolicyRefused) || errors.Is(err, review.ErrBadReview) {
			s.refuse("Refused", "The authority service serves no policy to this sidecar.", err)
		} else {
			s.log.V(1).Info("Authority service unreachable; keeping the policy held", "error", err.Error(), "policy", s.Status().Policy)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
		watch = 0 // after a failure, ask for the current answer at once
	}
}

// apply installs the service's answer.
func (s *Source) apply(p *review.PodPolicy) {
	if p.Version == s.Status().Version {
		return
	}
	if n := p.None; n != nil {
		s.set(Status{Version: p.Version, Reason: string(n.Reason), Message: n.Message}, nil, "")
		s.log.Info("No ToolPolicy governs this pod; every call is refused", "reason", n.Reason, "version", p.Version)
		return
	}
	g := p.Policy
	name := g.Namespace + "/" + g.Name
	compiled, err := policy.Compile(name, &g.Spec, g.Epoch)
	if err != nil {
		s.set(Status{Version: p.Version, Policy: name, Reason: "CompileError",
			Message: fmt.Sprintf("ToolPolicy %s does not compile in this sidecar; every call is refused.", name)}, nil, "")
		s.log.Error(err, "ToolPolicy does not compile; every call is refused", "policy", name, "epoch", g.Epoch)
		return
	}
	st := Status{Ready: true, Policy: name, Epoch: g.Epoch, Version: p.Version}
	if want := s.opts.SinkID; want != "" && compiled.SinkID() != "" && compiled.SinkID() != want {
		st.Ready, st.Reason = false, "SinkMismatch"
		st.Message = fmt.Sprintf("ToolPolicy %s names another finality sink than this sidecar's; every call is refused.", name)
		s.set(st, nil, "")
		s.log.Info("ToolPolicy names another sink; every call is refused", "policy", name, "sink", compiled.SinkID(), "want", want)
		return
	}
	pins := make(map[[2]string]sink.PinRecord, len(g.ToolPins))
	for _, p := range g.ToolPins {
		pins[[2]string{p.Server, p.Tool}] = sink.PinRecord{Server: p.Server, Tool: p.Tool, Digest: p.SHA256, Members: p.Members,
			AcceptedBy: p.AcceptedBy, AcceptedAt: p.AcceptedAt.Time}
	}
	s.mu.Lock()
	s.pins = pins
	s.mu.Unlock()
	s.set(st, sink.CompiledPolicy(compiled), compiled.SinkID())
	s.log.Info("ToolPolicy applied", "policy", name, "epoch", g.Epoch, "generation", g.Generation, "version", p.Version)
}

// noteAuthority records the outcome of one request to the service (nil: it answered).
func (s *Source) noteAuthority(err error) {
	reason, detail := "", ""
	switch {
	case err == nil:
	case errors.Is(err, review.ErrServiceTooOld):
		reason, detail = diag.AuthorityTooOld, err.Error()
	case errors.Is(err, review.ErrSidecarRefused):
		reason, detail = diag.SidecarTooOld, err.Error()
	case errors.Is(err, review.ErrPolicyRefused):
		reason, detail = diag.AuthorityRefused, err.Error()
	case diag.TLSFailure(err):
		reason, detail = diag.AuthorityTLSFailure, err.Error()
	default:
		reason, detail = diag.AuthorityUnreachable, err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason != "" && s.authReason == "" {
		s.authSince = time.Now()
	}
	if reason == "" {
		s.authSince = time.Time{}
	}
	s.authReason, s.authDetail = reason, detail
}

// refuse drops the policy held.
func (s *Source) refuse(reason, msg string, err error) {
	st := s.Status()
	if !st.Ready && st.Reason == reason {
		return
	}
	s.set(Status{Reason: reason, Message: msg}, nil, "")
	s.log.Error(err, "Pod policy refused; every call is refused", "reason", reason)
}

func (s *Source) set(st Status, eval sink.PolicyEvaluator, sinkID string) {
	st.Updated = time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	wasReady := s.eval != nil
	s.status, s.eval, s.sinkID = st, eval, sinkID
	switch {
	case eval != nil && !wasReady:
		close(s.readyCh)
	case eval == nil && wasReady:
		s.readyCh = make(chan struct{})
	}
}

// Status returns what the Source holds.
func (s *Source) Status() Status {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.status
	st.Authority, st.AuthorityDetail, st.AuthoritySince = s.authReason, s.authDetail, s.authSince
	return st
}

// Ready reports whether a compiled policy is held.
func (s *Source) Ready() bool { return s.Status().Ready }

// Epoch is the policy epoch of the policy held, 0 when none.
func (s *Source) Epoch() int64 { return s.Status().Epoch }

// WaitReady returns nil once a policy is held, or ErrNoPolicy when ctx ends first.
func (s *Source) WaitReady(ctx context.Context) error {
	s.mu.RLock()
	ch := s.readyCh
	s.mu.RUnlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %s", ErrNoPolicy, s.Status().Message)
	}
}

func (s *Source) current() (sink.PolicyEvaluator, Status) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eval, s.status
}

// Evaluate decides with the policy held, or refuses with EF_POLICY_UNAVAILABLE (EF_040 when the
// policy names another sink).
func (s *Source) Evaluate(ctx context.Context, r sink.PolicyRequest) sink.PolicyDecision {
	eval, st := s.current()
	if eval == nil {
		code := ef.EFPolicyUnavailable
		if st.Reason == "SinkMismatch" {
			code = ef.EF040
		}
		return sink.PolicyDecision{Outcome: sink.PolicyDeny, Code: code, Message: st.Message, Policy: st.Policy, Epoch: st.Epoch}
	}
	return eval.Evaluate(ctx, r)
}

// CanEscalate reports whether the policy held lets tool on server escalate; false with none.
func (s *Source) CanEscalate(server, tool string) bool {
	eval, _ := s.current()
	return eval != nil && eval.CanEscalate(server, tool)
}

// ToolPin is the pin of the rule governing tool on server in the policy held (sink.ToolPinner);
// none without a policy, whose calls are refused anyway.
func (s *Source) ToolPin(server, tool string) (sink.ToolPin, bool) {
	eval, _ := s.current()
	p, ok := eval.(sink.ToolPinner)
	if !ok {
		return sink.ToolPin{}, false
	}
	return p.ToolPin(server, tool)
}

// RecordedPin returns the tool definition digest the held policy's status.toolPins records for
// tool on server (docs/api.md "Pinned tool definitions").
func (s *Source) RecordedPin(server, tool string) (sink.PinRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.eval == nil {
		return sink.PinRecord{}, false
	}
	r, ok := s.pins[[2]string{server, tool}]
	return r, ok
}

// Servers lists the servers of the policy held; none without one.
func (s *Source) Servers() []sink.ServerInfo {
	eval, _ := s.current()
	if eval == nil {
		return nil
	}
	return eval.Servers()
}

// SinkID is the held policy's spec.sink.id ("" with none, or when it names none).
func (s *Source) SinkID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sinkID
}

var _ sink.PolicyEvaluator = (*Source)(nil)
