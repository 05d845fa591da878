package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/tracing"
)

// ErrUpstream wraps the error an Invoker returned. Handle returns it (with a Result describing
// what is known) only when the upstream was called and did not answer normally.
var ErrUpstream = errors.New("sink: upstream invocation failed")

// errNoGate is returned by the methods of a zero Gate.
var errNoGate = errors.New("sink: Gate not built with New")

// call is one call on its way through the gate.
type callState struct {
	c        Call
	cand     *act.Candidate
	dec      PolicyDecision
	class    act.ConsequenceClass
	provSrc  act.SourceType
	received time.Time
	// invocation is how long the Invoker took (0 when it was not called).
	invocation time.Duration
	// budgetFindings state the Escalate budgets the call would pass, for its binding moment.
	budgetFindings []string
}

// invoke calls inv once and records how long it took.
func (cl *callState) invoke(ctx context.Context, g *gate, inv Invoker, in Invocation) (InvokeResult, error) {
	start := g.now()
	out, err := inv(withInvocation(ctx, in), in.OperationID)
	cl.invocation = g.now().Sub(start)
	return out, err
}

func (g *gate) handle(ctx context.Context, c Call, inv Invoker) (Result, error) {
	if g == nil {
		return Result{}, errNoGate
	}
	if inv == nil {
		return Result{}, errors.New("sink: Handle needs an Invoker")
	}
	ctx, span := tracing.Start(ctx, g.tracer, "actgate.sink.handle", trace.SpanKindInternal)
	cl := &callState{c: c, received: g.now()}
	res, err := g.handleCall(ctx, cl, inv)
	res.Resolutions = append(res.Resolutions, g.moments.TakeDeliveries(c.Session)...)
	if !res.Allowed && res.Code != "" {
		res.Deny = g.vendorDeny(c, res)
	}
	e := cl.event(res, g.now())
	g.observer.CallDecided(e)
	if span.IsRecording() {
		span.SetAttributes(e.SpanAttributes()...)
	}
	tracing.End(span, spanError(err))
	return res, err
}

// spanError is the span status of an error of Handle: its class, never its text.
func spanError(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUpstream):
		return "upstream invocation failed"
	}
	return "gate failed"
}

// SpanAttributes are the attributes of the call's span (actgate.sink.handle, and the sidecar's
// actgate.sidecar.handle): ids, names, class, decision, code and digest, never an argument
// value. Tool is taken as it is: the sink's events carry it bounded (logfield.Bound).
func (e CallEvent) SpanAttributes() []attribute.KeyValue {
	kv := []attribute.KeyValue{
		tracing.AttrServer.String(e.Server), tracing.AttrTool.String(e.Tool),
		tracing.AttrAllowed.Bool(e.Allowed), tracing.AttrInvoked.Bool(e.Invoked),
	}
	add := func(k attribute.Key, v string) {
		if v != "" {
			kv = append(kv, k.String(v))
		}
	}
	add(tracing.AttrActID, e.ActID)
	add(tracing.AttrClass, string(e.Class))
	add(tracing.AttrDecision, string(e.Outcome))
	add(tracing.AttrPolicy, e.Policy)
	add(tracing.AttrRule, e.Rule)
	add(tracing.AttrCode, string(e.Code))
	add(tracing.AttrState, string(e.State))
	add(tracing.AttrActionDigest, e.ActionDigest)
	if e.Replayed {
		kv = append(kv, tracing.AttrReplayed.Bool(true))
	}
	return kv
}

// event describes the answered call for the Observer.
func (cl *callState) event(res Result, now time.Time) CallEvent {
	e := CallEvent{
		ActID: res.ActID, Server: cl.c.Server, Tool: safeTool(cl.c.Tool), Class: cl.class,
		Policy: cl.dec.Policy, Rule: cl.dec.Rule, Outcome: cl.dec.Outcome, Audit: cl.dec.Audit,
		Allowed: res.Allowed, Invoked: res.Invoked, Replayed: res.Replayed, State: res.State,
		Code: res.Code, Duration: now.Sub(cl.received), Vendor: cl.c.Vendor, Invocation: cl.invocation,
	}
	if e.Audit && e.Code == "" {
		e.Code = res.AuditCode // in Audit mode Code says what enforcement would have done
	}
	if cl.cand != nil {
		e.ActionDigest = cl.cand.ActionDigest()
		if e.ActID == "" {
			e.ActID = cl.cand.Act.CandidateActID
		}
	}
	return e
}

// vendorDeny renders the deny in the caller's vendor shape (tool-use-binding §17, §23).
func (g *gate) vendorDeny(c Call, res Result) json.RawMessage {
	if c.Vendor == "" {
		return nil
	}
	b, err := act.DenyResult(c.Vendor, c.VendorID, act.Denial{Code: res.Code, Message: res.Message})
	if err != nil {
		return nil
	}
	return b
}

// denyResult is a refused call: not invoked, not allowed.
func denyResult(code ef.EFCode, msg string) Result {
	if msg == "" {
		msg = code.Description()
	}
	return Result{Code: code, Message: msg}
}

func (g *gate) handleCall(ctx context.Context, cl *callState, inv Invoker) (Result, error) {
	c := cl.c
	if ctx.Err() != nil {
		return denyResult(ef.EF060, ""), nil
	}
	if c.Session == "" || c.Server == "" || c.Destination == "" || c.Agent == "" {
		return denyResult(ef.EFActInvalid, "The call is missing its session, agent, server or destination."), nil
	}
	if len(c.Args) == 0 {
		c.Args = json.RawMessage(`{}`) // MCP tools/call: arguments are optional; none is {}
	}
	cl.provSrc = sourceType(c.Provenance)
	cand, err := g.candidate(c, cl.provSrc)
	if err != nil {
		g.log.V(1).Info("call not mapped to an act", "tool", safeTool(c.Tool), "server", c.Server, "cause", actCode(err))
		return denyResult(ef.EFActInvalid, ""), nil
	}
	cl.cand = cand
	pctx, pspan := tracing.Start(ctx, g.tracer, "actgate.policy.evaluate", trace.SpanKindInternal)
	cl.dec = g.policy.Evaluate(pctx, PolicyRequest{
		Server:      c.Server,
		Destination: c.Destination,
		Tool:        c.Tool,
		Args:        cand.Arguments,
		Class:       cand.Act.ConsequenceClass,
		Provenance:  c.Provenance,
		Agent:       c.Agent,
		StrictArgs:  cand.Strict(),
	})
	if pspan.IsRecording() {
		pspan.SetAttributes(tracing.AttrDecision.String(string(cl.dec.Outcome)), tracing.AttrPolicy.String(cl.dec.Policy),
			tracing.AttrRule.String(cl.dec.Rule), tracing.AttrCode.String(string(cl.dec.Code)), tracing.AttrClass.String(string(cand.Act.ConsequenceClass)))
	}
	pspan.End()
	if ctx.Err() != nil {
		// Validation did not finish in time: never allow (§16 MUST 5); EF_060 is retryable as
		// validation only (§23).
		return denyResult(ef.EF060, ""), nil
	}
	if cl.dec.Epoch < 0 || cl.dec.Epoch > jcsMaxSafe {
		return g.refuse(cl, ef.EFPolicyDenied, "Policy epoch out of range."), nil
	}
	cand.Act.PolicyState.PolicyEpoch = cl.dec.Epoch
	cl.class = cand.Act.ConsequenceClass
	if cl.dec.Class != "" && cl.dec.Class.Valid() {
		cl.class = cl.dec.Class
		cand.Act.ConsequenceClass = cl.dec.Class
	}

	if res, refused := g.refusedByPin(ctx, cl); refused {
		return res, nil
	}
	if cl.dec.Audit {
		return g.audit(ctx, cl, inv)
	}
	if over := g.overRate(cl); over != nil {
		res := g.refuseReported(cl, ef.EFRateLimited, over.Message)
		res.RetryAfter = over.Wait
		return res, nil
	}
	if res, refused := g.checkBudgets(ctx, cl); refused {
		return res, nil
	}
	switch cl.dec.Outcome {
	case PolicyDeny:
		code := cl.dec.Code
		if !code.Known() {
			code = ef.EFPolicyDenied
		}
		return g.refuseReported(cl, code, cl.dec.Message), nil
	case PolicyAllow:
		if g.moments.Declined(c.Session, cand.ActionDigest()) {
			return g.refuse(cl, ef.EFMomentDeclined, ""), nil
		}
		return g.hotPath(ctx, cl, inv, receipt.DecisionAllow, "")
	case PolicyPermit:
		if g.moments.Declined(c.Session, cand.ActionDigest()) {
			return g.refuse(cl, ef.EFMomentDeclined, ""), nil
		}
		if g.remote != nil {
			if cl.escalatesOverBudget() {
				// The service's one-request Permit cannot put the call to a person; its
				// Review can, when the call would pass an Escalate budget (docs/api.md
				// "Budgets"), and otherwise issues the authority, charged at its consume.
				return g.escalateRemote(ctx, cl, inv)
			}
			return g.permitRemote(ctx, cl, inv)
		}
		return g.permit(ctx, cl, inv)
	case PolicyEscalate:
		if g.remote != nil {
			return g.escalateRemote(ctx, cl, inv)
		}
		return g.escalate(ctx, cl, inv)
	}
	return g.refuse(cl, ef.EFPolicyDenied, ""), nil
}

// refusedByPin applies the governing rule's tool pin (toolpin.go): a pinned tool whose
// definition changed is refused whatever else the rule allows. In mode Audit the refusal is
// recorded as what enforcement would do, not applied.
func (g *gate) refusedByPin(ctx context.Context, cl *callState) (Result, bool) {
	if cl.dec.Outcome == PolicyDeny {
		return Result{}, false
	}
	code, msg, audit := g.checkPin(ctx, cl.c.Server, cl.c.Tool)
	if code == "" {
		return Result{}, false
	}
	if !audit && !cl.dec.Audit {
		return g.refuseReported(cl, code, msg), true
	}
	cl.dec.Outcome, cl.dec.Code, cl.dec.Message = PolicyDeny, code, msg
	return Result{}, false
}

// refuseReported refuses the call and, under an authority service, reports the refusal so
// that its Act records it.
func (g *gate) refuseReported(cl *callState, code ef.EFCode, msg string) Result {
	res := g.refuse(cl, code, msg)
	if g.remote != nil {
		g.remote.Refused(cl.request(), res.Code, res.Message)
	}
	return res
}

// jcsMaxSafe is 2^53-1: epochs stay inside the strict JCS profile.
const jcsMaxSafe = 1<<53 - 1

// candidate maps the live call to a non-effective AgentCandidateAct (tool-use-binding §14
// steps 2–5). The act id is minted for the transport's session.
func (g *gate) candidate(c Call, prov act.SourceType) (*act.Candidate, error) {
	principal := g.principal
	if principal == "" {
		principal = c.Agent
	}
	return act.NewCandidate(act.Input{
		Vendor:    c.Vendor,
		VendorID:  c.VendorID,
		ToolName:  c.Tool,
		Arguments: c.Args,
	}, act.MappingContext{
		SessionID:   c.Session,
		Principal:   act.Principal{PrincipalID: principal},
		Agent:       act.Agent{AgentID: c.Agent, RuntimeID: g.runtimeID},
		Server:      act.ServerIdentity{Name: c.Server, URL: c.Destination},
		Destination: c.Destination,
		SinkID:      g.sinkID,
		Provenance:  prov,
		Now:         g.now,
		TTL:         g.actTTL,
		IDs:         g.ids,
	})
}

// sourceType maps a transport's provenance (ToolPolicy spelling) to the act's source type.
// Anything unrecognised is unknown, which policy treats as the worst source.
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

// actCode is the act mapping error code for logs.
func actCode(err error) string {
	if c, ok := act.CodeOf(err); ok {
		return string(c)
	}
	return "unknown"
}

// safeTool bounds a tool name for logs (it comes from the model).
func safeTool(s string) string { return logfield.Bound(s) }

// receiptFor starts a receipt for the call.
func (g *gate) receiptFor(cl *callState, d string, code string) receipt.Receipt {
	r := receipt.Receipt{
		Time:     g.now().UTC(),
		Tool:     cl.c.Tool,
		Server:   cl.c.Server,
		Class:    string(cl.class),
		Decision: d,
		Code:     code,
	}
	if cl.cand != nil {
		r.ActID = cl.cand.Act.CandidateActID
		r.ArgumentsDigest = cl.cand.ArgumentsDigest()
		r.ActionDigest = cl.cand.ActionDigest()
	}
	return r
}

// appendReceipt appends to the in-memory chain; a failure is logged (the decision stands).
func (g *gate) appendReceipt(r receipt.Receipt) error {
	if g.receipts == nil {
		return nil
	}
	_, err := g.receipts.Append(r)
	return err
}

// appendDurableAsync starts AppendDurable of r and returns where its result will arrive.
func (g *gate) appendDurableAsync(ctx context.Context, r receipt.Receipt) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := g.receipts.AppendDurable(ctx, r)
		done <- err
	}()
	return done
}

// refuseDispatch denies a call whose dispatch receipt may already be in the receipt log: the
// deny receipt names the same operation and authority, so that the log records the operation
// as refused, not dispatched.
func (g *gate) refuseDispatch(cl *callState, code ef.EFCode, msg string, p *pendingDispatch) Result {
	r := g.receiptFor(cl, receipt.DecisionDeny, string(code))
	r.ActID, r.AuthorityID, r.OperationID = p.rec.ActID, p.id, p.rec.OperationID
	if err := g.appendReceipt(r); err != nil {
		g.log.Error(err, "receipt append failed", "act", r.ActID)
	}
	g.log.V(1).Info("deny", "act", r.ActID, "actionDigest", cl.cand.ActionDigest(), "operation", r.OperationID,
		"server", cl.c.Server, "code", code, "policy", cl.dec.Policy, "rule", cl.dec.Rule)
	res := denyResult(code, msg)
	res.ActID = cl.cand.Act.CandidateActID
	return res
}

// refuse denies the call: upstream never contacted.
func (g *gate) refuse(cl *callState, code ef.EFCode, msg string) Result {
	d := receipt.DecisionDeny
	if code == ef.EFEscalationRequired {
		d = receipt.DecisionEscalate
	}
	if err := g.appendReceipt(g.receiptFor(cl, d, string(code))); err != nil {
		g.log.Error(err, "receipt append failed", "act", cl.cand.Act.CandidateActID)
	}
	g.log.V(1).Info("deny", "act", cl.cand.Act.CandidateActID, "actionDigest", cl.cand.ActionDigest(),
		"server", cl.c.Server, "code", code, "policy", cl.dec.Policy, "rule", cl.dec.Rule)
	res := denyResult(code, msg)
	res.ActID = cl.cand.Act.CandidateActID
	return res
}

// hotPath invokes without authority: an in-memory chained receipt, then the upstream
// (tool-use-binding §14 step 6 "local hot path"). Nothing is journaled.
func (g *gate) hotPath(ctx context.Context, cl *callState, inv Invoker, d string, auditCode ef.EFCode) (Result, error) {
	if ctx.Err() != nil {
		return g.refuse(cl, ef.EF060, ""), nil
	}
	opID := journal.NewOperationID()
	r := g.receiptFor(cl, d, string(auditCode))
	r.OperationID = opID
	if err := g.appendReceipt(r); err != nil {
		// No record of the decision, no dispatch (fail closed).
		g.log.Error(err, "receipt append failed; not invoking", "act", r.ActID)
		return g.refuse(cl, ef.EFStoreUnavailable, ""), nil
	}
	out, err := cl.invoke(ctx, g, inv, Invocation{OperationID: opID})
	res := Result{
		Allowed:     true,
		Invoked:     out.Outcome != OutcomeNotSent,
		Upstream:    out.Result,
		ActID:       cl.cand.Act.CandidateActID,
		AuditCode:   auditCode,
		OperationID: opID,
	}
	if err != nil {
		res.Message = "The upstream call did not complete."
		return res, fmt.Errorf("%w: %w", ErrUpstream, err)
	}
	return res, nil
}

// audit lets the call through as an allow and records what enforcement would have decided
// (receipt decision audit-allow with the code). Audit mode is never enforcement.
func (g *gate) audit(ctx context.Context, cl *callState, inv Invoker) (Result, error) {
	var would ef.EFCode
	switch cl.dec.Outcome {
	case PolicyDeny:
		would = cl.dec.Code
		if !would.Known() {
			would = ef.EFPolicyDenied
		}
	case PolicyEscalate:
		would = ef.EFEscalationRequired
	case PolicyAllow, PolicyPermit:
		if g.overRate(cl) != nil {
			would = ef.EFRateLimited
		}
	default:
		would = ef.EFPolicyDenied
	}
	if would == "" {
		return g.hotPath(ctx, cl, inv, receipt.DecisionAllow, "")
	}
	g.log.Info("audit mode: call let through that enforcement would refuse", "act",
		cl.cand.Act.CandidateActID, "actionDigest", cl.cand.ActionDigest(), "code", would,
		"policy", cl.dec.Policy, "rule", cl.dec.Rule)
	return g.hotPath(ctx, cl, inv, receipt.DecisionAuditAllow, would)
}

// authorityTTL is the lifetime of an authority issued under d.
func (g *gate) authorityTTLFor(d PolicyDecision) time.Duration {
	ttl := d.AuthorityTTL
	if ttl <= 0 {
		ttl = g.authorityTTL
	}
	if ttl > authority.MaxTTL {
		ttl = authority.MaxTTL
	}
	return ttl
}

// issue signs and stores an authority for b.
func (g *gate) issue(ctx context.Context, b authority.Binding, ttl time.Duration) (authority.Authority, error) {
	a, err := g.signer.Sign(b, g.now(), ttl)
	if err != nil {
		return authority.Authority{}, err
	}
	if _, err := g.store.Issue(ctx, a); err != nil {
		return authority.Authority{}, err
	}
	g.remember(b.ActID, a.ID, a.ExpiresAt)
	return a, nil
}

// bindingFor is the authority binding of a candidate at destination under epoch.
func (g *gate) bindingFor(cand *act.Candidate, destination string, epoch int64) authority.Binding {
	return authority.Binding{
		ActID:           cand.Act.CandidateActID,
		ArgumentsDigest: cand.ArgumentsDigest(),
		ActionDigest:    cand.ActionDigest(),
		Tool:            cand.Act.Tool.ToolID,
		Destination:     destination,
		SinkID:          g.sinkID,
		PolicyEpoch:     bindingEpoch(epoch),
		Namespace:       g.namespace,
	}
}

// permit is machine-policy authority: sign an authority bound to the act, then dispatch it
// (issue, consume and DISPATCH_PENDING in one commit where the store can, with the durable
// receipt written concurrently), invoke once, classify.
func (g *gate) permit(ctx context.Context, cl *callState, inv Invoker) (Result, error) {
	k := dispatchKey{cl.cand.ActionDigest(), cl.c.Destination}
	entry, res, done := g.reserve(ctx, cl, k)
	if done {
		return res, nil
	}
	b := g.bindingFor(cl.cand, cl.c.Destination, cl.dec.Epoch)
	a, err := g.signer.Sign(b, g.now(), g.authorityTTLFor(cl.dec))
	if err != nil {
		g.dispatches.release(k, entry)
		code := consumeCode(ctx, err)
		if errors.Is(err, authority.ErrInvalid) {
			code = ef.EFActInvalid
		}
		g.log.V(1).Info("authority not signed", "act", b.ActID, "code", code, "cause", authority.CodeOf(err))
		return g.refuse(cl, code, ""), nil
	}
	return g.dispatch(ctx, cl, inv, k, entry, a.ExpiresAt, &a)
}

// reserve consults the dispatch index for a call that would consume authority. done is true
// when the call is answered without a dispatch: a replayed result or an INDETERMINATE refusal.
func (g *gate) reserve(ctx context.Context, cl *callState, k dispatchKey) (*dispatchEntry, Result, bool) {
	for attempt := 0; ; attempt++ {
		v, e := g.dispatches.reserve(k, cl.c.Session, cl.cand.Act.CandidateActID, g.now())
		switch v {
		case verdictProceed:
			return e, Result{}, false
		case verdictReplay:
			snap := g.dispatches.snapshot(e)
			r := g.receiptFor(cl, receipt.DecisionOutcome, ReceiptCodeReplayed)
			r.ActID = snap.actID
			r.AuthorityID, r.OperationID, r.State = snap.authorityID, snap.operationID, string(snap.state)
			if err := g.appendReceipt(r); err != nil {
				g.log.Error(err, "receipt append failed", "act", r.ActID)
			}
			g.log.V(1).Info("retry answered from the journal", "act", snap.actID, "operation", snap.operationID, "state", snap.state)
			return nil, Result{
				Allowed:     true,
				Replayed:    true,
				Upstream:    snap.result,
				Accepted:    snap.accepted,
				ActID:       snap.actID,
				State:       snap.state,
				OperationID: snap.operationID,
				Message:     "A retry of an act already dispatched: the recorded result, not a second invocation.",
			}, true
		}
		// In flight or INDETERMINATE. An INDETERMINATE record may have been reconciled since
		// (by the reconciler, in the journal), and a dispatch in flight may have recorded its
		// outcome in the journal a moment before the index: look once, then refuse.
		snap := g.dispatches.snapshot(e)
		if attempt == 0 && snap.operationID != "" && !snap.state.Terminal() {
			if rec, err := g.journal.Record(ctx, snap.operationID); err == nil && rec.State.Terminal() {
				if snap.state.InFlight() && !snap.expires.IsZero() {
					// This process's dispatch set the entry's expiry when it recorded
					// DISPATCH_PENDING.
					g.dispatches.update(e, func(e *dispatchEntry) { e.state, e.result = rec.State, rec.Result })
					continue
				}
				a, err := g.store.Get(ctx, g.namespace, rec.AuthorityID)
				g.dispatches.update(e, func(e *dispatchEntry) {
					e.state, e.result = rec.State, rec.Result
					if err == nil {
						e.expires = a.Authority.ExpiresAt
					}
				})
				continue
			}
		}
		res := g.refuse(cl, ef.EFIndeterminate, "")
		res.State = snap.state
		if snap.state == "" {
			res.State = journal.StateDispatchPending
		}
		return nil, res, true
	}
}

// dispatch enforces the act (§16: consume with DISPATCH_PENDING), makes the receipt durable,
// invokes once and records the outcome. entry is the act's reservation in the dispatch index.
// fresh is the authority permit has just signed for the act (nil for a binding-moment grant,
// which was issued at its resolution).
//
// Nothing is invoked before the consume, the DISPATCH_PENDING record and the dispatch receipt
// are all durable (action-evidence-boundary "Atomically Consume or Reserve Before Invocation",
// "Invoke the Frozen Action"). For a Permit the receipt's fsync runs concurrently with the
// store's commit — neither depends on the other, and together they cost one round of fsyncs
// instead of two — and both must succeed:
//   - commit refused or failed: deny. The receipt log may then hold the dispatch receipt of an
//     operation that never ran; the deny receipt that follows names the same operation and
//     authority, so the log says the act was refused, never that it was dispatched.
//   - receipt failed, commit durable: deny, and the DISPATCH_PENDING record is settled FAILED
//     (not_dispatched: the gate is the only path to the upstream and did not take it). If that
//     settling write fails too, the record stays DISPATCH_PENDING and recovery makes it
//     INDETERMINATE at the next start — fail closed: it then needs reconciliation, and the
//     action is refused until it has it, never replayed blindly.
//
// A grant's consume can be refused for ordinary reasons (a replay, an expired or stale grant),
// so its receipt is written only after the consume succeeds: the log carries no dispatch
// receipt for an act refused at its consume.
func (g *gate) dispatch(ctx context.Context, cl *callState, inv Invoker, k dispatchKey, entry *dispatchEntry, expires time.Time, fresh *authority.Authority) (Result, error) {
	return g.dispatchWith(ctx, cl, inv, k, entry, fresh, fresh != nil, func(ctx context.Context, p *pendingDispatch) (Decision, time.Time) {
		dec, _ := g.commitDispatch(ctx, p, fresh)
		return dec, expires
	})
}

// commitFunc consumes the authority of a prepared dispatch and journals it DISPATCH_PENDING
// (commitDispatch, after whatever obtains the authority); it returns the Decision and the
// authority's expiry (the retry window of the dispatch).
type commitFunc func(ctx context.Context, p *pendingDispatch) (Decision, time.Time)

// dispatchWith is dispatch with the consume step given: fresh is the authority the gate has just
// signed (prepareDispatch), and early writes the durable receipt concurrently with the commit
// (an authority just issued for a Permit).
func (g *gate) dispatchWith(ctx context.Context, cl *callState, inv Invoker, k dispatchKey, entry *dispatchEntry,
	fresh *authority.Authority, early bool, commit commitFunc) (Result, error) {
	p, dec := g.prepareDispatch(ctx, &cl.cand.Act, cl.cand.Arguments, dispatchInfo{server: cl.c.Server, class: cl.class}, fresh)
	if p == nil {
		g.dispatches.release(k, entry)
		return g.refuse(cl, dec.Code, dec.Message), nil
	}
	if code, msg := g.chargeDispatch(cl, p, fresh == nil); code != "" {
		g.dispatches.release(k, entry)
		return g.refuse(cl, code, msg), nil
	}
	var receiptDone <-chan error
	if g.receipts != nil && early {
		receiptDone = g.appendDurableAsync(ctx, p.receipt)
	}
	cctx, cspan := tracing.Start(ctx, g.tracer, "actgate.journal.commit", trace.SpanKindInternal)
	dec, expires := commit(cctx, p)
	rec := p.rec
	if dec.Allow {
		rec.OperationID, rec.State = dec.OperationID, dec.State
	}
	if cspan.IsRecording() {
		cspan.SetAttributes(tracing.AttrActID.String(p.rec.ActID), tracing.AttrAuthorityID.String(p.id),
			tracing.AttrOperationID.String(rec.OperationID), tracing.AttrAllowed.Bool(dec.Allow), tracing.AttrCode.String(string(dec.Code)))
	}
	cspan.End()
	var rerr error
	switch {
	case receiptDone != nil:
		rerr = <-receiptDone
	case g.receipts != nil && dec.Allow:
		_, rerr = g.receipts.AppendDurable(ctx, p.receipt)
	}
	if !dec.Allow {
		g.dispatches.release(k, entry)
		if receiptDone != nil {
			return g.refuseDispatch(cl, dec.Code, dec.Message, p), nil
		}
		return g.refuse(cl, dec.Code, dec.Message), nil
	}
	g.dispatches.update(entry, func(e *dispatchEntry) {
		e.authorityID, e.operationID, e.state, e.expires = dec.AuthorityID, rec.OperationID, rec.State, expires
	})
	if rerr != nil {
		// Not invoked: the intent exists, the durable receipt does not. Settle the record as
		// never dispatched and refuse.
		g.log.Error(rerr, "durable receipt failed; not invoking", "act", rec.ActID, "operation", rec.OperationID)
		g.settleUndispatched(rec)
		g.dispatches.update(entry, func(e *dispatchEntry) { e.state, e.expires = journal.StateFailed, time.Time{} })
		code := ef.EFStoreUnavailable
		if ctx.Err() != nil {
			code = ef.EF060
		}
		return g.refuseDispatch(cl, code, "", p), nil
	}
	g.log.V(1).Info("dispatch", "act", rec.ActID, "actionDigest", rec.ActionDigest, "authority", dec.AuthorityID,
		"operation", rec.OperationID, "server", cl.c.Server)

	// Invoke exactly once, from the durable DISPATCH_PENDING.
	out, ierr := cl.invoke(ctx, g, inv, Invocation{OperationID: rec.OperationID, AuthorityID: dec.AuthorityID, Journaled: true})
	_, rspan := tracing.Start(ctx, g.tracer, "actgate.journal.record", trace.SpanKindInternal)
	state, result, cerr := g.complete(rec, out, ierr)
	if rspan.IsRecording() {
		rspan.SetAttributes(tracing.AttrOperationID.String(rec.OperationID), tracing.AttrOutcome.String(out.Outcome.String()), tracing.AttrState.String(string(state)))
	}
	if cerr != nil {
		rspan.SetStatus(codes.Error, "outcome not recorded")
	}
	rspan.End()
	running := state == journal.StateInvoked && out.Outcome == OutcomeAccepted && ierr == nil
	var o receipt.Receipt
	if g.receipts != nil || running {
		o = g.receiptFor(cl, receipt.DecisionOutcome, "")
		o.ActID = rec.ActID
		o.AuthorityID, o.OperationID, o.State = dec.AuthorityID, rec.OperationID, string(state)
	}
	var accepted json.RawMessage
	if running {
		// Running on the upstream's time: the outcome is recorded by Settle (settle.go).
		accepted = out.Result
		g.dispatches.run(rec.OperationID, &runningDispatch{entry: entry, receipt: o})
	}
	g.dispatches.update(entry, func(e *dispatchEntry) { e.state, e.result, e.accepted = state, result, accepted })
	if g.receipts != nil {
		if err := g.appendReceipt(o); err != nil {
			g.log.Error(err, "receipt append failed", "act", o.ActID)
		}
	}
	res := Result{
		Invoked:     out.Outcome != OutcomeNotSent,
		Allowed:     true,
		Upstream:    out.Result,
		Accepted:    accepted,
		ActID:       rec.ActID,
		State:       state,
		OperationID: rec.OperationID,
	}
	if state == journal.StateIndeterminate {
		res.Code = ef.EFIndeterminate
		res.Message = ef.EFIndeterminate.Description()
	}
	switch {
	case ierr != nil:
		return res, fmt.Errorf("%w: %w", ErrUpstream, ierr)
	case cerr != nil:
		return res, cerr
	}
	return res, nil
}

// complete classifies an invocation (ClassifyOutcome) and records it. The write runs on its own
// deadline: an outcome is recorded even when the caller has gone.
func (g *gate) complete(rec journal.DispatchRecord, out InvokeResult, ierr error) (journal.State, json.RawMessage, error) {
	to, o := ClassifyOutcome(rec.OperationID, out, ierr)
	ctx, cancel := context.WithTimeout(context.Background(), g.recordTimeout)
	defer cancel()
	if _, err := g.journal.Transition(ctx, rec.OperationID, to, o); err != nil {
		// The outcome is not durable, so it is not reported as one: the record stays
		// DISPATCH_PENDING in the store (recovery makes it INDETERMINATE) and this process
		// treats the act as INDETERMINATE from now on.
		g.log.Error(err, "outcome not recorded", "act", rec.ActID, "operation", rec.OperationID, "outcome", to)
		return journal.StateIndeterminate, nil, fmt.Errorf("sink: recording outcome %s of %s: %w", to, rec.OperationID, err)
	}
	return to, json.RawMessage(o.Result), nil
}
