package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// admission is what the authority service decided for one act, after the sidecar verified and
// consumed what it was given.
type admission struct {
	ok bool
	// res is the refusal when !ok.
	res sink.Result
	// rec is the DISPATCH_PENDING record of a consumed authority; nil on the hot path.
	rec *journal.DispatchRecord
	// auditCode is what enforcement would have returned (audit mode only).
	auditCode ef.EFCode
	// deliveries are binding-moment resolutions the service returned for the agent.
	deliveries []sink.Delivery
	// moments are the BindingMoment names of an escalation, envelopeDigest its envelope.
	moments        []string
	envelopeDigest string
	retryable      bool
	// actObject is the name of the Act object the service recorded.
	actObject string
	// expires is the consumed authority's expiry (the window in which a retry is answered
	// from the journal, retries.go).
	expires time.Time
	// class, outcome and audit are the service's consequence class and decision, for the
	// Observer (metrics); outcome is "" when the service was not asked or did not answer.
	class   act.ConsequenceClass
	outcome sink.PolicyOutcome
	audit   bool
}

// outcomeOf maps the service's decision onto the gate's policy outcomes, for the Observer.
func outcomeOf(resp *review.Response) sink.PolicyOutcome {
	switch resp.Decision {
	case v1alpha1.ActDecisionEscalated:
		return sink.PolicyEscalate
	case v1alpha1.ActDecisionDenied:
		return sink.PolicyDeny
	}
	if !resp.Allowed {
		return sink.PolicyDeny
	}
	if resp.Authority != nil {
		return sink.PolicyPermit
	}
	return sink.PolicyAllow
}

// admit asks the service about cand (addressed to server) and, when it is allowed under
// authority, verifies the authority, consumes it and journals DISPATCH_PENDING. Nothing here
// invokes anything; every failure is a refusal.
func (g *Gate) admit(ctx context.Context, cand *act.Candidate, server string) admission {
	deny := func(code ef.EFCode, msg string) admission {
		res := refusal(code, msg)
		res.ActID = cand.Act.CandidateActID
		return admission{res: res, retryable: code.Retryable()}
	}
	body, err := json.Marshal(cand.Act)
	if err != nil {
		return deny(ef.EFActInvalid, "")
	}
	resp, err := g.ask(ctx, review.Request{Operation: review.OperationReview, Server: server, Act: body, Arguments: cand.Arguments})
	if err != nil {
		code := unavailableCode(err)
		g.log.Error(err, "Review failed; refusing", "act", cand.Act.CandidateActID, "actionDigest", cand.ActionDigest(), "code", code)
		return deny(code, "The authority service could not be asked; the tool was not invoked.")
	}
	ad := admission{actObject: resp.Act, class: act.ConsequenceClass(resp.ConsequenceClass), outcome: outcomeOf(resp),
		audit: resp.Decision == v1alpha1.ActDecisionAuditDenied}
	ad.deliveries = g.deliveries(resp.Escalation, cand, server)
	if !resp.Allowed {
		return g.refused(cand, resp, ad)
	}
	if resp.Decision == v1alpha1.ActDecisionAuditDenied {
		ad.auditCode = resp.Code
	}
	if resp.Authority == nil {
		// Allowed without authority: the policy's hot path (or audit mode).
		ad.ok = true
		return ad
	}

	// tool-use-binding §16 MUST 1–3: the authority is checked against what this sidecar
	// expects from the live call, never against what the authority says of itself. The policy
	// epoch is the one thing the sidecar cannot know; the service checks it at consume against
	// the policy's current epoch (MUST 5).
	a, err := resp.Authority.Authority()
	if err != nil {
		g.log.Info("Authority refused: malformed", "act", cand.Act.CandidateActID, "cause", authority.CodeOf(err))
		return withDeliveries(deny(ef.EF002, ""), ad)
	}
	expect := authority.Binding{
		ActID: cand.Act.CandidateActID, ArgumentsDigest: cand.ArgumentsDigest(), ActionDigest: cand.ActionDigest(),
		Tool: cand.Act.Tool.ToolID, Destination: g.servers[server], SinkID: g.sinkID,
		PolicyEpoch: a.Binding.PolicyEpoch, Namespace: g.namespace,
	}
	if err := g.verifier.Verify(a, expect, g.now()); err != nil {
		code := authorityCode(err)
		g.log.Info("Authority refused at the sink", "act", cand.Act.CandidateActID, "authority", a.ID, "code", code, "cause", authority.CodeOf(err))
		return withDeliveries(deny(code, ""), ad)
	}

	// An earlier dispatch of this very action without an outcome (in flight, or INDETERMINATE
	// since a crash or an unknown upstream answer) stops the call before anything is spent
	// (unsettled.go).
	k := actionKey{cand.ActionDigest(), g.servers[server]}
	if !g.unsettled.reserve(k) {
		g.log.Info("Call refused: an earlier dispatch of this action has no outcome", "act", cand.Act.CandidateActID,
			"actionDigest", cand.ActionDigest(), "authority", a.ID)
		d := withDeliveries(deny(ef.EFIndeterminate, ""), ad)
		d.res.State = journal.StateIndeterminate
		return d
	}
	defer g.unsettled.release(k, "") // a no-op once the journal has the record (pending below)

	// Consume (the Lease compare-and-swap) right before invoking, for the operation whose id
	// the upstream will receive.
	opID := journal.NewOperationID()
	_ = failpoint.Inject(failpoint.BeforeConsume)
	cresp, err := g.ask(ctx, review.Request{Operation: review.OperationConsume, Consume: &review.ConsumeRequest{
		AuthorityID: a.ID, OperationID: opID, Binding: review.BindingOf(expect),
	}})
	switch {
	case err != nil:
		code := unavailableCode(err)
		g.log.Error(err, "Consume failed; refusing", "act", cand.Act.CandidateActID, "authority", a.ID, "code", code)
		return withDeliveries(deny(code, "The authority could not be consumed; the tool was not invoked."), ad)
	case !cresp.Allowed:
		code := cresp.Code
		if !code.Known() {
			code = ef.EF002
		}
		g.log.Info("Consume refused", "act", cand.Act.CandidateActID, "authority", a.ID, "code", code, "reason", cresp.Reason)
		return withDeliveries(deny(code, cresp.Message), ad)
	case cresp.Consumed == nil || cresp.Consumed.AuthorityID != a.ID || cresp.Consumed.OperationID != opID:
		// An allow that does not confirm this consumption is not one (fail closed).
		g.log.Info("Consume not confirmed; refusing", "act", cand.Act.CandidateActID, "authority", a.ID)
		return withDeliveries(deny(ef.EFStoreUnavailable, "The authority service did not confirm the consumption; the tool was not invoked."), ad)
	}

	// DISPATCH_PENDING, durably, before anything leaves (action-evidence-boundary "Invoke the
	// Frozen Action"). The authority is spent either way: a failure here refuses, and nothing
	// was dispatched for it.
	_ = failpoint.Inject(failpoint.AfterConsume) // the Lease is spent; the journal has nothing yet
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.recordTO)
	defer cancel()
	rec, err := g.journal.Begin(rctx, journal.DispatchRecord{
		OperationID: opID, ActID: cand.Act.CandidateActID, AuthorityID: a.ID,
		ActionDigest: cand.ActionDigest(), ArgumentsDigest: cand.ArgumentsDigest(),
		Upstream: g.servers[server], Tool: cand.Act.Tool.ToolID, State: journal.StateDispatchPending,
	}, nil)
	if err != nil {
		g.log.Error(err, "DISPATCH_PENDING not recorded; refusing (the authority is spent, nothing was dispatched)",
			"act", cand.Act.CandidateActID, "authority", a.ID, "operation", opID)
		return withDeliveries(deny(ef.EFStoreUnavailable, "The dispatch could not be journaled; the tool was not invoked."), ad)
	}
	g.unsettled.pending(k, opID)
	g.log.V(1).Info("Dispatch", "act", rec.ActID, "actionDigest", rec.ActionDigest, "authority", a.ID, "operation", opID, "server", server)
	ad.ok, ad.rec, ad.expires = true, &rec, a.ExpiresAt
	return ad
}

// withDeliveries keeps the resolutions of ad on a refusal d.
func withDeliveries(d, ad admission) admission {
	d.deliveries, d.actObject = ad.deliveries, ad.actObject
	d.class, d.outcome, d.audit = ad.class, ad.outcome, ad.audit
	d.res.Resolutions = ad.deliveries
	return d
}

// ask POSTs one review under the review timeout. A response the client could not read, or an
// HTTP error, is an error; a decoded refusal is a Response with Allowed false.
func (g *Gate) ask(ctx context.Context, req review.Request) (*review.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, err := g.review.Do(ctx, req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", err, ctx.Err())
		}
		return nil, err
	}
	return resp, nil
}

// refused turns the service's refusal into the agent's: the code and message it gave, and for
// a pending escalation the BindingMoments and the gate-authored envelope.
func (g *Gate) refused(cand *act.Candidate, resp *review.Response, ad admission) admission {
	code := resp.Code
	if !code.Known() {
		code = ef.EFPolicyDenied
	}
	res := refusal(code, resp.Message)
	res.ActID = cand.Act.CandidateActID
	res.Resolutions = ad.deliveries
	ad.retryable = resp.Retryable && code.Retryable()
	if esc := resp.Escalation; esc != nil && code == ef.EFEscalationRequired && esc.State == review.EscalationPending && len(esc.BindingMoments) > 0 {
		ad.moments, ad.envelopeDigest = esc.BindingMoments, esc.EnvelopeDigest
		res.Message = fmt.Sprintf("Awaiting BindingMoment %s in namespace %s; its principal resolves it with kubectl actgate resolve.",
			esc.BindingMoments[0], g.namespace)
		res.Moment = g.momentRef(esc)
	}
	g.log.Info("Call refused", "act", res.ActID, "actObject", resp.Act, "actionDigest", cand.ActionDigest(),
		"code", code, "reason", resp.Reason, "bindingMoments", ad.moments)
	ad.res = res
	return ad
}

// momentRef is the escalation's envelope for the agent (the additive binding_moment member and
// its plain-text rendering). An envelope that does not parse or does not have the digest the
// service named is not shown (envelope-04 §12.8): the refusal still names the moments.
func (g *Gate) momentRef(esc *review.Escalation) *sink.MomentRef {
	env, err := envelope.Parse([]byte(esc.Envelope))
	if err != nil || env.Digest() != esc.EnvelopeDigest {
		g.log.Info("Escalation envelope not shown: it does not parse or match its digest", "bindingMoments", esc.BindingMoments)
		return nil
	}
	ref := &sink.MomentRef{ID: esc.BindingMoments[0], Envelope: env, Digest: env.Digest()}
	if esc.ExpiresAt != nil {
		ref.Expires = esc.ExpiresAt.Time
	}
	return ref
}

// deliveries are the resolutions the service returned with an escalation, for the agent's next
// tool result (envelope-04 §7.3).
func (g *Gate) deliveries(esc *review.Escalation, cand *act.Candidate, server string) []sink.Delivery {
	if esc == nil || esc.Resolution == nil {
		return nil
	}
	r := esc.Resolution
	d := sink.Delivery{EnvelopeDigest: esc.EnvelopeDigest, Kind: r.Kind, Answer: r.Answer}
	if len(esc.BindingMoments) > 0 {
		d.MomentID = esc.BindingMoments[0]
	}
	if r.OptionIdx != nil {
		i := int(*r.OptionIdx)
		d.OptionIdx = &i
	}
	if esc.State == review.EscalationGranted {
		d.Authorized = true
		d.Tool, d.Server, d.ActionDigest = cand.Act.Tool.ToolID, server, cand.ActionDigest()
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

// authorityCode maps a verification error to the EF code (tool-use-binding §23, §30), as the
// embedded sink and the service map the same sentinels.
func authorityCode(err error) ef.EFCode {
	switch {
	case errors.Is(err, authority.ErrConsumed):
		return ef.EF005
	case errors.Is(err, authority.ErrSinkMismatch):
		return ef.EF040
	case errors.Is(err, authority.ErrDestinationMismatch):
		return ef.EFDestinationMismatch
	case errors.Is(err, authority.ErrArgumentsMismatch), errors.Is(err, authority.ErrScopeMismatch):
		return ef.EFScopeMismatch
	}
	// Expired, not yet valid, bad signature, invalid, epoch: no usable authority.
	return ef.EF002
}
