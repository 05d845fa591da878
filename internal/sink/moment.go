package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/aeb"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/sink/moment"
)

// Sentinel errors of Resolve. Every refusal wraps exactly one; nothing is recorded then.
var (
	// ErrMomentNotFound: no moment with that id.
	ErrMomentNotFound = errors.New("sink: no such binding moment")
	// ErrMomentExpired: the moment expired before this resolution.
	ErrMomentExpired = errors.New("sink: binding moment expired")
	// ErrMomentResolved: the moment is already resolved, or this principal already resolved it
	// (envelope-04 §12.5: a replayed resolution is not a decision).
	ErrMomentResolved = errors.New("sink: binding moment already resolved")
	// ErrNotPrincipal: the resolver is not a principal the policy names for the moment.
	ErrNotPrincipal = errors.New("sink: not a principal of this binding moment")
	// ErrSelfResolution: the initiating agent (or, with separation of duties, the sink itself)
	// tried to resolve (action-evidence-boundary "separation-of-duty rule").
	ErrSelfResolution = errors.New("sink: the initiating agent cannot resolve its own binding moment")
	// ErrResolutionInvalid: the resolution is malformed or names another envelope (§7.3, §12.5).
	ErrResolutionInvalid = errors.New("sink: invalid resolution")
)

func momentRef(m *moment.Moment) *MomentRef {
	return &MomentRef{ID: m.ID, Envelope: m.Env, Digest: m.Env.Digest(), Text: m.Text, Expires: m.Expires}
}

// momentLimitMessage is what the agent is told when a pending-moment limit refuses a moment.
const momentLimitMessage = "Too many binding moments are pending for this agent or session; " +
	"wait until the principals resolve them (or they expire). Nothing was registered or invoked."

// momentLimit refuses an escalated call whose moment a pending-moment limit refused.
func (g *gate) momentLimit(cl *callState, m *moment.Moment, err error) Result {
	g.log.Info("escalation refused: too many pending binding moments", "act", m.ActID, "code", ef.EFMomentLimit, "reason", err.Error())
	return g.refuse(cl, ef.EFMomentLimit, momentLimitMessage)
}

// DefaultOffer is slot 4 when a proposal leaves it empty (envelope-04 §5.4).
const DefaultOffer = "Ask for detail on any item."

// escalate handles a call policy escalates: a grant from a resolved moment for exactly this
// action in this session is enforced and consumed; otherwise the call is refused with
// EF_ESCALATION_REQUIRED and a gate-authored binding moment.
func (g *gate) escalate(ctx context.Context, cl *callState, inv Invoker) (Result, error) {
	digest := cl.cand.ActionDigest()
	if code, ok := g.moments.ClosedCode(cl.c.Session, digest); ok {
		msg := ""
		if code == ef.EFEscalationRequired {
			msg = "The principal reopened this question; propose a new binding moment with request_binding_moment."
		}
		return g.refuse(cl, code, msg), nil
	}
	if !cl.cand.Strict() {
		// Arguments outside the strict profile cannot be bound to a human (docs/architecture.md
		// "Digests").
		return g.refuse(cl, ef.EFArgumentsOutOfProfile, ""), nil
	}
	gr, granted := g.moments.GrantFor(cl.c.Session, cl.c.Agent, digest, cl.c.Destination, g.now())
	if granted {
		// The call continues the act the principal authorised: its id is the escalated act's
		// (or the one minted at resolution), bound into the authority, and so is its session
		// (another one only for a carried moment, whose session ended with a previous process).
		cl.cand.Act.CandidateActID = gr.ActID
		cl.cand.Act.Freshness.SessionID = gr.Session
	}
	k := dispatchKey{digest, cl.c.Destination}
	entry, res, done := g.reserve(ctx, cl, k)
	if done {
		return res, nil
	}
	if !granted {
		g.dispatches.release(k, entry)
		return g.escalateMoment(ctx, cl), nil
	}
	res, err := g.dispatch(ctx, cl, inv, k, entry, gr.Expires, nil)
	switch {
	case res.Allowed, res.Code == ef.EF005, res.Code == ef.EF002:
		g.moments.DropGrant(cl.c.Session, cl.c.Agent, digest, gr.AuthorityID)
	}
	return res, err
}

// escalateMoment refuses the call with a gate-authored binding moment built from policy
// (docs/architecture.md "Human decisions"): a factual briefing (tool, server, class, destination,
// digests, no argument values), the requested call as one option and the rule's declared
// alternatives as the others, registered for the rule's principals.
func (g *gate) escalateMoment(ctx context.Context, cl *callState) Result {
	now := g.now()
	digest := cl.cand.ActionDigest()
	pk := moment.PendingKey{Session: cl.c.Session, ActionDigest: digest, Destination: cl.c.Destination}
	if m, ok := g.moments.PendingFor(pk, cl.c.Agent, now); ok {
		res := g.refuse(cl, ef.EFEscalationRequired, "")
		res.Moment = momentRef(m)
		return res
	}
	ev := cl.dec.Evidence
	if len(ev.Principals) == 0 {
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision and policy names no principal to make it.")
	}
	requested, err := moment.Option{
		Tool: cl.c.Tool, Server: cl.c.Server, Destination: cl.c.Destination,
		Args: cl.cand.Arguments, ArgsDigest: cl.cand.ArgumentsDigest(), ActionDigest: digest, NeedsHuman: true,
	}.WithShown(cl.dec.MaskArguments)
	if err != nil {
		g.log.Error(err, "escalated call cannot be shown to a principal; no binding moment", "act", cl.cand.Act.CandidateActID)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; it cannot be shown to a principal.")
	}
	opts := []moment.Option{requested}
	draft := []envelope.DraftOption{{
		Label:     envelope.SlotText("Run "+cl.c.Tool+" as requested", envelope.MaxLabelRunes),
		Reasoning: "Authorises exactly the call the agent made, once.",
		Tool:      cl.c.Tool,
		Args:      cl.cand.Arguments,
	}}
	for _, alt := range cl.dec.Alternatives {
		if len(opts) == envelope.MaxOptions {
			break
		}
		o, ok := g.alternative(cl, alt, opts)
		if !ok {
			continue
		}
		opts = append(opts, o)
		draft = append(draft, envelope.DraftOption{
			Label:     envelope.SlotText(alt.Label, envelope.MaxLabelRunes),
			Reasoning: envelope.SlotText(alt.Reasoning, envelope.MaxTextRunes),
			Tool:      o.Tool,
			Args:      o.Args,
		})
	}
	if len(opts) < envelope.MinOptions {
		g.log.Info("escalation without a usable alternative; no binding moment", "act", cl.cand.Act.CandidateActID,
			"policy", cl.dec.Policy, "rule", cl.dec.Rule)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; policy declares no alternative to offer.")
	}
	ruleName := cl.dec.Rule
	if ruleName == "" {
		ruleName = "policy"
	}
	findings := []string{
		envelope.SlotText(fmt.Sprintf("Tool %s on server %s (%s).", cl.c.Tool, cl.c.Server, cl.c.Destination), envelope.MaxTextRunes),
		fmt.Sprintf("Consequence class %s.", cl.class),
		fmt.Sprintf("Arguments digest %s.", cl.cand.ArgumentsDigest()),
		fmt.Sprintf("Action digest %s.", digest),
		envelope.SlotText(fmt.Sprintf("Requested by agent %s in act %s, instruction provenance %s.", cl.c.Agent, cl.cand.Act.CandidateActID, cl.provSrc), envelope.MaxTextRunes),
	}
	recommended := 0
	if len(opts) > 1 {
		// §5.7: the mark falls on the option that minimises the cost of being wrong; the rule's
		// declared alternatives exist to be the narrower call.
		recommended = 1
	}
	env, err := envelope.Build(envelope.Draft{
		Synopsis:        envelope.SlotText(fmt.Sprintf("Rule %s holds this %s call until a principal chooses which call may run.", ruleName, cl.c.Tool), envelope.MaxTextRunes),
		Findings:        findings,
		Recommendations: []string{"Choose the requested call to let it run once as made.", "Choose an alternative to authorise that call instead."},
		Offer:           DefaultOffer,
		Stem:            envelope.SlotText(fmt.Sprintf("Which call of %s may run?", cl.c.Tool), envelope.MaxTextRunes),
		Options:         draft,
		RecommendedIdx:  recommended,
	})
	if err != nil {
		g.log.Error(err, "gate-authored envelope refused", "act", cl.cand.Act.CandidateActID)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; no binding moment could be built.")
	}
	m := &moment.Moment{
		ID: moment.NewID(), Env: env, Session: cl.c.Session, Agent: cl.c.Agent,
		ActID: cl.cand.Act.CandidateActID, GateAuthored: true, Options: opts,
		Principals: slices.Clone(ev.Principals), Min: minPrincipals(ev), SoD: ev.SeparationOfDuties,
		Epoch: cl.dec.Epoch, AuthorityTTL: g.authorityTTLFor(cl.dec), Created: now,
		Expires: now.Add(g.momentTTL), Policy: cl.dec.Policy, Rule: cl.dec.Rule, Votes: map[string]int{},
		Class: cl.class,
	}
	if err := g.moments.Admit(m.Agent, m.Session, now); err != nil {
		return g.momentLimit(cl, m, err)
	}
	if err := g.register(ctx, m); err != nil {
		g.log.Error(err, "binding moment not registered", "act", m.ActID)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; the binding moment could not be registered.")
	}
	if err := g.addMoment(ctx, m, &pk, now); err != nil {
		if errors.Is(err, moment.ErrLimit) {
			return g.momentLimit(cl, m, err)
		}
		g.log.Error(err, "binding moment not stored", "act", m.ActID, "moment", m.ID)
		return g.refuse(cl, ef.EFStoreUnavailable, "This call needs a human decision; the binding moment could not be stored.")
	}
	g.observer.MomentEmitted(momentEvent(m))
	g.log.Info("escalated to a binding moment", "act", m.ActID, "actionDigest", digest, "moment", m.ID,
		"envelope", env.Digest(), "policy", cl.dec.Policy, "rule", cl.dec.Rule)
	res := g.refuse(cl, ef.EFEscalationRequired, "")
	res.Moment = momentRef(m)
	return res
}

// alternative builds the option of a declared alternative: the merge patch applied to the
// requested arguments, canonicalized in the strict profile. An alternative that fails, or
// repeats an option already offered, is left out.
func (g *gate) alternative(cl *callState, alt Alternative, have []moment.Option) (moment.Option, bool) {
	patched, err := MergePatch(cl.cand.Arguments, alt.Args)
	if err != nil {
		return moment.Option{}, false
	}
	canon, err := jcs.Canonicalize(patched, jcs.Strict)
	if err != nil {
		return moment.Option{}, false
	}
	d, err := action.Digest(cl.c.Tool, canon, jcs.Strict)
	if err != nil {
		return moment.Option{}, false
	}
	for _, o := range have {
		if o.ActionDigest == d {
			return moment.Option{}, false
		}
	}
	o, err := moment.Option{
		Tool: cl.c.Tool, Server: cl.c.Server, Destination: cl.c.Destination,
		Args: canon, ArgsDigest: jcs.Digest(canon), ActionDigest: d, NeedsHuman: true,
	}.WithShown(cl.dec.MaskArguments)
	return o, err == nil
}

func minPrincipals(ev Evidence) int {
	n := ev.MinPrincipals
	if n < 1 {
		n = 1
	}
	if n > aeb.MaxEvidence {
		n = aeb.MaxEvidence
	}
	return n
}

// addMoment registers m in the table and stores its record before anyone can see it: a moment
// the store did not take is forgotten, and the caller refuses.
func (g *gate) addMoment(ctx context.Context, m *moment.Moment, pk *moment.PendingKey, now time.Time) error {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	if err := g.moments.Add(m, pk, now); err != nil {
		return err
	}
	if err := g.persist(ctx, m, nil, ""); err != nil {
		g.moments.Remove(m, pk)
		return err
	}
	return nil
}

// register renders the moment and records its envelope in the registry, which refuses an
// envelope identical to one already emitted (envelope-04 §12.5).
func (g *gate) register(ctx context.Context, m *moment.Moment) error {
	var b bytes.Buffer
	if err := (envelope.TextRenderer{}).Render(&b, m.Env); err == nil {
		m.Text = b.String()
	}
	opts := envelope.EmitOptions{TTL: g.momentTTL}
	if len(m.Principals) == 1 {
		opts.Principal = m.Principals[0]
	}
	_, err := g.registry.Emit(ctx, m.Env, opts)
	return err
}

// requestMoment is the virtual request_binding_moment tool (docs/architecture.md "Human
// decisions"): the agent proposes the briefing and 2–4 options, each a concrete tool call; the gate
// computes every action digest itself, checks each call against policy, and registers the envelope
// for the principals policy names for those calls.
func (g *gate) requestMoment(ctx context.Context, session, agent string, p Proposal) (Result, error) {
	if g == nil {
		return Result{}, errNoGate
	}
	res := g.proposeMoment(ctx, session, agent, p)
	res.Resolutions = append(res.Resolutions, g.moments.TakeDeliveries(session)...)
	return res, nil
}

func momentRefused(msg string) Result {
	return denyResult(ef.EFMomentInvalid, msg)
}

func (g *gate) proposeMoment(ctx context.Context, session, agent string, p Proposal) Result {
	if ctx.Err() != nil {
		return denyResult(ef.EF060, "")
	}
	if session == "" || agent == "" {
		return momentRefused("The binding moment needs a session and an agent.")
	}
	if len(p.Raw) > 0 {
		parsed, err := ParseProposal(p.Raw)
		if err != nil {
			return momentRefused(clip(err.Error(), 180))
		}
		p = parsed
	}
	if len(p.Options) < envelope.MinOptions || len(p.Options) > envelope.MaxOptions {
		return momentRefused("A binding moment offers 2 to 4 options (envelope-04 §5.6).")
	}
	if err := moment.CheckHatches(p.Hatches); err != nil {
		return momentRefused(clip(err.Error(), 180))
	}
	servers := g.policy.Servers()
	var (
		opts       []moment.Option
		draft      []envelope.DraftOption
		req        *PolicyDecision
		principals []string
	)
	for i, o := range p.Options {
		server, dest, ok := resolveServer(servers, o.Server)
		if !ok {
			return momentRefused(fmt.Sprintf("Option %d names no protected server; set its server.", i))
		}
		if act.CheckToolName("tool", o.Tool) != nil {
			return momentRefused(fmt.Sprintf("Option %d has an invalid tool name.", i))
		}
		canon, err := jcs.Canonicalize(o.Args, jcs.Strict)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			return denyResult(ef.EFArgumentsOutOfProfile, fmt.Sprintf("Option %d: arguments are not an object inside the strict profile (integers only).", i))
		}
		digest, err := action.Digest(o.Tool, canon, jcs.Strict)
		if err != nil {
			return denyResult(ef.EFArgumentsOutOfProfile, fmt.Sprintf("Option %d: arguments cannot be bound to a human decision.", i))
		}
		d := g.policy.Evaluate(ctx, PolicyRequest{
			Server: server, Destination: dest, Tool: o.Tool, Args: canon,
			Class: act.DefaultClass(o.Tool), Agent: agent, StrictArgs: true,
		})
		if ctx.Err() != nil {
			return denyResult(ef.EF060, "")
		}
		mo, err := moment.Option{Tool: o.Tool, Server: server, Destination: dest, Args: canon,
			ArgsDigest: jcs.Digest(canon), ActionDigest: digest}.WithShown(d.MaskArguments)
		if err != nil {
			return momentRefused(fmt.Sprintf("Option %d: the call cannot be shown to a principal.", i))
		}
		switch d.Outcome {
		case PolicyAllow, PolicyPermit:
		case PolicyEscalate:
			mo.NeedsHuman = true
			if req == nil {
				dd := d
				req = &dd
				principals = sortedUnique(d.Evidence.Principals)
			} else if !slices.Equal(principals, sortedUnique(d.Evidence.Principals)) || minPrincipals(d.Evidence) != minPrincipals(req.Evidence) {
				return momentRefused("The options need decisions by different principals; propose them in separate binding moments.")
			}
		default:
			code := d.Code
			if !code.Known() {
				code = ef.EFPolicyDenied
			}
			return denyResult(code, fmt.Sprintf("Option %d: policy refuses this call; a principal cannot authorise it.", i))
		}
		opts = append(opts, mo)
		draft = append(draft, envelope.DraftOption{Label: o.Label, Reasoning: o.Reasoning, Tool: o.Tool, Args: canon})
	}
	if req == nil {
		return momentRefused("No option needs a human decision under policy; call the tool directly.")
	}
	if len(principals) == 0 {
		return momentRefused("Policy names no principal who could resolve this binding moment.")
	}
	offer := p.Offer
	if offer == "" {
		offer = DefaultOffer
	}
	env, err := envelope.Build(envelope.Draft{
		Synopsis: p.Synopsis, Findings: p.Findings, Recommendations: p.Recommendations, Offer: offer,
		Stem: p.Stem, Options: draft, RecommendedIdx: p.Recommended,
		CloseFreeText: p.Hatches != nil && !slices.Contains(p.Hatches, HatchFreeText),
		CloseDialogue: p.Hatches != nil && !slices.Contains(p.Hatches, HatchDialogue),
		Meta:          moment.ProposalMeta(p),
	})
	if err != nil {
		return momentRefused(problemSummary(err))
	}
	if g.remote != nil {
		return g.proposeRemote(ctx, session, agent, env, opts)
	}
	now := g.now()
	m := &moment.Moment{
		ID: moment.NewID(), Env: env, Session: session, Agent: agent, Options: opts,
		Principals: principals, Min: minPrincipals(req.Evidence), SoD: req.Evidence.SeparationOfDuties,
		Epoch: req.Epoch, AuthorityTTL: g.authorityTTLFor(*req), Created: now, Expires: now.Add(g.momentTTL),
		Policy: req.Policy, Rule: req.Rule, Votes: map[string]int{}, Class: proposalClass(req, opts),
	}
	if err := g.moments.Admit(agent, session, now); err != nil {
		g.log.Info("binding moment refused: too many pending", "code", ef.EFMomentLimit, "reason", err.Error())
		return denyResult(ef.EFMomentLimit, momentLimitMessage)
	}
	if err := g.register(ctx, m); err != nil {
		if errors.Is(err, envelope.ErrAlreadyEmitted) {
			// §7.2: a question-space veto is a reopening, never the same question again;
			// §12.5: identical envelopes share a digest and their resolutions.
			return momentRefused("This envelope is identical to one already emitted; change it to incorporate the principal's response (envelope-04 §7.2, §12.5).")
		}
		return momentRefused("The binding moment could not be registered.")
	}
	if err := g.addMoment(ctx, m, nil, now); err != nil {
		if !errors.Is(err, moment.ErrLimit) {
			g.log.Error(err, "binding moment not stored", "moment", m.ID)
			return denyResult(ef.EFStoreUnavailable, "The binding moment could not be stored; nothing was registered.")
		}
		g.log.Info("binding moment refused: too many pending", "code", ef.EFMomentLimit, "reason", err.Error())
		return denyResult(ef.EFMomentLimit, momentLimitMessage)
	}
	g.observer.MomentEmitted(momentEvent(m))
	// A new moment about these actions lifts an earlier decline or reopening of them.
	digests := make([]string, len(opts))
	for i, o := range opts {
		digests[i] = o.ActionDigest
	}
	g.moments.Reopen(session, digests)
	g.log.Info("binding moment proposed", "moment", m.ID, "envelope", env.Digest(), "options", len(opts),
		"policy", m.Policy, "rule", m.Rule)
	return Result{
		Allowed: true,
		Moment:  momentRef(m),
		Message: fmt.Sprintf("Binding moment %s awaits a decision by %d of the principals policy names.", m.ID, m.Min),
	}
}

// resolveServer finds the protected server an option names; with one protected server the
// name may be omitted.
func resolveServer(servers []ServerInfo, name string) (string, string, bool) {
	if name == "" {
		if len(servers) == 1 {
			return servers[0].Name, servers[0].URL, servers[0].URL != ""
		}
		return "", "", false
	}
	for _, s := range servers {
		if s.Name == name {
			return s.Name, s.URL, s.URL != ""
		}
	}
	return "", "", false
}

func sortedUnique(ss []string) []string {
	out := slices.Clone(ss)
	sort.Strings(out)
	return slices.Compact(out)
}

// problemSummary lists an envelope validation error's codes and paths (no slot text).
func problemSummary(err error) string {
	ps := envelope.ProblemsOf(err)
	if len(ps) == 0 {
		return "The proposal is not a well-formed binding moment."
	}
	var b strings.Builder
	var ve *envelope.ValidationError
	if errors.As(err, &ve) && ve.ProfileOnly() {
		// Well formed under envelope-04; the gate does not send what breaks its profile.
		b.WriteString("Outside the gate's binding-moment profile:")
	} else {
		b.WriteString("Not a well-formed binding moment:")
	}
	for i, p := range ps {
		if i == 4 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s at %s;", p.Code, clip(p.Path, 48))
	}
	return b.String()
}

// resolve applies one principal's resolution to a moment (envelope-04 §7.3).
func (g *gate) resolve(ctx context.Context, momentID, principal string, raw []byte) (ResolveResult, error) {
	if g == nil {
		return ResolveResult{}, errNoGate
	}
	m, ok := g.moments.Get(momentID)
	if !ok {
		return ResolveResult{}, fmt.Errorf("%w: %s", ErrMomentNotFound, clip(momentID, 64))
	}
	r, err := envelope.ParseResolution(raw)
	if err != nil {
		return ResolveResult{}, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
	}
	m.Mu.Lock()
	defer m.Mu.Unlock()
	now := g.now()
	out := ResolveResult{MomentID: m.ID, Kind: string(r.Kind), Required: m.Min}
	switch {
	case r.EnvelopeDigest != m.Env.Digest():
		// §12.5: a resolution names its envelope; one naming another is not a decision.
		return out, fmt.Errorf("%w: the resolution names another envelope", ErrResolutionInvalid)
	case m.Resolved:
		return out, fmt.Errorf("%w: %s", ErrMomentResolved, m.ID)
	case !now.Before(m.Expires):
		return out, fmt.Errorf("%w: %s expired at %s", ErrMomentExpired, m.ID, m.Expires.UTC().Format(time.RFC3339))
	case principal == "":
		return out, fmt.Errorf("%w: no principal", ErrNotPrincipal)
	case principal == m.Agent, m.SoD && principal == g.sinkID:
		return out, fmt.Errorf("%w: %s", ErrSelfResolution, clip(principal, 64))
	case !slices.Contains(m.Principals, principal):
		return out, fmt.Errorf("%w: %s", ErrNotPrincipal, clip(principal, 64))
	}
	if _, voted := m.Votes[principal]; voted {
		return out, fmt.Errorf("%w: %s already resolved %s", ErrMomentResolved, clip(principal, 64), m.ID)
	}
	if err := envelope.Verify(m.Env, r); err != nil {
		return out, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
	}
	if r.Kind != envelope.KindOption {
		// answer, question, declined: final, whoever of the principals makes it.
		if _, err := g.registry.Resolve(ctx, r, principal); err != nil {
			return out, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
		}
		m.Resolved, m.Kind, m.ResolvedAt = true, r.Kind, now
		if err := g.persist(ctx, m, nil, ""); err != nil {
			// The registry holds the resolution, so the moment cannot be resolved again in
			// this process: it stays unresolved and refuses (fail closed).
			m.Resolved, m.Kind, m.ResolvedAt = false, "", time.Time{}
			return out, err
		}
		m.Settled.Store(true)
		g.closeOut(m, r)
		g.log.Info("binding moment resolved", "moment", m.ID, "resolution", r.Kind)
		g.observer.MomentResolved(momentEvent(m), ResolutionEvent{Kind: string(r.Kind), Principal: principal, At: now})
		return out, nil
	}
	opt := m.Options[r.OptionIdx]
	out.OptionID = fmt.Sprintf("%d", r.OptionIdx)
	m.Votes[principal] = r.OptionIdx
	votes := m.VotersFor(r.OptionIdx)
	out.Votes = len(votes)
	authorized, err := moment.Quorum(m, r.OptionIdx, votes, g.sinkID, now)
	if err != nil {
		delete(m.Votes, principal)
		return out, err
	}
	if !authorized {
		if err := g.persist(ctx, m, nil, ""); err != nil {
			delete(m.Votes, principal)
			return out, err
		}
		out.Pending = true
		g.log.Info("binding moment vote recorded", "moment", m.ID, "option", r.OptionIdx, "votes", len(votes), "required", m.Min)
		return out, nil
	}
	d := Delivery{MomentID: m.ID, EnvelopeDigest: m.Env.Digest(), Kind: string(r.Kind), OptionIdx: intPtr(r.OptionIdx),
		Tool: opt.Tool, Server: opt.Server, ActionDigest: opt.ActionDigest}
	var gr *moment.Grant
	if opt.NeedsHuman {
		issued, err := g.grantOption(ctx, m, opt)
		if err != nil {
			delete(m.Votes, principal)
			return out, err
		}
		gr = &issued
		out.AuthorityID = gr.AuthorityID
		d.Authorized = true
		d.Expires = gr.Expires.UTC().Format(time.RFC3339)
	}
	if gr != nil {
		_ = failpoint.Inject(failpoint.MomentGranted)
	}
	if _, err := g.registry.Resolve(ctx, r, principal); err != nil {
		// The registry refused the final record: the authority stays unconsumed and
		// unreachable (no grant names it) until it expires.
		delete(m.Votes, principal)
		return out, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
	}
	m.Resolved, m.Kind, m.ResolvedAt = true, r.Kind, now
	// The resolution and its grant are stored (fsynced) before the grant is filed, so no call
	// uses a grant a restart would not know of; the authority is already in its store.
	if err := g.persist(ctx, m, gr, opt.ActionDigest); err != nil {
		// Not filed: the authority stays unreachable. The registry holds the resolution, so
		// the moment cannot be resolved again in this process (fail closed).
		delete(m.Votes, principal)
		m.Resolved, m.Kind, m.ResolvedAt = false, "", time.Time{}
		return out, err
	}
	if gr != nil {
		g.moments.AddGrant(m, opt.ActionDigest, *gr)
		_ = failpoint.Inject(failpoint.MomentStored)
	}
	m.Settled.Store(true)
	g.moments.Reopen(m.Session, []string{opt.ActionDigest})
	if !m.Carried {
		// A carried moment's session ended with a previous process: nobody would collect it.
		g.moments.Deliver(m.Session, d)
	}
	g.observer.MomentResolved(momentEvent(m), ResolutionEvent{Kind: string(r.Kind), Principal: principal, At: now})
	g.log.Info("binding moment resolved", "moment", m.ID, "resolution", r.Kind, "option", r.OptionIdx,
		"actionDigest", opt.ActionDigest, "authority", out.AuthorityID)
	return out, nil
}

func intPtr(i int) *int { return &i }

// closeOut delivers a non-option resolution and applies its consequence to the session:
// declined refuses the moment's actions until a new moment (§7.3: the question does not
// reopen, the agent stops); question refuses a gate-authored re-escalation of them (§7.2: a
// question-space veto is a reopening, never the same question again).
func (g *gate) closeOut(m *moment.Moment, r *envelope.Resolution) {
	digests := make([]string, len(m.Options))
	for i, o := range m.Options {
		digests[i] = o.ActionDigest
	}
	switch r.Kind {
	case envelope.KindDeclined:
		g.moments.Close(m.Session, digests, ef.EFMomentDeclined)
	case envelope.KindQuestion:
		g.moments.Close(m.Session, digests, ef.EFEscalationRequired)
	}
	if !m.Carried {
		g.moments.Deliver(m.Session, Delivery{MomentID: m.ID, EnvelopeDigest: m.Env.Digest(), Kind: string(r.Kind), Answer: r.Answer})
	}
}

// grantOption issues the authority a resolved option stands for: bound to the escalated act's
// id (or an id minted now for the moment's session), the option's digests, tool and
// destination, this sink and the moment's policy epoch. The caller files the grant once the
// resolution is stored.
func (g *gate) grantOption(ctx context.Context, m *moment.Moment, opt moment.Option) (moment.Grant, error) {
	actID := m.ActID
	if actID == "" {
		id, err := g.ids.New(m.Session)
		if err != nil {
			return moment.Grant{}, fmt.Errorf("sink: minting an act id: %w", err)
		}
		actID = id
	}
	b := g.bindingForOption(actID, opt, m.Epoch)
	a, err := g.issue(ctx, b, m.AuthorityTTL)
	if errors.Is(err, authority.ErrAlreadyIssued) && m.Carried {
		// An authority id derives from its binding, so a restored moment resolved again after
		// a crash between the issue and the stored resolution meets the authority issued
		// then. No grant ever named that one, so nothing can consume it: the option is
		// granted under an act id minted now for the moment's session instead.
		id, idErr := g.ids.New(m.Session)
		if idErr != nil {
			return moment.Grant{}, fmt.Errorf("sink: minting an act id: %w", idErr)
		}
		actID = id
		a, err = g.issue(ctx, g.bindingForOption(actID, opt, m.Epoch), m.AuthorityTTL)
	}
	if err != nil {
		return moment.Grant{}, fmt.Errorf("sink: issuing authority for moment %s: %w", m.ID, err)
	}
	return moment.Grant{ActID: actID, AuthorityID: a.ID, Destination: opt.Destination, MomentID: m.ID, Expires: a.ExpiresAt, Session: m.Session}, nil
}

func (g *gate) bindingForOption(actID string, o moment.Option, epoch int64) authority.Binding {
	return authority.Binding{
		ActID:           actID,
		ArgumentsDigest: o.ArgsDigest,
		ActionDigest:    o.ActionDigest,
		Tool:            o.Tool,
		Destination:     o.Destination,
		SinkID:          g.sinkID,
		PolicyEpoch:     bindingEpoch(epoch),
		Namespace:       g.namespace,
	}
}

// moments lists moments for operators.
func (g *gate) momentsList(_ context.Context, f MomentFilter) ([]Moment, error) {
	if g == nil {
		return nil, errNoGate
	}
	now := g.now()
	g.sweepExpired(now)
	var out []Moment
	for _, m := range g.moments.List() {
		m.Mu.Lock()
		resolved, kind := m.Resolved, m.Kind
		m.Mu.Unlock()
		if f.Session != "" && m.Session != f.Session {
			continue
		}
		if f.Pending && (resolved || !now.Before(m.Expires)) {
			continue
		}
		mm := Moment{
			ID: m.ID, Session: m.Session, Agent: m.Agent, ActID: m.ActID, Envelope: m.Env,
			Digest: m.Env.Digest(), Principals: slices.Clone(m.Principals), Created: m.Created,
			Expires: m.Expires, Resolved: resolved, Resolution: string(kind), Class: string(m.Class),
			GateAuthored: m.GateAuthored, Calls: m.Calls(),
		}
		for _, o := range m.Options {
			if o.NeedsHuman {
				mm.Server, mm.Tool, mm.ActionDigest = o.Server, o.Tool, o.ActionDigest
				break
			}
		}
		out = append(out, mm)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// clip bounds a string an error message or a log line quotes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
