package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/failpoint"
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
