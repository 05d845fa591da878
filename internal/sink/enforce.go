package sink

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/receipt"
)

// dispatchInfo is what the gate knows about a dispatch beyond the act: for the journal record
// and the receipt made durable in the consume commit.
type dispatchInfo struct {
	server string
	class  act.ConsequenceClass
}

// enforce is Gate.Enforce: tool-use-binding §16 for an act presented on its own.
func (g *gate) enforce(ctx context.Context, a *act.AgentCandidateAct, live json.RawMessage) (Decision, error) {
	d, _ := g.enforceAct(ctx, a, live, dispatchInfo{})
	return d, nil
}

// deny builds a refusing Decision.
func denyDecision(code ef.EFCode, msg string) Decision {
	if msg == "" {
		msg = code.Description()
	}
	return Decision{Code: code, Message: msg, Retryable: code.Retryable()}
}

// bindingEpoch is how a policy epoch is written into an authority binding.
func bindingEpoch(epoch int64) string { return strconv.FormatInt(epoch, 10) }

// enforceAct runs the five MUSTs of tool-use-binding §16 and returns the dispatch record it
// wrote in DISPATCH_PENDING with the consumed authority:
//
//  1. hash live_args with the same canonicalization as act.arguments_digest;
//  2. refuse if the hashes differ (EF_SCOPE_MISMATCH);
//  3. refuse a missing, expired, consumed (EF_002, EF_005), sink-mismatched (EF_040) or
//     destination-mismatched (EF_DESTINATION_MISMATCH) authority;
//  4. consume the single-use authority, in the same commit as the DISPATCH_PENDING record,
//     before returning allow;
//  5. never allow on timeout (EF_060) or an uncertain epoch (EF_002: the authority was issued
//     under another policy epoch than the act's).
//
// The expected binding is built from the act and the live arguments, the gate's own sink id
// and namespace, never from anything the agent supplies about the authority.
func (g *gate) enforceAct(ctx context.Context, a *act.AgentCandidateAct, live json.RawMessage, info dispatchInfo) (Decision, journal.DispatchRecord) {
	p, dec := g.prepareDispatch(ctx, a, live, info, nil)
	if p == nil {
		return dec, journal.DispatchRecord{}
	}
	return g.commitDispatch(ctx, p, nil)
}

// pendingDispatch is a dispatch that passed every check that needs no store: what the sink
// expects the authority to be bound to, the authority's id, and the DISPATCH_PENDING record and
// its receipt that the consume writes.
type pendingDispatch struct {
	expect  authority.Binding
	id      string
	rec     journal.DispatchRecord
	receipt receipt.Receipt
}

// prepareDispatch makes the checks of enforceAct that need no store (MUSTs 1–2, the act's
// session, sink and destination) and builds the record and receipt. fresh, when not nil, is the
// authority the gate has just signed for this act (a machine Permit): it must be bound to
// exactly the binding the live call yields (authority.Match), so that what was signed is what
// is about to be dispatched. On a refusal it returns nil and the refusing Decision.
func (g *gate) prepareDispatch(ctx context.Context, a *act.AgentCandidateAct, live json.RawMessage, info dispatchInfo, fresh *authority.Authority) (*pendingDispatch, Decision) {
	if ctx.Err() != nil {
		return nil, denyDecision(ef.EF060, "")
	}
	if a == nil {
		return nil, denyDecision(ef.EFActInvalid, "")
	}
	if err := a.Validate(); err != nil {
		return nil, denyDecision(ef.EFActInvalid, "")
	}
	if err := g.ids.CheckSession(a.CandidateActID, a.Freshness.SessionID); err != nil {
		// An id this gate did not mint for the act's session (tool-use-binding §6, §24 T14).
		return nil, denyDecision(ef.EFActInvalid, "The act id was not issued for this session.")
	}
	if a.FinalitySink.SinkID != g.sinkID {
		return nil, denyDecision(ef.EF040, "")
	}
	if a.Destination == nil || a.Destination.DestinationID == "" {
		return nil, denyDecision(ef.EFDestinationMismatch, "The act names no destination.")
	}
	// MUST 1–2: recompute from the live arguments with the act's own canonicalization.
	if err := a.MatchArguments(live); err != nil {
		return nil, denyDecision(ef.EFScopeMismatch, "")
	}
	canon, err := jcs.Canonicalize(live, a.ArgumentsDigest.Canonicalization.Mode())
	if err != nil { // MatchArguments canonicalized the same bytes in the same mode
		return nil, denyDecision(ef.EFScopeMismatch, "")
	}
	expect := authority.Binding{
		ActID:           a.CandidateActID,
		ArgumentsDigest: jcs.Digest(canon),
		ActionDigest:    a.ArgumentsDigest.Value,
		Tool:            a.Tool.ToolID,
		Destination:     a.Destination.DestinationID,
		SinkID:          g.sinkID,
		PolicyEpoch:     bindingEpoch(a.PolicyState.PolicyEpoch),
		Namespace:       g.namespace,
	}
	var id string
	if fresh != nil {
		// The binding comparison of MUST 3 for an authority signed a moment ago from the same
		// candidate: any difference is a defect, refused like any other mismatch. (The store
		// verifies the signature, binding and time again before writing.)
		if err := authority.Match(fresh.Binding, expect); err != nil {
			return nil, denyDecision(consumeCode(ctx, err), "")
		}
		id = fresh.ID
	} else {
		// §30: auth = store.get(act.candidate_act_id). The gate remembers what it issued per
		// act; an act it has no memory of (a restart) is looked up by the id its binding
		// derives to.
		var ok bool
		if id, ok = g.issuedFor(a.CandidateActID); !ok {
			if id, err = authority.DeriveID(expect); err != nil {
				return nil, denyDecision(ef.EF002, "")
			}
		}
	}
	rec := journal.DispatchRecord{
		OperationID:     journal.NewOperationID(),
		ActID:           expect.ActID,
		AuthorityID:     id,
		ActionDigest:    expect.ActionDigest,
		ArgumentsDigest: expect.ArgumentsDigest,
		Upstream:        expect.Destination,
		Tool:            expect.Tool,
		State:           journal.StateDispatchPending,
	}
	class := info.class
	if class == "" {
		class = a.ConsequenceClass
	}
	rcpt := receipt.Receipt{
		Time:            g.now().UTC(),
		ActID:           rec.ActID,
		Tool:            rec.Tool,
		Server:          info.server,
		Class:           string(class),
		ArgumentsDigest: rec.ArgumentsDigest,
		ActionDigest:    rec.ActionDigest,
		Decision:        receipt.DecisionAllow,
		Code:            ReceiptCodeDispatch,
		AuthorityID:     id,
		OperationID:     rec.OperationID,
		State:           string(journal.StateDispatchPending),
	}
	return &pendingDispatch{expect: expect, id: id, rec: rec, receipt: rcpt}, Decision{}
}

// commitDispatch is MUST 4: consume before allow, with the intent record in the same commit
// when the store can (action-evidence-boundary "Invoke the Frozen Action": dispatch only from a
// durable DISPATCH_PENDING). With fresh (a machine Permit) the authority is also issued: in the
// same commit when the store implements authority.IssueConsumeAndPender (the embedded store:
// one group-committed transaction instead of two), else by Issue just before the consume.
func (g *gate) commitDispatch(ctx context.Context, p *pendingDispatch, fresh *authority.Authority) (Decision, journal.DispatchRecord) {
	var (
		none    journal.DispatchRecord
		written journal.DispatchRecord
		err     error
		// tried: the consume was attempted (an Issue that failed stops before it).
		tried = true
	)
	rb := receiptBytes(p.receipt)
	if g.remote == nil {
		// With an AuthorityService the consume is the service's: its points are in
		// dispatchRemote, around the request.
		_ = failpoint.Inject(failpoint.BeforeConsume)
	}
	switch {
	case fresh != nil && g.issuer != nil:
		_, written, err = g.issuer.IssueConsumeAndPend(ctx, *fresh, p.expect, p.rec, rb)
	default:
		if fresh != nil {
			if _, err = g.store.Issue(ctx, *fresh); err != nil {
				tried = false
				break
			}
		}
		if g.pender != nil {
			_, written, err = g.pender.ConsumeAndPend(ctx, p.id, p.expect, p.rec, rb)
			break
		}
		if _, err = g.store.Consume(ctx, p.id, p.expect, authority.Consumption{OperationID: p.rec.OperationID}); err != nil {
			break
		}
		_ = failpoint.Inject(failpoint.AfterConsume) // only here: a store that consumes and journals in one commit has no such instant
		if written, err = g.journal.Begin(ctx, p.rec, rb); err != nil {
			// The authority is spent and no intent record exists: nothing may be dispatched.
			g.log.Error(err, "authority consumed but the dispatch record failed; not invoking",
				"act", p.rec.ActID, "authority", p.id, "operation", p.rec.OperationID)
		}
	}
	if err != nil {
		code := consumeCode(ctx, err)
		if fresh != nil && errors.Is(err, authority.ErrInvalid) {
			code = ef.EFActInvalid // the authority the gate built for the act is unusable
		}
		g.log.V(1).Info("enforce refused", "act", p.rec.ActID, "actionDigest", p.rec.ActionDigest,
			"authority", p.id, "code", code, "cause", authority.CodeOf(err))
		if tried && (code == ef.EF060 || code == ef.EFStoreUnavailable) {
			// The commit may have landed after the caller gave up (boltstore "Timeouts"): a
			// stranded DISPATCH_PENDING we know was never dispatched is settled now rather than
			// left for recovery to call INDETERMINATE.
			g.settleUndispatched(p.rec)
		}
		msg := ""
		if code == ef.EFBudgetExceeded {
			msg = budgetMessage(err)
		}
		return denyDecision(code, msg), none
	}
	g.forget(p.rec.ActID)
	return Decision{Allow: true, AuthorityID: p.id, OperationID: written.OperationID, State: written.State}, written
}

// consumeCode maps a consume failure to the EF code the agent sees (tool-use-binding §23, §30).
// A store failure while the caller's deadline has passed is a validation timeout (EF_060,
// retryable as validation only); any other store failure is EF_STORE_UNAVAILABLE. Both deny.
func consumeCode(ctx context.Context, err error) ef.EFCode {
	unavailable := errors.Is(err, authority.ErrStoreUnavailable) || errors.Is(err, journal.ErrUnavailable)
	switch {
	case unavailable && ctx.Err() != nil,
		errors.Is(err, context.DeadlineExceeded):
		return ef.EF060
	case unavailable:
		return ef.EFStoreUnavailable
	case errors.Is(err, budget.ErrExceeded):
		return ef.EFBudgetExceeded
	case errors.Is(err, budget.ErrLimit):
		return ef.EFBudgetLimit
	case errors.Is(err, authority.ErrConsumed), errors.Is(err, journal.ErrExists):
		return ef.EF005
	case errors.Is(err, authority.ErrSinkMismatch):
		return ef.EF040
	case errors.Is(err, authority.ErrDestinationMismatch):
		return ef.EFDestinationMismatch
	case errors.Is(err, authority.ErrArgumentsMismatch), errors.Is(err, authority.ErrScopeMismatch):
		return ef.EFScopeMismatch
	case errors.Is(err, authority.ErrNotFound), errors.Is(err, authority.ErrExpired),
		errors.Is(err, authority.ErrNotYetValid), errors.Is(err, authority.ErrEpochMismatch),
		errors.Is(err, authority.ErrBadSignature), errors.Is(err, authority.ErrInvalid):
		return ef.EF002
	}
	return ef.EFStoreUnavailable
}

// settleUndispatched moves a DISPATCH_PENDING record this gate wrote but never dispatched to
// FAILED. The gate is the only path to the upstream for that operation and it did not take it,
// which is authoritative evidence that no effect occurred. Best effort: if the record does not
// exist or cannot be read, nothing is written.
func (g *gate) settleUndispatched(rec journal.DispatchRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), g.recordTimeout)
	defer cancel()
	cur, err := g.journal.Record(ctx, rec.OperationID)
	if err != nil || cur.State != journal.StateDispatchPending {
		return
	}
	if _, err := g.journal.Transition(ctx, rec.OperationID, journal.StateFailed, NotDispatchedOutcome(rec.OperationID)); err != nil {
		g.log.Error(err, "could not settle an undispatched record", "operation", rec.OperationID)
	}
}
