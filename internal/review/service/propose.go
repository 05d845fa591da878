package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
)

// propose answers a Propose: an agent-authored binding moment (request_binding_moment in a
// pod). The envelope is parsed strictly; every option's action digest must be the digest of
// its call (recomputed here from the tool and the arguments in the strict profile), every call
// names a server of the policy (each option's own: its destination is that server's URL), and
// every call is evaluated by the policy for the caller on its server: a denied call refuses
// the moment, and the options that need a human must name the same principals. The moment is
// then registered as a gate-authored escalation is: an Act for it (Escalated, for the call of
// the first option that needs a human; the grant of its resolution is recorded on it by
// compare-and-swap) and one BindingMoment per eligible principal in the agent's session, whose
// calls carry each option's server and destination. A later Review of an option's call finds
// them on that option's server and destination only (optionOn), and its authority is bound to
// that call (the package documentation, "Binding moments").
func (s *Service) propose(ctx context.Context, c *caller, req *review.Request) outcome {
	compiled, refused := s.serve(c)
	if refused != nil {
		return *refused
	}
	p := req.Proposal
	invalid := func(msg string) outcome {
		return deny(http.StatusOK, ef.EFMomentInvalid, review.ReasonBadRequest, msg)
	}
	env, err := envelope.Parse([]byte(p.Envelope))
	if err != nil {
		return invalid("The envelope does not validate.")
	}
	if env.NumOptions() != len(p.Calls) {
		return invalid("The envelope's options and the calls differ in number.")
	}
	sinkID := compiled.SinkID()
	switch {
	case sinkID == "":
		sinkID = p.SinkID
	case sinkID != p.SinkID:
		return deny(http.StatusOK, ef.EF040, review.ReasonPolicy, "The proposal names another finality sink than the policy's.")
	}
	x := &call{c: c, session: p.Session, now: s.now()}
	pc, refusal := proposalCallsOf(ctx, compiled, x, env, p, sinkID)
	if refusal != nil {
		return *refusal
	}
	gate, gateIdx, principals, calls, digests, canons := pc.gate, pc.gateIdx, pc.principals, pc.calls, pc.digests, pc.canons
	if gate == nil {
		return invalid("No option needs a human decision under policy; call the tool directly.")
	}
	// The moment's Act and the moments' annotations name the call of the first option that
	// needs a human; every option's own server and destination are in the moments' calls.
	x.server, x.destination = calls[gateIdx].Server, calls[gateIdx].Destination
	if len(principals) == 0 || len(principals) < policy.MinPrincipals(*gate) {
		return invalid("Policy names no principal who could resolve this binding moment.")
	}
	// The moment's Act: the call of the first option that needs a human, under an act id of the
	// session and envelope (a retried proposal finds the same Act and moments).
	sum := sha256.Sum256([]byte("actgate.io/proposal\x00" + p.Session + "\x00" + env.Digest()))
	actID := "prop-" + hex.EncodeToString(sum[:16])
	tool := p.Calls[gateIdx].Tool
	class := v1alpha1.ConsequenceClass(act.DefaultClass(tool))
	if gate.Class != "" {
		class = v1alpha1.ConsequenceClass(gate.Class)
	}
	x.d, x.class = *gate, class
	x.obj = &v1alpha1.Act{
		ObjectMeta: metav1.ObjectMeta{
			Name: actName(actID), Namespace: c.namespace, Labels: actLabels(actID, p.Session),
			Annotations: map[string]string{AnnotationSessionID: p.Session},
		},
		Spec: v1alpha1.ActSpec{
			ActID: actID, SessionID: p.Session, Agent: c.user, Tool: tool, Server: x.server,
			Destination: x.destination, ConsequenceClass: class,
			ArgumentsDigest: v1alpha1.Digest(jcs.Digest(canons[gateIdx])), ActionDigest: v1alpha1.Digest(digests[gateIdx]),
			PolicyRef: v1alpha1.LocalObjectReference{Name: c.policy.Name}, Rule: gate.Rule,
			SinkID: sinkID, PolicyEpoch: gate.Epoch,
		},
	}
	if o := s.recordAct(ctx, x); o != nil {
		return *o
	}
	expires := metav1.NewTime(s.now().Add(s.momentTTL).Truncate(time.Second))
	g := &group{env: env, expires: expires.Time, actRef: x.obj.Name}
	for _, pr := range principals {
		m := &v1alpha1.BindingMoment{
			ObjectMeta: metav1.ObjectMeta{
				Name: momentName(actID, pr), Namespace: c.namespace,
				Labels: map[string]string{
					leasestore.LabelManagedBy: leasestore.ManagedBy, leasestore.LabelComponent: ComponentBindingMoment,
					LabelSession: sessionLabel(p.Session), leasestore.LabelActID: leasestore.ActLabelValue(actID),
				},
				Annotations: map[string]string{
					AnnotationSessionID: p.Session, AnnotationAgent: c.user, AnnotationServer: x.server,
					AnnotationDestination: x.destination, AnnotationTool: tool, AnnotationActionDigest: digests[gateIdx],
				},
			},
			Spec: v1alpha1.BindingMomentSpec{
				Envelope: string(env.Canonical()), EnvelopeDigest: v1alpha1.Digest(env.Digest()),
				Synopsis: env.Content().Synopsis, Principal: pr,
				ActRef: v1alpha1.LocalObjectReference{Name: x.obj.Name}, ExpiresAt: expires,
				Calls: calls,
			},
		}
		if c.podUID != "" {
			m.Annotations[AnnotationPod], m.Annotations[AnnotationPodUID] = c.podName, c.podUID
		}
		switch err := s.c.Create(ctx, m, client.FieldOwner(s.manager)); {
		case err == nil:
			s.recent.Add(m)
		case !apierrors.IsAlreadyExists(err):
			return apiFailure(ctx, "create the binding moment", err)
		}
		g.moments = append(g.moments, m)
	}
	s.log.Info("agent-proposed binding moment registered", "act", actID, "envelope", env.Digest(),
		"bindingMoments", g.names(), "options", len(calls), "policy", gate.Policy, "rule", gate.Rule)
	o := s.pending(ctx, x, g)
	o.resp.Allowed = true // registered: nothing is authorised by it until principals resolve it
	o.resp.Act = x.obj.Name
	o.resp.Code, o.resp.Message = "", fmt.Sprintf("Binding moment %s awaits a decision by %d of the principals policy names.", g.names()[0], policy.MinPrincipals(*gate))
	return o
}

// proposalCalls are a proposal's calls as the service checked them: each option's call shown to
// principals (masks applied), its action digest and canonical arguments, and the decision,
// index and eligible principals of the first option that needs a human (gate nil: none does).
type proposalCalls struct {
	gate       *policy.Decision
	gateIdx    int
	principals []string
	calls      []v1alpha1.BindingMomentCall
	digests    []string
	canons     [][]byte
}

// proposalCallsOf checks every option of a proposal against its call and the policy (propose):
// each option's call on its own server, whose destination is the policy's URL for it.
func proposalCallsOf(ctx context.Context, compiled *policy.Compiled, x *call, env *envelope.Envelope, p *review.ProposalRequest,
	sinkID string) (proposalCalls, *outcome) {
	c := x.c
	fail := func(o outcome) (proposalCalls, *outcome) { return proposalCalls{}, &o }
	invalid := func(msg string) (proposalCalls, *outcome) {
		return fail(deny(http.StatusOK, ef.EFMomentInvalid, review.ReasonBadRequest, msg))
	}
	destinations := map[string]string{}
	for _, srv := range compiled.Servers() {
		destinations[srv.Name] = srv.URL
	}
	out := proposalCalls{calls: make([]v1alpha1.BindingMomentCall, len(p.Calls)), digests: make([]string, len(p.Calls)),
		canons: make([][]byte, len(p.Calls))}
	for i, pc := range p.Calls {
		destination := destinations[pc.Server]
		if destination == "" {
			return fail(deny(http.StatusOK, ef.EFUnknownTool, review.ReasonPolicy,
				fmt.Sprintf("Option %d: ToolPolicy %s declares no server %s.", i, c.policy.Name, pc.Server)))
		}
		if act.CheckToolName("tool", pc.Tool) != nil {
			return invalid(fmt.Sprintf("Option %d has an invalid tool name.", i))
		}
		canon, err := jcs.Canonicalize(pc.Arguments, jcs.Strict)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			return fail(deny(http.StatusOK, ef.EFArgumentsOutOfProfile, review.ReasonBadRequest,
				fmt.Sprintf("Option %d: arguments are not an object inside the strict profile.", i)))
		}
		digest, err := action.Digest(pc.Tool, canon, jcs.Strict)
		if err != nil {
			return fail(deny(http.StatusOK, ef.EFArgumentsOutOfProfile, review.ReasonBadRequest,
				fmt.Sprintf("Option %d: arguments cannot be bound to a human decision.", i)))
		}
		if o, ok := env.Option(i); !ok || o.ActionDigest != digest {
			return invalid(fmt.Sprintf("Option %d's action digest is not its call's.", i))
		}
		d := compiled.Evaluate(ctx, policy.Request{Server: pc.Server, Destination: destination, Tool: pc.Tool, Args: canon,
			Class: act.DefaultClass(pc.Tool), Agent: c.user, StrictArgs: true})
		if ctx.Err() != nil {
			return fail(apiFailure(ctx, "decide", ctx.Err()))
		}
		switch {
		case d.Audit:
		case d.Outcome == policy.OutcomeAllow, d.Outcome == policy.OutcomePermit:
		case d.Outcome == policy.OutcomeEscalate:
			eligible := policy.EligiblePrincipals(d, c.user, sinkID)
			slices.Sort(eligible)
			if out.gate == nil {
				dd := d
				out.gate, out.gateIdx, out.principals = &dd, i, eligible
			} else if !slices.Equal(out.principals, eligible) || policy.MinPrincipals(d) != policy.MinPrincipals(*out.gate) {
				return invalid("The options need decisions by different principals; propose them in separate binding moments.")
			}
		default:
			code := d.Code
			if !code.Known() {
				code = ef.EFPolicyDenied
			}
			return fail(deny(http.StatusOK, code, review.ReasonPolicy, fmt.Sprintf("Option %d: policy refuses this call; a principal cannot authorise it.", i)))
		}
		args, masked, err := argmask.Apply(canon, d.MaskArguments)
		if err != nil || len(args) > maxCallArgsBytes {
			return invalid(fmt.Sprintf("Option %d: the call cannot be shown to a principal.", i))
		}
		out.calls[i] = v1alpha1.BindingMomentCall{Server: pc.Server, Destination: destination, Tool: pc.Tool, Args: string(args), Masked: masked}
		out.digests[i], out.canons[i] = digest, canon
	}
	return out, nil
}

// optionOn reports whether option i of moment m calls the live call's server and destination:
// an option's server and destination are its own (m's calls, one per option, immutable), and
// a moment without calls offers every option on the server and destination it names.
func optionOn(m *v1alpha1.BindingMoment, numOptions, i int, x *call) bool {
	if len(m.Spec.Calls) == 0 {
		return m.Annotations[AnnotationServer] == x.server && m.Annotations[AnnotationDestination] == x.destination
	}
	return len(m.Spec.Calls) == numOptions && m.Spec.Calls[i].Server == x.server && m.Spec.Calls[i].Destination == x.destination
}
