package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// serviceAuthority is the authority service as the sink's AuthorityService: a machine Permit
// is one Permit review, an escalated call one Review, in which a grant for exactly this call
// is consumed by the dispatch's operation (a service that only issues it is sent one Consume). Every failure is a *sink.Refusal, and the sink invokes nothing on any of
// them: a transport error, a timeout, a non-200 answer or one that does not decode
// (review.Client), an allow that does not confirm the consumption of exactly this authority by
// exactly this operation.
type serviceAuthority struct {
	client    *review.Client
	timeout   time.Duration
	namespace string
	sinkID    string
	log       logr.Logger
	refusals  *refusals
}

var _ sink.AuthorityService = (*serviceAuthority)(nil)

// ask sends one review under the review timeout.
func (s *serviceAuthority) ask(ctx context.Context, req review.Request) (*review.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Do(ctx, req)
	if err != nil {
		code := unavailableCode(err)
		if ctx.Err() != nil {
			code = ef.EF060
		}
		msg := "The authority service could not be asked; the tool was not invoked."
		switch {
		case errors.Is(err, review.ErrServiceTooOld):
			// docs/architecture.md "Version skew between sidecars and the authority service".
			msg = "The authority service is older than this sidecar accepts (a control-plane upgrade is not finished); the tool was not invoked."
		case errors.Is(err, review.ErrSidecarRefused):
			msg = "The authority service no longer serves this pod's sidecar (restart the pod); the tool was not invoked."
		}
		s.log.Error(err, "Authority service not answered; refusing", "operation", req.Operation, "code", code)
		return nil, &sink.Refusal{Code: code, Message: msg}
	}
	return resp, nil
}

func (s *serviceAuthority) call(op review.Operation, r sink.AuthorityRequest) (review.Request, error) {
	body, err := json.Marshal(r.Act)
	if err != nil {
		return review.Request{}, &sink.Refusal{Code: ef.EFActInvalid}
	}
	return review.Request{Operation: op, Server: r.Server, Act: body, Arguments: r.Arguments}, nil
}

// refusalOf is the refusal of a response that is not an allow.
func refusalOf(resp *review.Response, fallback ef.EFCode) *sink.Refusal {
	code := resp.Code
	if !code.Known() {
		code = fallback
	}
	return &sink.Refusal{Code: code, Message: resp.Message}
}

// Permit is one Permit review: the service evaluates its policy for the act, records the Act
// and returns the authority already consumed by operationID.
func (s *serviceAuthority) Permit(ctx context.Context, r sink.AuthorityRequest, operationID string) (authority.Authority, error) {
	req, err := s.call(review.OperationPermit, r)
	if err != nil {
		return authority.Authority{}, err
	}
	req.Permit = &review.PermitRequest{OperationID: operationID}
	resp, err := s.ask(ctx, req)
	if err != nil {
		return authority.Authority{}, err
	}
	if !resp.Allowed {
		s.log.Info("Permit refused", "act", r.Act.CandidateActID, "code", resp.Code, "reason", resp.Reason)
		return authority.Authority{}, refusalOf(resp, ef.EFPolicyDenied)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		return authority.Authority{}, &sink.Refusal{Code: ef.EF002}
	}
	if c := resp.Consumed; c == nil || c.AuthorityID != a.ID || c.OperationID != operationID {
		// An allow that does not confirm this consumption is not one (fail closed).
		s.log.Info("Permit not confirmed; refusing", "act", r.Act.CandidateActID, "authority", a.ID)
		return authority.Authority{}, &sink.Refusal{Code: ef.EFStoreUnavailable,
			Message: "The authority service did not confirm the consumption; the tool was not invoked."}
	}
	return a, nil
}

// Escalate is one Review of an escalated call, naming the operation a grant is consumed by:
// pending moments, a resolution to deliver, or a grant for exactly this call, consumed by
// operationID when the answer confirms it (else to consume with Consume).
func (s *serviceAuthority) Escalate(ctx context.Context, r sink.AuthorityRequest, operationID string) (out sink.Escalation, _ error) {
	req, err := s.call(review.OperationReview, r)
	if err != nil {
		return sink.Escalation{}, err
	}
	req.Permit = &review.PermitRequest{OperationID: operationID}
	resp, err := s.ask(ctx, req)
	if err != nil {
		return sink.Escalation{}, err
	}
	// Every answer below delivers the resolution, judged against the authority it carries.
	defer func() { out.Resolutions = s.deliveries(resp.Escalation, r, out.Authority) }()
	if resp.Allowed {
		if resp.Authority == nil {
			// The service's policy lets the call through where the sink's escalates: the two
			// disagree (a policy change in flight), and the stricter one stands.
			out.Code, out.Message = ef.EFPolicyDenied, "The authority service and this sink disagree about the policy; the tool was not invoked."
			return out, nil
		}
		a, err := resp.Authority.Authority()
		if err != nil {
			out.Code = ef.EF002
			return out, nil
		}
		if c := resp.Consumed; c != nil {
			if c.AuthorityID != a.ID || c.OperationID != operationID {
				// A consumption of another authority or operation is not this call's (fail
				// closed).
				s.log.Info("Grant consumption not confirmed; refusing", "act", r.Act.CandidateActID, "authority", a.ID)
				out.Code, out.Message = ef.EFStoreUnavailable, "The authority service did not confirm the consumption; the tool was not invoked."
				return out, nil
			}
			out.Consumed = true
		}
		out.Authority = &a
		return out, nil
	}
	ref := refusalOf(resp, ef.EFPolicyDenied)
	out.Code, out.Message = ref.Code, ref.Message
	if esc := resp.Escalation; esc != nil && ref.Code == ef.EFEscalationRequired && esc.State == review.EscalationPending && len(esc.BindingMoments) > 0 {
		// The principal's command in a pod names the namespace (a host loop relays this text;
		// an MCP agent gets toolcall's, which names the same command).
		out.Message = fmt.Sprintf("Awaiting BindingMoment %s in namespace %s; its principal resolves it with: kubectl actgate resolve %s -n %s",
			esc.BindingMoments[0], s.namespace, esc.BindingMoments[0], s.namespace)
		out.Moment = s.momentRef(esc)
	}
	s.log.Info("Escalated call refused", "act", r.Act.CandidateActID, "actObject", resp.Act, "code", out.Code, "reason", resp.Reason)
	return out, nil
}

// Consume spends a granted authority's Lease for operationID.
func (s *serviceAuthority) Consume(ctx context.Context, a authority.Authority, expect authority.Binding, operationID string) error {
	resp, err := s.ask(ctx, review.Request{Operation: review.OperationConsume, Consume: &review.ConsumeRequest{
		AuthorityID: a.ID, OperationID: operationID, Binding: review.BindingOf(expect),
	}})
	switch {
	case err != nil:
		return err
	case !resp.Allowed:
		s.log.Info("Consume refused", "act", expect.ActID, "authority", a.ID, "code", resp.Code, "reason", resp.Reason)
		return refusalOf(resp, ef.EF002)
	case resp.Consumed == nil || resp.Consumed.AuthorityID != a.ID || resp.Consumed.OperationID != operationID:
		s.log.Info("Consume not confirmed; refusing", "act", expect.ActID, "authority", a.ID)
		return &sink.Refusal{Code: ef.EFStoreUnavailable, Message: "The authority service did not confirm the consumption; the tool was not invoked."}
	}
	return nil
}

// momentRef is the escalation's envelope for the agent (the additive binding_moment member and
// its plain-text rendering). An envelope that does not parse or does not have the digest the
// service named is not shown (envelope-04 §12.8): the refusal still names the moments.
func (s *serviceAuthority) momentRef(esc *review.Escalation) *sink.MomentRef {
	env, err := envelope.Parse([]byte(esc.Envelope))
	if err != nil || env.Digest() != esc.EnvelopeDigest {
		s.log.Info("Escalation envelope not shown: it does not parse or match its digest", "bindingMoments", esc.BindingMoments)
		return nil
	}
	ref := &sink.MomentRef{ID: esc.BindingMoments[0], Envelope: env, Digest: env.Digest(), Namespace: s.namespace}
	if esc.ExpiresAt != nil {
		ref.Expires = esc.ExpiresAt.Time
	}
	return ref
}

// deliveries are the resolutions the service returned with an escalation, for the agent's next
// tool result (envelope-04 §7.3). A granted resolution is delivered as authority for this call
// only with an authority whose action digest is this call's: a grant of another option (the
// principal chose an alternative) is delivered as the record of that choice, never as
// authority for the call presented (§7.3: a resolution is authority only for the action of its
// option).
func (s *serviceAuthority) deliveries(esc *review.Escalation, r sink.AuthorityRequest, a *authority.Authority) []sink.Delivery {
	if esc == nil || esc.Resolution == nil {
		return nil
	}
	res := esc.Resolution
	d := sink.Delivery{EnvelopeDigest: esc.EnvelopeDigest, Kind: res.Kind, Answer: res.Answer}
	if len(esc.BindingMoments) > 0 {
		d.MomentID = esc.BindingMoments[0]
	}
	if res.OptionIdx != nil {
		i := int(*res.OptionIdx)
		d.OptionIdx = &i
	}
	if esc.State == review.EscalationGranted && a != nil && a.Binding.ActionDigest == r.Act.ArgumentsDigest.Value {
		d.Authorized = true
		d.Tool, d.Server, d.ActionDigest = r.Act.Tool.ToolID, r.Server, r.Act.ArgumentsDigest.Value
	}
	return []sink.Delivery{d}
}

// unavailableCode is the refusal for a service that could not be asked: EF_060 when it did not
// answer in time (retryable as validation only, tool-use-binding §23), else
// EF_STORE_UNAVAILABLE.
func unavailableCode(err error) ef.EFCode {
	if errors.Is(err, context.DeadlineExceeded) {
		return ef.EF060
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return ef.EF060
	}
	return ef.EFStoreUnavailable
}

// randomKey is a fresh act-id key.
func randomKey() []byte {
	key := make([]byte, act.MinIDKeyBytes)
	_, _ = rand.Read(key) // never fails (Go 1.24+)
	return key
}

// RefusalQueue bounds the refusal records waiting to be sent to the authority service: a deny
// storm fills it, and what does not fit is dropped and counted
// (actgate_refusal_records_dropped_total), never waited for.
const RefusalQueue = 1024

// refusals sends the Act records of the calls the pod's policy denied (operation Refusal), one
// at a time, off the call path: the agent's refusal never waits for them. A record the service
// does not take is logged and not retried; the pod's receipt log holds every refusal anyway.
type refusals struct {
	client  *review.Client
	timeout time.Duration
	log     logr.Logger
	dropped func()
	queue   chan review.Request
	drops   atomic.Int64
	sent    atomic.Int64
	done    chan struct{}
	exited  chan struct{}
	once    sync.Once
}

func newRefusals(c *review.Client, timeout time.Duration, log logr.Logger, dropped func()) *refusals {
	r := &refusals{client: c, timeout: timeout, log: log, dropped: dropped, queue: make(chan review.Request, RefusalQueue),
		done: make(chan struct{}), exited: make(chan struct{})}
	go r.run()
	return r
}

// add queues the record of a refused call, or drops it when the queue is full.
func (r *refusals) add(req review.Request) {
	select {
	case r.queue <- req:
	default:
		if r.drops.Add(1) == 1 || r.drops.Load()%1000 == 0 {
			r.log.Info("Refusal records dropped: the queue to the authority service is full", "dropped", r.drops.Load(), "queue", RefusalQueue)
		}
		if r.dropped != nil {
			r.dropped()
		}
	}
}

func (r *refusals) run() {
	defer close(r.exited)
	for {
		select {
		case <-r.done:
			return
		case req := <-r.queue:
			ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
			resp, err := r.client.Do(ctx, req)
			cancel()
			switch {
			case err != nil:
				r.log.V(1).Info("Refusal record not sent", "cause", err.Error())
			case resp.Act == "":
				r.log.V(1).Info("Refusal record not taken", "code", resp.Code, "reason", resp.Reason)
			default:
				r.sent.Add(1)
			}
		}
	}
}

// stop ends sending; what is queued is dropped.
func (r *refusals) stop() {
	r.once.Do(func() { close(r.done) })
	<-r.exited
}

// Refused queues the Act record of a call the pod's policy denied.
func (s *serviceAuthority) Refused(r sink.AuthorityRequest, code ef.EFCode, message string) {
	req, err := s.call(review.OperationRefusal, r)
	if err != nil {
		return
	}
	if n := []rune(message); len(n) > 1024 {
		message = string(n[:1024])
	}
	req.Refusal = &review.RefusalRequest{Code: code, Message: message}
	s.refusals.add(req)
}

// Propose is one Propose review: the service checks the moment the sink built against its own
// policy and keeps it as BindingMoments for the policy's principals.
func (s *serviceAuthority) Propose(ctx context.Context, p sink.MomentProposal) (*sink.MomentRef, error) {
	req := review.Request{Operation: review.OperationPropose, Proposal: &review.ProposalRequest{
		Session: p.Session, SinkID: s.sinkID, Envelope: string(p.Envelope.Canonical()),
	}}
	for _, c := range p.Calls {
		req.Proposal.Calls = append(req.Proposal.Calls, review.ProposalCall{Server: c.Server, Tool: c.Tool, Arguments: c.Args})
	}
	resp, err := s.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	esc := resp.Escalation
	if !resp.Allowed || esc == nil || esc.State != review.EscalationPending || len(esc.BindingMoments) == 0 {
		s.log.Info("Proposed binding moment refused", "envelope", p.Envelope.Digest(), "code", resp.Code, "reason", resp.Reason)
		return nil, refusalOf(resp, ef.EFMomentInvalid)
	}
	if esc.EnvelopeDigest != p.Envelope.Digest() {
		return nil, &sink.Refusal{Code: ef.EFMomentInvalid, Message: "The authority service registered another envelope than the one proposed."}
	}
	ref := &sink.MomentRef{ID: esc.BindingMoments[0], Envelope: p.Envelope, Digest: p.Envelope.Digest(), Namespace: s.namespace}
	if esc.ExpiresAt != nil {
		ref.Expires = esc.ExpiresAt.Time
	}
	s.log.Info("Proposed binding moment registered", "actObject", resp.Act, "bindingMoments", esc.BindingMoments, "envelope", ref.Digest)
	return ref, nil
}
