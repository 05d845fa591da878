package sink

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/aeb"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/sink/moment"
)

// momentRef is what a Result carries of a registered moment.
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
const DefaultOffer = moment.DefaultOffer

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
	draft := []envelope.DraftOption{moment.RequestedOption(cl.c.Tool, cl.cand.Arguments)}
	for _, alt := range cl.dec.Alternatives {
		if len(opts) == envelope.MaxOptions {
			break
		}
		o, ok := g.alternative(cl, alt, opts)
		if !ok {
			continue
		}
		opts = append(opts, o)
		draft = append(draft, moment.AlternativeOption(alt.Label, alt.Reasoning, o.Tool, o.Args))
	}
	if len(opts) < envelope.MinOptions {
		g.log.Info("escalation without a usable alternative; no binding moment", "act", cl.cand.Act.CandidateActID,
			"policy", cl.dec.Policy, "rule", cl.dec.Rule)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; policy declares no alternative to offer.")
	}
	env, err := envelope.Build(moment.GateDraft(moment.Briefing{
		Tool: cl.c.Tool, Server: cl.c.Server, Destination: cl.c.Destination, Class: string(cl.class),
		ArgsDigest: cl.cand.ArgumentsDigest(), ActionDigest: digest, Agent: cl.c.Agent,
		ActID: cl.cand.Act.CandidateActID, Provenance: string(cl.provSrc), Rule: cl.dec.Rule, Budgets: cl.budgetFindings,
	}, draft))
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
	patched, err := moment.MergePatch(cl.cand.Arguments, alt.Args)
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
		out = append(out, m.View(resolved, kind))
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
