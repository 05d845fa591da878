package sink

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/aeb"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/jcs"
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

// momentOption is one option of a registered moment: the concrete call it authorises.
type OptionX struct {
	Tool, Server, Destination string
	Args                      json.RawMessage // canonical, strict profile
	ArgsDigest, ActionDigest  string
	NeedsHuman                bool // policy escalates this call: a resolution issues authority for it
	// shown is the call as principal surfaces show it: these arguments with the governing
	// rule's masks applied (envelope.Call, "what you see is what you authorise").
	Shown envelope.Call
}

// withShown fills o.shown from o's own canonical arguments, the ones its action digest was
// computed from, masking the values at the rule's pointers. An error (arguments that cannot be
// masked) leaves the option unshowable, and the moment is not offered.
func (o OptionX) WithShown(masks []string) (OptionX, error) {
	args, masked, err := argmask.Apply(o.Args, masks)
	if err != nil {
		return o, err
	}
	o.Shown = envelope.Call{Server: o.Server, Destination: o.Destination, Tool: o.Tool, Args: args, Masked: masked}
	return o, nil
}

// calls returns the shown calls of a moment's options, in order.
func (m *MomentX) Calls() []envelope.Call {
	out := make([]envelope.Call, len(m.Options))
	for i, o := range m.Options {
		c := o.Shown
		c.Args = slices.Clone(c.Args)
		c.Masked = slices.Clone(c.Masked)
		out[i] = c
	}
	return out
}

// moment is one registered binding moment.
type MomentX struct {
	ID           string
	Env          *envelope.Envelope
	Text         string
	Session      string
	Agent        string
	ActID        string // the escalated act (gate-authored moments); "" for proposals
	GateAuthored bool
	Options      []OptionX
	Principals   []string
	Min          int
	SoD          bool
	Epoch        int64
	AuthorityTTL time.Duration
	Created      time.Time
	Expires      time.Time
	Policy, Rule string
	Class        act.ConsequenceClass // for observers: the escalated call's, or the first human option's

	Mu             sync.Mutex // serialises resolutions of this moment
	Votes          map[string]int
	Resolved       bool
	Settled        atomic.Bool // resolved, readable without mu (momentTable.admit)
	Kind           envelope.Kind
	ResolvedAt     time.Time
	ExpiryReported bool // the Observer was told this moment expired
	// carried: the moment was restored from the MomentStore, so its session belonged to a
	// previous process; its agent continues it from any of its sessions.
	Carried bool
}

func (m *MomentX) ref() *MomentRef {
	return &MomentRef{ID: m.ID, Envelope: m.Env, Digest: m.Env.Digest(), Text: m.Text, Expires: m.Expires}
}

type sessionAction struct{ session, actionDigest string }

type PendingKeyX struct{ Session, ActionDigest, Destination string }

// grant is authority issued by a resolved moment, waiting for the agent's call of its action.
type GrantX struct {
	ActID, AuthorityID, Destination, MomentID string
	Expires                                   time.Time
	Session                                   string // the session the act id was minted for
}

// momentTable holds moments, grants, declines and the resolutions waiting for delivery.
type TableX struct {
	mu      sync.Mutex
	byID    map[string]*MomentX
	pending map[PendingKeyX]*MomentX // gate-authored, unresolved: one per escalated action
	grants  map[sessionAction][]GrantX
	// agentGrants and agentPending hold the grants and gate-authored pending moments of
	// carried moments, keyed by the moment's agent instead of its session (sessionAction and
	// pendingKey with the agent in the session field): the session they were made in ended
	// with the process that made them.
	agentGrants  map[sessionAction][]GrantX
	agentPending map[PendingKeyX]*MomentX
	closed       map[sessionAction]ef.EFCode // declined (EFMomentDeclined) or reopened by question
	deliveries   map[string][]Delivery
	sweepAt      int
	nClosed      atomic.Int64
	nDeliver     atomic.Int64

	// open holds the moments registered and not yet seen resolved or expired, for the
	// pending-moment limits (admit); perAgent and perSession are those limits.
	open                 map[*MomentX]struct{}
	PerAgent, PerSession int
}

func NewTableX() *TableX {
	return &TableX{
		byID:         map[string]*MomentX{},
		pending:      map[PendingKeyX]*MomentX{},
		grants:       map[sessionAction][]GrantX{},
		agentGrants:  map[sessionAction][]GrantX{},
		agentPending: map[PendingKeyX]*MomentX{},
		closed:       map[sessionAction]ef.EFCode{},
		deliveries:   map[string][]Delivery{},
		open:         map[*MomentX]struct{}{},
		sweepAt:      minSweep,
	}
}

// takeDeliveries returns and forgets the resolutions waiting for a session.
func (t *TableX) TakeDeliveries(session string) []Delivery {
	if t.nDeliver.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.deliveries[session]
	if len(d) > 0 {
		delete(t.deliveries, session)
		t.nDeliver.Add(-int64(len(d)))
	}
	return d
}

func (t *TableX) Deliver(session string, d Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliveries[session] = append(t.deliveries[session], d)
	t.nDeliver.Add(1)
}

// closedCode reports whether calls of an action in a session are refused after a decline or a
// question-space veto, and with which code.
func (t *TableX) ClosedCode(session, digest string) (ef.EFCode, bool) {
	if t.nClosed.Load() == 0 {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.closed[sessionAction{session, digest}]
	return c, ok
}

func (t *TableX) Declined(session, digest string) bool {
	c, ok := t.ClosedCode(session, digest)
	return ok && c == ef.EFMomentDeclined
}

func (t *TableX) Close(session string, digests []string, code ef.EFCode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range digests {
		k := sessionAction{session, d}
		if _, ok := t.closed[k]; !ok {
			t.nClosed.Add(1)
		}
		t.closed[k] = code
	}
}

func (t *TableX) Reopen(session string, digests []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range digests {
		k := sessionAction{session, d}
		if _, ok := t.closed[k]; ok {
			delete(t.closed, k)
			t.nClosed.Add(-1)
		}
	}
}

// grantFor returns the grant for an action in a session, or of a carried moment of the agent:
// the one for this destination if there is one, else another (whose consume then fails on
// destination, T-D), ok=false if none.
func (t *TableX) GrantFor(session, agent, digest, destination string, now time.Time) (GrantX, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := pickGrant(t.grants, sessionAction{session, digest}, destination, now); ok {
		return g, true
	}
	return pickGrant(t.agentGrants, sessionAction{agent, digest}, destination, now)
}

func pickGrant(grants map[sessionAction][]GrantX, k sessionAction, destination string, now time.Time) (GrantX, bool) {
	list := grants[k][:0]
	for _, g := range grants[k] {
		if now.Before(g.Expires) {
			list = append(list, g)
		}
	}
	if len(list) == 0 {
		delete(grants, k)
		return GrantX{}, false
	}
	grants[k] = list
	for _, g := range list {
		if g.Destination == destination {
			return g, true
		}
	}
	return list[0], true
}

// grantKey is where m's grants for an action are held.
func (t *TableX) grantKey(m *MomentX, digest string) (map[sessionAction][]GrantX, sessionAction) {
	if m.Carried {
		return t.agentGrants, sessionAction{m.Agent, digest}
	}
	return t.grants, sessionAction{m.Session, digest}
}

func (t *TableX) AddGrant(m *MomentX, digest string, g GrantX) {
	t.mu.Lock()
	defer t.mu.Unlock()
	grants, k := t.grantKey(m, digest)
	grants[k] = append(grants[k], g)
}

// dropGrant forgets a grant (consumed, refused or withdrawn), wherever it is held.
func (t *TableX) DropGrant(session, agent, digest, authorityID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropFrom(t.grants, sessionAction{session, digest}, authorityID)
	dropFrom(t.agentGrants, sessionAction{agent, digest}, authorityID)
}

func dropFrom(grants map[sessionAction][]GrantX, k sessionAction, authorityID string) {
	list := grants[k]
	for i, g := range list {
		if g.AuthorityID == authorityID {
			grants[k] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(grants[k]) == 0 {
		delete(grants, k)
	}
}

// grantsOf lists the grants m issued that are still held, for its stored record.
func (t *TableX) GrantsOf(m *MomentX) []GrantRecordX {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []GrantRecordX
	for _, o := range m.Options {
		grants, k := t.grantKey(m, o.ActionDigest)
		for _, g := range grants[k] {
			if g.MomentID == m.ID && !slices.ContainsFunc(out, func(r GrantRecordX) bool { return r.AuthorityID == g.AuthorityID }) {
				out = append(out, GrantRecordX{ActID: g.ActID, AuthorityID: g.AuthorityID, Destination: g.Destination,
					Digest: o.ActionDigest, Expires: g.Expires.UTC()})
			}
		}
	}
	return out
}

func (t *TableX) Get(id string) (*MomentX, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.byID[id]
	return m, ok
}

// pendingFor returns the open gate-authored moment of an escalated action in a session, or of
// a carried moment of the agent.
func (t *TableX) PendingFor(k PendingKeyX, agent string, now time.Time) (*MomentX, bool) {
	if m, ok := t.openPending(t.pending, k, now); ok {
		return m, true
	}
	return t.openPending(t.agentPending, PendingKeyX{agent, k.ActionDigest, k.Destination}, now)
}

func (t *TableX) openPending(pending map[PendingKeyX]*MomentX, k PendingKeyX, now time.Time) (*MomentX, bool) {
	// Lock order is moment.mu before momentTable.mu (Resolve holds a moment while it records
	// grants and deliveries), so the moment is examined after the table is released.
	t.mu.Lock()
	m, ok := pending[k]
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.Mu.Lock()
	open := !m.Resolved && now.Before(m.Expires)
	m.Mu.Unlock()
	if !open {
		t.mu.Lock()
		if pending[k] == m {
			delete(pending, k)
		}
		t.mu.Unlock()
		return nil, false
	}
	return m, true
}

// restore registers a moment loaded from the MomentStore: pending ones count against the
// pending-moment limits again.
func (t *TableX) Restore(m *MomentX, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[m.ID] = m
	if m.Resolved || !now.Before(m.Expires) {
		return
	}
	t.open[m] = struct{}{}
	if m.GateAuthored {
		// A gate-authored moment's first option is the escalated call.
		o := m.Options[0]
		t.agentPending[PendingKeyX{m.Agent, o.ActionDigest, o.Destination}] = m
	}
}

// remove forgets a moment add registered (its record could not be stored).
func (t *TableX) Remove(m *MomentX, pk *PendingKeyX) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, m)
	if t.byID[m.ID] == m {
		delete(t.byID, m.ID)
	}
	if pk != nil && t.pending[*pk] == m {
		delete(t.pending, *pk)
	}
}

// errMomentLimit: the agent or the session has as many pending moments as allowed.
var ErrLimitX = errors.New("sink: pending binding-moment limit reached")

// admit reports whether a new moment of agent in session stays within the pending-moment
// limits, forgetting the open moments that are resolved or expired by now.
func (t *TableX) Admit(agent, session string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.admitLocked(agent, session, now)
}

func (t *TableX) admitLocked(agent, session string, now time.Time) error {
	var byAgent, bySession int
	for m := range t.open {
		if m.Settled.Load() || !now.Before(m.Expires) {
			delete(t.open, m)
			continue
		}
		if m.Agent == agent {
			byAgent++
		}
		if m.Session == session {
			bySession++
		}
	}
	switch {
	case t.PerAgent > 0 && byAgent >= t.PerAgent:
		return fmt.Errorf("%w: agent has %d pending", ErrLimitX, byAgent)
	case t.PerSession > 0 && bySession >= t.PerSession:
		return fmt.Errorf("%w: session has %d pending", ErrLimitX, bySession)
	}
	return nil
}

// add registers m unless it would exceed the pending-moment limits (errMomentLimit).
func (t *TableX) Add(m *MomentX, pk *PendingKeyX, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.admitLocked(m.Agent, m.Session, now); err != nil {
		return err
	}
	t.open[m] = struct{}{}
	if len(t.byID) >= t.sweepAt {
		for id, old := range t.byID {
			if now.Sub(old.Expires) > time.Hour {
				delete(t.byID, id)
			}
		}
		t.sweepAt = max(minSweep, 2*len(t.byID))
	}
	t.byID[m.ID] = m
	if pk != nil {
		t.pending[*pk] = m
	}
	return nil
}

func (t *TableX) List() []*MomentX {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*MomentX, 0, len(t.byID))
	for _, m := range t.byID {
		out = append(out, m)
	}
	return out
}

// momentLimitMessage is what the agent is told when a pending-moment limit refuses a moment.
const momentLimitMessage = "Too many binding moments are pending for this agent or session; " +
	"wait until the principals resolve them (or they expire). Nothing was registered or invoked."

// momentLimit refuses an escalated call whose moment a pending-moment limit refused.
func (g *gate) momentLimit(cl *callState, m *MomentX, err error) Result {
	g.log.Info("escalation refused: too many pending binding moments", "act", m.ActID, "code", ef.EFMomentLimit, "reason", err.Error())
	return g.refuse(cl, ef.EFMomentLimit, momentLimitMessage)
}

// newMomentID returns "bm-" + 32 random hex digits.
func NewIDX() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return "bm-" + hex.EncodeToString(b[:])
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
	pk := PendingKeyX{cl.c.Session, digest, cl.c.Destination}
	if m, ok := g.moments.PendingFor(pk, cl.c.Agent, now); ok {
		res := g.refuse(cl, ef.EFEscalationRequired, "")
		res.Moment = m.ref()
		return res
	}
	ev := cl.dec.Evidence
	if len(ev.Principals) == 0 {
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision and policy names no principal to make it.")
	}
	requested, err := OptionX{
		Tool: cl.c.Tool, Server: cl.c.Server, Destination: cl.c.Destination,
		Args: cl.cand.Arguments, ArgsDigest: cl.cand.ArgumentsDigest(), ActionDigest: digest, NeedsHuman: true,
	}.WithShown(cl.dec.MaskArguments)
	if err != nil {
		g.log.Error(err, "escalated call cannot be shown to a principal; no binding moment", "act", cl.cand.Act.CandidateActID)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; it cannot be shown to a principal.")
	}
	opts := []OptionX{requested}
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
	m := &MomentX{
		ID: NewIDX(), Env: env, Session: cl.c.Session, Agent: cl.c.Agent,
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
		if errors.Is(err, ErrLimitX) {
			return g.momentLimit(cl, m, err)
		}
		g.log.Error(err, "binding moment not stored", "act", m.ActID, "moment", m.ID)
		return g.refuse(cl, ef.EFStoreUnavailable, "This call needs a human decision; the binding moment could not be stored.")
	}
	g.observer.MomentEmitted(m.event())
	g.log.Info("escalated to a binding moment", "act", m.ActID, "actionDigest", digest, "moment", m.ID,
		"envelope", env.Digest(), "policy", cl.dec.Policy, "rule", cl.dec.Rule)
	res := g.refuse(cl, ef.EFEscalationRequired, "")
	res.Moment = m.ref()
	return res
}

// alternative builds the option of a declared alternative: the merge patch applied to the
// requested arguments, canonicalized in the strict profile. An alternative that fails, or
// repeats an option already offered, is left out.
func (g *gate) alternative(cl *callState, alt Alternative, have []OptionX) (OptionX, bool) {
	patched, err := MergePatch(cl.cand.Arguments, alt.Args)
	if err != nil {
		return OptionX{}, false
	}
	canon, err := jcs.Canonicalize(patched, jcs.Strict)
	if err != nil {
		return OptionX{}, false
	}
	d, err := action.Digest(cl.c.Tool, canon, jcs.Strict)
	if err != nil {
		return OptionX{}, false
	}
	for _, o := range have {
		if o.ActionDigest == d {
			return OptionX{}, false
		}
	}
	o, err := OptionX{
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
func (g *gate) addMoment(ctx context.Context, m *MomentX, pk *PendingKeyX, now time.Time) error {
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
func (g *gate) register(ctx context.Context, m *MomentX) error {
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
	if err := checkHatches(p.Hatches); err != nil {
		return momentRefused(clip(err.Error(), 180))
	}
	servers := g.policy.Servers()
	var (
		opts       []OptionX
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
		mo, err := OptionX{Tool: o.Tool, Server: server, Destination: dest, Args: canon,
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
		Meta:          proposalMeta(p),
	})
	if err != nil {
		return momentRefused(problemSummary(err))
	}
	if g.remote != nil {
		return g.proposeRemote(ctx, session, agent, env, opts)
	}
	now := g.now()
	m := &MomentX{
		ID: NewIDX(), Env: env, Session: session, Agent: agent, Options: opts,
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
		if !errors.Is(err, ErrLimitX) {
			g.log.Error(err, "binding moment not stored", "moment", m.ID)
			return denyResult(ef.EFStoreUnavailable, "The binding moment could not be stored; nothing was registered.")
		}
		g.log.Info("binding moment refused: too many pending", "code", ef.EFMomentLimit, "reason", err.Error())
		return denyResult(ef.EFMomentLimit, momentLimitMessage)
	}
	g.observer.MomentEmitted(m.event())
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
		Moment:  m.ref(),
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
		g.observer.MomentResolved(m.event(), ResolutionEvent{Kind: string(r.Kind), Principal: principal, At: now})
		return out, nil
	}
	opt := m.Options[r.OptionIdx]
	out.OptionID = fmt.Sprintf("%d", r.OptionIdx)
	m.Votes[principal] = r.OptionIdx
	votes := m.VotersFor(r.OptionIdx)
	out.Votes = len(votes)
	authorized, err := g.quorum(m, r.OptionIdx, votes, now)
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
	var gr *GrantX
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
	g.observer.MomentResolved(m.event(), ResolutionEvent{Kind: string(r.Kind), Principal: principal, At: now})
	g.log.Info("binding moment resolved", "moment", m.ID, "resolution", r.Kind, "option", r.OptionIdx,
		"actionDigest", opt.ActionDigest, "authority", out.AuthorityID)
	return out, nil
}

func intPtr(i int) *int { return &i }

// votersFor lists the principals who chose option idx, sorted.
func (m *MomentX) VotersFor(idx int) []string {
	var out []string
	for p, i := range m.Votes {
		if i == idx {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// closeOut delivers a non-option resolution and applies its consequence to the session:
// declined refuses the moment's actions until a new moment (§7.3: the question does not
// reopen, the agent stops); question refuses a gate-authored re-escalation of them (§7.2: a
// question-space veto is a reopening, never the same question again).
func (g *gate) closeOut(m *MomentX, r *envelope.Resolution) {
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

// quorum decides, with the AEB evidence chain, whether the principals who chose option idx
// fill the rule's human-authorization requirement: minPrincipals distinct principals, never
// the initiating agent (and, with separation of duties, never the sink), each a verified
// resolution of this envelope for exactly this action (action-evidence-boundary "Evaluate AEC
// Evidence Satisfaction", "Make the Local Authorization Decision").
func (g *gate) quorum(m *MomentX, idx int, voters []string, now time.Time) (bool, error) {
	opt := m.Options[idx]
	caid, err := aeb.CAIDFromDigest(aeb.ActionTypeToolCall, opt.ActionDigest)
	if err != nil {
		return false, fmt.Errorf("sink: quorum: %w", err)
	}
	norm := normalizedAction(opt, g.sinkID)
	op := aeb.Operation{
		OperationID:            aebID("moment", m.ID),
		ProviderID:             aebID("dest", opt.Destination),
		InitiatorID:            aebID("p", m.Agent),
		ExecutorID:             aebID("p", g.sinkID),
		CAID:                   caid,
		NormalizedActionDigest: norm,
		Requirements: []aeb.Requirement{{
			Role: aeb.RoleHumanAuthorization, PrincipalKind: aeb.PrincipalHuman, Minimum: m.Min,
			DistinctPrincipals: true, ExcludeInitiator: true, ExcludeExecutor: m.SoD,
		}},
	}
	if len(voters) > aeb.MaxEvidence {
		voters = voters[:aeb.MaxEvidence]
	}
	evidence := make([]aeb.Evidence, 0, len(voters))
	for _, p := range voters {
		unit := EvidenceDigest([]byte(m.Env.Digest() + "\x00" + p + "\x00" + opt.ActionDigest))
		evidence = append(evidence, aeb.Evidence{
			WrapperDigest:      unit,
			NativeReplayUnit:   unit,
			NativeVerification: aeb.VerificationVerified,
			MappedCAID:         caid,
			MappedActionDigest: norm,
			Role:               aeb.RoleHumanAuthorization,
			PrincipalKind:      aeb.PrincipalHuman,
			PrincipalID:        aebID("p", p),
			Status: aeb.Status{Verdict: aeb.StatusCurrent, AuthorityPinned: true,
				CheckedAt: now, ValidUntil: m.Expires},
		})
	}
	a, err := aeb.Assess(op, evidence, aeb.PolicyPermit, now)
	if err != nil {
		return false, fmt.Errorf("sink: quorum: %w", err)
	}
	return a.Authorization == aeb.AuthorizationAuthorized, nil
}

// normalizedAction is the digest of the bound projection an authority names: tool, arguments
// digest, destination and sink (internal/aeb doc: "NormalizedActionDigest").
func normalizedAction(o OptionX, sinkID string) string {
	b, _ := json.Marshal([]string{"actgate.normalized-action.1", o.Tool, o.ArgsDigest, o.Destination, sinkID})
	return EvidenceDigest(b)
}

// aebID spells an identity in the AEB identifier syntax: as is when it fits, else a digest of
// it under a prefix (so one identity always maps to one identifier and two never collide).
func aebID(prefix, s string) string {
	if s != "" && len(s) <= 200 && isAEBIdent(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return prefix + "-" + hex.EncodeToString(sum[:20])
}

func isAEBIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == ':' || c == '_' || c == '.' || c == '@' || c == '/' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// grantOption issues the authority a resolved option stands for: bound to the escalated act's
// id (or an id minted now for the moment's session), the option's digests, tool and
// destination, this sink and the moment's policy epoch. The caller files the grant once the
// resolution is stored.
func (g *gate) grantOption(ctx context.Context, m *MomentX, opt OptionX) (GrantX, error) {
	actID := m.ActID
	if actID == "" {
		id, err := g.ids.New(m.Session)
		if err != nil {
			return GrantX{}, fmt.Errorf("sink: minting an act id: %w", err)
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
			return GrantX{}, fmt.Errorf("sink: minting an act id: %w", idErr)
		}
		actID = id
		a, err = g.issue(ctx, g.bindingForOption(actID, opt, m.Epoch), m.AuthorityTTL)
	}
	if err != nil {
		return GrantX{}, fmt.Errorf("sink: issuing authority for moment %s: %w", m.ID, err)
	}
	return GrantX{ActID: actID, AuthorityID: a.ID, Destination: opt.Destination, MomentID: m.ID, Expires: a.ExpiresAt, Session: m.Session}, nil
}

func (g *gate) bindingForOption(actID string, o OptionX, epoch int64) authority.Binding {
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
