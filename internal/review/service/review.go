package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/tracing"
)

// call is one Review on its way through the service.
type call struct {
	c           *caller
	act         *act.AgentCandidateAct
	args        json.RawMessage // canonical, in the act's canonicalization
	raw         json.RawMessage // as the sidecar sends them upstream
	strict      bool            // args fit the strict profile: may be bound to a human decision
	session     string
	server      string
	destination string
	d           policy.Decision
	class       v1alpha1.ConsequenceClass
	obj         *v1alpha1.Act
	binding     authority.Binding
	now         time.Time
	// momentsCached is set when the call's binding moments were read from the informer, and
	// momentsFromAPI makes them be read from the API server's watch cache (listGroups).
	momentsCached, momentsFromAPI bool
	// consumeOp is the operation a grant is consumed by in the same request (a Review that
	// names one), "" for a Review whose grant is consumed by a later Consume.
	consumeOp string
	// retried is the permit record of the call's Act when it records a grant consumed by
	// consumeOp already: the same operation's retried Review (recordAct).
	retried *permitRecord
	// charges are the budget charges recorded on the Act (planBudgets); overBudget is the
	// refusal of a call over a Deny budget, and escalateBudget marks one over an Escalate budget.
	charges        []budget.Charge
	overBudget     *outcome
	escalateBudget bool
	// budgetFindings state, for the binding moment of a call over an Escalate budget, the
	// budget, what was spent, the limit, the window's end and what the call adds.
	budgetFindings []string
}

func (x *call) tool() string         { return x.act.Tool.ToolID }
func (x *call) actionDigest() string { return x.act.ArgumentsDigest.Value }

// serve returns the policy of the caller if it may be served, or the refusal.
func (s *Service) serve(c *caller) (*policy.Compiled, *outcome) {
	p := c.policy
	if why := ready(p); why != "" {
		o := deny(http.StatusOK, ef.EFPolicyDenied, review.ReasonPolicyNotReady, fmt.Sprintf("ToolPolicy %s is not served: %s.", p.Name, why))
		return nil, &o
	}
	compiled, err := s.policies.compiled(p)
	if err != nil {
		s.log.Error(err, "ToolPolicy does not compile; denying its calls", "policy", p.Namespace+"/"+p.Name)
		o := deny(http.StatusOK, ef.EFPolicyDenied, review.ReasonPolicyNotReady, fmt.Sprintf("ToolPolicy %s is not served: it does not compile.", p.Name))
		return nil, &o
	}
	return compiled, nil
}

// provenance is the ToolPolicy spelling of the act's instruction provenance ("" = unknown).
func provenance(a *act.AgentCandidateAct) string {
	if a.InstructionProvenance == nil {
		return ""
	}
	switch a.InstructionProvenance.SourceType {
	case act.SourceUser:
		return string(v1alpha1.ProvenanceUser)
	case act.SourceRetrieval:
		return string(v1alpha1.ProvenanceRetrieval)
	case act.SourceTool:
		return string(v1alpha1.ProvenanceToolOutput)
	}
	return ""
}

// review answers a Review: map and check the act, ask policy, record the Act, then allow, issue,
// escalate or deny.
func (s *Service) review(ctx context.Context, c *caller, req *review.Request) outcome {
	x, refused := s.evaluate(ctx, c, req)
	if refused != nil {
		return *refused
	}
	if req.Permit != nil {
		x.consumeOp = req.Permit.OperationID
	}
	if o := s.planBudgets(ctx, x, true); o != nil {
		return *o
	}
	if o := s.recordAct(ctx, x); o != nil {
		return *o
	}
	var o outcome
	if x.retried != nil {
		o = consumedGrant(*x.retried, nil)
	} else {
		o = s.decide(ctx, x)
	}
	o.resp.Act = x.obj.Name
	o.resp.ConsequenceClass = x.class
	return o
}

// evaluate maps and checks the act of a Review or a Permit and asks policy about it; it builds
// the authority binding and the Act object, and writes nothing.
func (s *Service) evaluate(ctx context.Context, c *caller, req *review.Request) (*call, *outcome) {
	fail := func(o outcome) (*call, *outcome) { return nil, &o }
	compiled, refused := s.serve(c)
	if refused != nil {
		return nil, refused
	}
	a, err := act.ParseCandidateAct(req.Act)
	if err != nil {
		code, _ := act.CodeOf(err)
		return fail(deny(http.StatusBadRequest, ef.EFActInvalid, review.ReasonBadRequest, fmt.Sprintf("The act is malformed (%s).", code)))
	}
	x := &call{c: c, act: a, session: a.Freshness.SessionID, server: req.Server, now: s.now(), raw: req.Arguments}
	if !x.now.Before(a.ExpiresAt) {
		return fail(deny(http.StatusBadRequest, ef.EFActInvalid, review.ReasonBadRequest, "The act has expired."))
	}
	// §16 MUST 1–2: the digest is recomputed from the arguments the sidecar will send.
	if err := a.MatchArguments(req.Arguments); err != nil {
		return fail(deny(http.StatusBadRequest, ef.EFScopeMismatch, review.ReasonBadRequest, ""))
	}
	if x.args, err = jcs.Canonicalize(req.Arguments, a.ArgumentsDigest.Canonicalization.Mode()); err != nil {
		return fail(deny(http.StatusBadRequest, ef.EFActInvalid, review.ReasonBadRequest, "The arguments are not canonicalizable."))
	}
	_, strictErr := action.Digest(x.tool(), x.args, jcs.Strict)
	x.strict = strictErr == nil

	// The destination is the server's URL from the policy — where the sidecar's MCP proxy
	// forwards — unless the act names the live destination a host loop is about to contact
	// (tool-use-binding §12 MCP_SERVER_SWAP, COMPUTER_USE_ORIGIN_CHANGE). Either way the policy
	// decides it below (the rule's destinations, or the server's own URL), and the authority
	// binds it, so a consume at any other destination is refused (§22 T-D, T-E).
	for _, srv := range compiled.Servers() {
		if srv.Name == req.Server {
			x.destination = srv.URL
		}
	}
	if x.destination == "" {
		return fail(deny(http.StatusOK, ef.EFUnknownTool, review.ReasonPolicy, fmt.Sprintf("ToolPolicy %s declares no server %s.", c.policy.Name, req.Server)))
	}
	if a.Destination != nil && a.Destination.DestinationID != "" {
		x.destination = a.Destination.DestinationID
	}
	if a.Tool.ToolEndpoint != "" && a.Tool.ToolEndpoint != x.destination {
		s.log.Info("act refused: its destination is not the policy's server", "act", a.CandidateActID, "agent", c.user, "server", req.Server)
		return fail(deny(http.StatusOK, ef.EFDestinationMismatch, review.ReasonPolicy, ""))
	}
	sinkID := compiled.SinkID()
	switch {
	case sinkID == "":
		sinkID = a.FinalitySink.SinkID
	case a.FinalitySink.SinkID != sinkID:
		s.log.Info("act refused: it names another finality sink than the policy's", "act", a.CandidateActID, "agent", c.user)
		return fail(deny(http.StatusOK, ef.EF040, review.ReasonPolicy, "The act names another finality sink than the policy's."))
	}

	x.d = compiled.Evaluate(ctx, policy.Request{
		Server: req.Server, Destination: x.destination, Tool: x.tool(), Args: x.args,
		Class: a.ConsequenceClass, Provenance: provenance(a), Agent: c.user, StrictArgs: x.strict,
	})
	if ctx.Err() != nil {
		return fail(apiFailure(ctx, "decide", ctx.Err()))
	}
	x.class = v1alpha1.ConsequenceClass(a.ConsequenceClass)
	if x.d.Class != "" {
		x.class = v1alpha1.ConsequenceClass(x.d.Class)
	}
	x.binding = authority.Binding{
		ActID: a.CandidateActID, ArgumentsDigest: jcs.Digest(x.args), ActionDigest: x.actionDigest(),
		Tool: x.tool(), Destination: x.destination, SinkID: sinkID,
		PolicyEpoch: strconv.FormatInt(x.d.Epoch, 10), Namespace: c.namespace,
	}
	x.obj = &v1alpha1.Act{
		ObjectMeta: metav1.ObjectMeta{
			Name: actName(a.CandidateActID), Namespace: c.namespace, Labels: actLabels(a.CandidateActID, x.session),
			Annotations: map[string]string{AnnotationSessionID: x.session},
		},
		Spec: v1alpha1.ActSpec{
			ActID: a.CandidateActID, SessionID: x.session, Agent: c.user, Tool: x.tool(), Server: req.Server,
			Destination: x.destination, ConsequenceClass: x.class,
			ArgumentsDigest: v1alpha1.Digest(x.binding.ArgumentsDigest), ActionDigest: v1alpha1.Digest(x.actionDigest()),
			PolicyRef: v1alpha1.LocalObjectReference{Name: c.policy.Name}, Rule: x.d.Rule,
			SinkID: sinkID, PolicyEpoch: x.d.Epoch,
		},
	}
	labelCallerPod(x.obj, c)
	return x, nil
}

// decide acts on the policy decision for a recorded act.
func (s *Service) decide(ctx context.Context, x *call) outcome {
	d := x.d
	if d.Audit {
		st := actStatus{decision: v1alpha1.ActDecisionAllowed, state: v1alpha1.ActStateAuthorized,
			message: "Audit mode: not enforced.", settled: metav1.ConditionFalse, settleReason: v1alpha1.ActInProgressReason}
		resp := review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonPolicy, Message: st.message}
		if d.WouldDeny {
			code := d.Code
			if !code.Known() {
				code = ef.EFPolicyDenied
			}
			st.decision, st.code = v1alpha1.ActDecisionAuditDenied, code
			resp.Decision, resp.Code = v1alpha1.ActDecisionAuditDenied, code
			s.log.Info("audit mode: call let through that enforcement would refuse", "act", x.binding.ActID,
				"actionDigest", x.actionDigest(), "code", code, "policy", d.Policy, "rule", d.Rule)
		}
		if err := s.setActStatus(ctx, x.obj, st); err != nil {
			return apiFailure(ctx, "record the decision", err)
		}
		return outcome{status: http.StatusOK, resp: resp}
	}
	switch d.Outcome {
	case policy.OutcomeAllow:
		// The hot path: no authority is issued or consumed.
		st := actStatus{decision: v1alpha1.ActDecisionAllowed, state: v1alpha1.ActStateAuthorized,
			settled: metav1.ConditionFalse, settleReason: v1alpha1.ActInProgressReason}
		if err := s.setActStatus(ctx, x.obj, st); err != nil {
			return apiFailure(ctx, "record the decision", err)
		}
		return outcome{status: http.StatusOK, resp: review.Response{Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonPolicy}}
	case policy.OutcomePermit, policy.OutcomeEscalate:
		if x.overBudget != nil {
			s.log.V(1).Info("deny: over budget", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "policy", d.Policy, "rule", d.Rule)
			return s.refuse(ctx, x, *x.overBudget)
		}
		if x.escalateBudget {
			// Over an Escalate budget a person decides, as for a rule of role
			// HumanAuthorization: the rule's principals (policy.Decision carries them).
			x.d.Evidence.Role = v1alpha1.EvidenceRoleHumanAuthorization
		}
		if d.Outcome == policy.OutcomeEscalate || x.escalateBudget {
			return s.escalate(ctx, x)
		}
		groups, o := s.momentGroups(ctx, x)
		if o != nil {
			return *o
		}
		if g := declinedGroup(groups); g != nil {
			return s.refuse(ctx, x, deny(http.StatusOK, ef.EFMomentDeclined, review.ReasonBindingMoment, ""))
		}
		return s.grant(ctx, x, d.AuthorityTTL, review.ReasonPolicy, nil)
	}
	code := d.Code
	if !code.Known() {
		code = ef.EFPolicyDenied
	}
	s.log.V(1).Info("deny", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "code", code, "policy", d.Policy, "rule", d.Rule)
	return s.refuse(ctx, x, deny(http.StatusOK, code, review.ReasonPolicy, d.Message))
}

// refuse records a refusal on the act and returns it.
func (s *Service) refuse(ctx context.Context, x *call, o outcome) outcome {
	if err := s.setActStatus(ctx, x.obj, deniedStatus(o.resp.Code, o.resp.Message, v1alpha1.ActStateMatch)); err != nil {
		s.log.Error(err, "act status not recorded", "act", x.binding.ActID, "code", o.resp.Code)
	}
	return o
}

// grant issues authority for the act (machine permit, or a resolved binding moment) and
// records it. A retried review of the same act finds the authority already issued and returns
// it while it is unspent and unexpired.
func (s *Service) grant(ctx context.Context, x *call, ttl time.Duration, reason review.Reason, esc *review.Escalation) outcome {
	if ttl <= 0 {
		ttl = 60 * time.Second // v1alpha1.DefaultAuthorityTTL; policy always sets one for Permit and Escalate
	}
	ttl = min(ttl, authority.MaxTTL)
	a, err := s.signer.Sign(x.binding, x.now, ttl)
	if err != nil {
		return s.refuse(ctx, x, deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act."))
	}
	_, err = s.store.Issue(ctx, a)
	if errors.Is(err, authority.ErrAlreadyIssued) {
		var rec authority.Record
		rec, err = s.store.Get(ctx, x.c.namespace, a.ID)
		switch {
		case err != nil:
		case rec.State == authority.StateConsumed:
			err = fmt.Errorf("%w: %s", authority.ErrConsumed, a.ID)
		case !s.now().Before(rec.Authority.ExpiresAt):
			err = fmt.Errorf("%w: %s", authority.ErrExpired, a.ID)
		default:
			a = rec.Authority
		}
	}
	if err != nil {
		o := authorityFailure(ctx, err)
		if o.resp.Reason == review.ReasonAuthority {
			return s.refuse(ctx, x, o)
		}
		return o
	}
	signed, err := review.Signed(a)
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	st := actStatus{decision: v1alpha1.ActDecisionAllowed, state: v1alpha1.ActStateAuthorized, authority: a.ID,
		settled: metav1.ConditionFalse, settleReason: v1alpha1.ActInProgressReason}
	if err := s.setActStatus(ctx, x.obj, st); err != nil {
		// The Lease exists but the ledger does not say so: refuse, the authority expires unused.
		return apiFailure(ctx, "record the authority", err)
	}
	s.log.V(1).Info("authority issued", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "authority", a.ID,
		"policy", x.d.Policy, "rule", x.d.Rule, "expires", a.ExpiresAt)
	return outcome{status: http.StatusOK, resp: review.Response{
		Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: reason, Authority: signed, Escalation: esc,
	}}
}

// consume answers a Consume: the Lease compare-and-swap for the binding the sidecar expects, in
// the caller's namespace, under the governing policy's current epoch.
func (s *Service) consume(ctx context.Context, c *caller, req *review.Request) outcome {
	cr := req.Consume
	expect := cr.Binding.In(c.namespace)
	if why := ready(c.policy); why != "" {
		return deny(http.StatusOK, ef.EFPolicyDenied, review.ReasonPolicyNotReady, fmt.Sprintf("ToolPolicy %s is not served: %s.", c.policy.Name, why))
	}
	// tool-use-binding §16 MUST 5: an authority issued under another epoch than the current one
	// is refused, even if it names that epoch correctly.
	if current := strconv.FormatInt(c.policy.Status.PolicyEpoch, 10); expect.PolicyEpoch != current {
		return deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "The policy changed since this authority was issued.")
	}
	// The Act is read first: the budget charges it records are made before the Lease's
	// compare-and-swap, and given back when that refuses (budgets.go).
	obj := &v1alpha1.Act{}
	obj.Name, obj.Namespace = actName(expect.ActID), c.namespace
	actErr := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	var charged []budget.Charge
	switch {
	case actErr == nil:
		var o *outcome
		if charged, o = s.chargeAct(ctx, obj, cr.OperationID); o != nil {
			return *o
		}
	case !apierrors.IsNotFound(actErr):
		return apiFailure(ctx, "read the act", actErr)
	}
	lctx, span := tracing.Start(ctx, s.tracer, "actgate.lease.consume", trace.SpanKindInternal)
	rec, err := s.store.Consume(lctx, cr.AuthorityID, expect, authority.Consumption{OperationID: cr.OperationID})
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrActID.String(expect.ActID), tracing.AttrAuthorityID.String(cr.AuthorityID),
			tracing.AttrOperationID.String(cr.OperationID), tracing.AttrActionDigest.String(expect.ActionDigest),
			tracing.AttrCode.String(string(authority.CodeOf(err))))
	}
	span.End()
	if errors.Is(err, authority.ErrNotFound) && s.consumedOnAct(ctx, c.namespace, expect.ActID, cr.AuthorityID) {
		// No Lease: the authority was consumed when its permit record was written (a Permit,
		// or a grant consumed in its Review).
		err = fmt.Errorf("%w: %s", authority.ErrConsumed, cr.AuthorityID)
	}
	if err != nil {
		s.log.V(1).Info("consume refused", "act", expect.ActID, "authority", cr.AuthorityID, "cause", authority.CodeOf(err))
		s.refundUnlessConsumedBy(ctx, c.namespace, cr.AuthorityID, cr.OperationID, charged, err)
		return authorityFailure(ctx, err)
	}
	// The Lease is spent; the ledger follows. A failure here does not undo the consume.
	if actErr == nil {
		err = s.setActStatus(ctx, obj, actStatus{state: v1alpha1.ActStateConsumed, operationID: cr.OperationID,
			settled: metav1.ConditionFalse, settleReason: v1alpha1.ActInProgressReason})
		if err != nil {
			s.log.Error(err, "act status not recorded after consume", "act", expect.ActID, "authority", cr.AuthorityID)
		}
	} else {
		s.log.Error(actErr, "act not found after consume", "act", expect.ActID, "authority", cr.AuthorityID)
	}
	return outcome{status: http.StatusOK, resp: review.Response{
		Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonAuthority, Act: obj.Name,
		Consumed: &review.Consumed{AuthorityID: rec.Authority.ID, OperationID: rec.ConsumedBy, ConsumedAt: rec.ConsumedAt.UTC()},
	}}
}

// consumedOnAct reports whether the Act of actID in namespace records authorityID consumed in
// its permit record.
func (s *Service) consumedOnAct(ctx context.Context, namespace, actID, authorityID string) bool {
	obj := &v1alpha1.Act{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: actName(actID)}, obj); err != nil {
		return false
	}
	rec, ok := permitRecordOf(obj)
	return ok && rec.authority.ID == authorityID
}
