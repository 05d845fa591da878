package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/sink/moment"
)

// AuthorityService issues and consumes the authority of protected acts when the gate does not
// (Options.Authority; in a pod, the authority service, docs/architecture.md "In a pod"). The
// gate still decides every call with its own policy, keeps the retry index and the journal,
// and checks every authority it is given against the binding it built from the live call: the
// binding must be exactly that one (authority.Match), and the Store verifies the signature
// with its trust anchors when it journals the consumed authority with DISPATCH_PENDING in one
// commit. Nothing is invoked on any error.
//
// Errors are refusals: a *Refusal says which code and message the agent gets; any other error
// is mapped as a store failure is (EF_060 when the context ended, else EF_STORE_UNAVAILABLE).
type AuthorityService interface {
	// Permit asks for the authority of a call the gate's policy permits (PolicyPermit),
	// already consumed by operationID: one request, in which the service evaluates its policy
	// for the act again and never issues what it would not.
	Permit(ctx context.Context, r AuthorityRequest, operationID string) (authority.Authority, error)
	// Escalate asks about a call the gate's policy escalates to a human: the binding moment
	// that awaits its principals (or its resolution), or, when principals granted exactly this
	// call, the authority: consumed by operationID in the same request when the answer says
	// Consumed, else to consume with Consume.
	Escalate(ctx context.Context, r AuthorityRequest, operationID string) (Escalation, error)
	// Consume spends a granted authority for operationID, bound to expect.
	Consume(ctx context.Context, a authority.Authority, expect authority.Binding, operationID string) error
	// Propose registers an agent-authored binding moment (request_binding_moment) that the
	// gate built and checked against its policy; the service checks it again and keeps it for
	// the policy's principals. It answers with the moment's reference.
	Propose(ctx context.Context, p MomentProposal) (*MomentRef, error)
	// Refused is told of every call the gate's policy denied, for the service's ledger. It must
	// not block and must not keep r past its return (the gate reuses nothing of it, but the
	// record is the service's business, off the call path): the call is already refused.
	Refused(r AuthorityRequest, code ef.EFCode, message string)
}

// AuthorityRequest is the call an AuthorityService is asked about: the act the gate built
// (with the policy epoch it decided under), the canonical arguments it will send, and the
// server.
type AuthorityRequest struct {
	Act       *act.AgentCandidateAct
	Arguments json.RawMessage
	Server    string
}

// Escalation is an AuthorityService's answer about an escalated call: Authority when it was
// granted, else the refusal to give (EF_ESCALATION_REQUIRED with the moment, EF_MOMENT_DECLINED,
// an expiry…).
type Escalation struct {
	Authority *authority.Authority
	// Consumed says the service consumed Authority by the operation Escalate named.
	Consumed    bool
	Code        ef.EFCode
	Message     string
	Moment      *MomentRef
	Resolutions []Delivery
}

// MomentProposal is an agent-authored binding moment as the gate built it: its session and
// agent, the envelope, and each option's call (server, tool, canonical arguments) in order.
type MomentProposal struct {
	Session, Agent string
	Envelope       *envelope.Envelope
	Calls          []ProposedCall
}

// ProposedCall is the call of one option of a MomentProposal.
type ProposedCall struct {
	Server, Tool string
	Args         json.RawMessage
}

// Refusal is an AuthorityService's refusal of a call, with what the agent is told.
type Refusal struct {
	Code    ef.EFCode
	Message string
}

func (r *Refusal) Error() string { return "sink: refused by the authority service: " + string(r.Code) }

// remoteCode is the refusal of an AuthorityService error.
func remoteCode(ctx context.Context, err error) (ef.EFCode, string) {
	var r *Refusal
	if errors.As(err, &r) {
		code := r.Code
		if !code.Known() {
			code = ef.EFPolicyDenied
		}
		return code, r.Message
	}
	if !errors.Is(err, authority.ErrStoreUnavailable) && authority.CodeOf(err) != "" && !errors.Is(err, context.DeadlineExceeded) {
		return consumeCode(ctx, err), ""
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return ef.EF060, ""
	}
	return ef.EFStoreUnavailable, ""
}

// request is the AuthorityRequest of a call.
func (cl *callState) request() AuthorityRequest {
	return AuthorityRequest{Act: &cl.cand.Act, Arguments: cl.cand.Arguments, Server: cl.c.Server}
}

// permitRemote is permit with the authority service as the issuer: the authority is asked for
// already consumed by the dispatch's operation, then verified and journaled with
// DISPATCH_PENDING in one local commit; the durable receipt is written concurrently, as for a
// Permit the gate signs itself.
func (g *gate) permitRemote(ctx context.Context, cl *callState, inv Invoker) (Result, error) {
	k := dispatchKey{cl.cand.ActionDigest(), cl.c.Destination}
	entry, res, done := g.reserve(ctx, cl, k)
	if done {
		return res, nil
	}
	req := cl.request()
	return g.dispatchRemote(ctx, cl, inv, k, entry, true, func(ctx context.Context, p *pendingDispatch) (authority.Authority, error) {
		return g.remote.Permit(ctx, req, p.rec.OperationID)
	})
}

// escalateRemote is escalate with moments kept by the authority service: it says whether the
// call awaits (or got) a human decision. The question is asked from the dispatch, with its
// operation id, so that a grant for exactly this call is consumed in the same request; an
// authority the service only issued is consumed with Consume. Either way it is journaled here
// before anything is invoked, and any other answer refuses the call with nothing journaled.
func (g *gate) escalateRemote(ctx context.Context, cl *callState, inv Invoker) (Result, error) {
	if !cl.cand.Strict() {
		return g.refuse(cl, ef.EFArgumentsOutOfProfile, ""), nil
	}
	k := dispatchKey{cl.cand.ActionDigest(), cl.c.Destination}
	entry, res, done := g.reserve(ctx, cl, k)
	if done {
		return res, nil
	}
	req := cl.request()
	var esc Escalation
	res, err := g.dispatchRemote(ctx, cl, inv, k, entry, false, func(ctx context.Context, p *pendingDispatch) (authority.Authority, error) {
		var err error
		if esc, err = g.remote.Escalate(ctx, req, p.rec.OperationID); err != nil {
			g.log.Info("escalation not answered; refusing", "act", cl.cand.Act.CandidateActID, "actionDigest", cl.cand.ActionDigest())
			return authority.Authority{}, err
		}
		if esc.Authority == nil {
			return authority.Authority{}, &Refusal{Code: esc.Code, Message: esc.Message}
		}
		granted := *esc.Authority
		if esc.Consumed {
			return granted, nil
		}
		if err := authority.Match(granted.Binding, p.expect); err != nil {
			return granted, err
		}
		return granted, g.remote.Consume(ctx, granted, p.expect, p.rec.OperationID)
	})
	if esc.Authority == nil {
		res.Moment = esc.Moment
	}
	res.Resolutions = append(esc.Resolutions, res.Resolutions...)
	return res, err
}

// obtainFunc gets the authority of a dispatch from the authority service, consumed by the
// dispatch's operation.
type obtainFunc func(ctx context.Context, p *pendingDispatch) (authority.Authority, error)

// dispatchRemote is dispatch for an authority the service issued and consumed: obtain it, check
// that it is bound to exactly what the live call yields, and journal it consumed with
// DISPATCH_PENDING (the Store verifies its signature) before invoking once. early writes the
// durable receipt concurrently with the request (a Permit); otherwise it is written after the
// consume (a grant, whose consume may be refused for ordinary reasons).
func (g *gate) dispatchRemote(ctx context.Context, cl *callState, inv Invoker, k dispatchKey, entry *dispatchEntry, early bool, obtain obtainFunc) (Result, error) {
	return g.dispatchWith(ctx, cl, inv, k, entry, nil, early, func(ctx context.Context, p *pendingDispatch) (Decision, time.Time) {
		_ = failpoint.Inject(failpoint.BeforeConsume)
		a, err := obtain(ctx, p)
		if err == nil {
			_ = failpoint.Inject(failpoint.AfterConsume) // the service spent it; nothing is journaled yet
		}
		if err != nil {
			code, msg := remoteCode(ctx, err)
			g.log.V(1).Info("authority service refused", "act", p.rec.ActID, "actionDigest", p.rec.ActionDigest,
				"authority", p.id, "code", code, "cause", authority.CodeOf(err))
			return denyDecision(code, msg), time.Time{}
		}
		if err := authority.Match(a.Binding, p.expect); err != nil || a.ID != p.id {
			// Issued for another binding than the live call's (another epoch, destination,
			// namespace…): never dispatched.
			g.log.Info("authority refused at the sink: not bound to the live call", "act", p.rec.ActID, "authority", a.ID,
				"cause", authority.CodeOf(err))
			return denyDecision(consumeCode(ctx, cmpErr(err)), ""), time.Time{}
		}
		dec, _ := g.commitDispatch(ctx, p, &a)
		return dec, a.ExpiresAt
	})
}

// cmpErr is err, or ErrInvalid when the binding matched but the id did not.
func cmpErr(err error) error {
	if err != nil {
		return err
	}
	return authority.ErrInvalid
}

// proposeRemote registers an agent-authored moment with the authority service, which checks
// every option's call again, on the option's own server, and keeps the moment for the
// policy's principals.
func (g *gate) proposeRemote(ctx context.Context, session, agent string, env *envelope.Envelope, opts []moment.Option) Result {
	p := MomentProposal{Session: session, Agent: agent, Envelope: env}
	for _, o := range opts {
		p.Calls = append(p.Calls, ProposedCall{Server: o.Server, Tool: o.Tool, Args: o.Args})
	}
	ref, err := g.remote.Propose(ctx, p)
	if err != nil {
		code, msg := remoteCode(ctx, err)
		g.log.Info("binding moment not registered by the authority service", "envelope", env.Digest(), "code", code)
		return denyResult(code, msg)
	}
	g.log.Info("binding moment proposed", "moment", ref.ID, "envelope", env.Digest(), "options", len(opts))
	return Result{Allowed: true, Moment: ref,
		Message: fmt.Sprintf("Binding moment %s awaits its principals; they resolve it with kubectl actgate resolve.", ref.ID)}
}
