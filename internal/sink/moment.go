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
type momentOption struct {
	tool, server, destination string
	args                      json.RawMessage // canonical, strict profile
	argsDigest, actionDigest  string
	needsHuman                bool // policy escalates this call: a resolution issues authority for it
	// shown is the call as principal surfaces show it: these arguments with the governing
	// rule's masks applied (envelope.Call, "what you see is what you authorise").
	shown envelope.Call
}

// withShown fills o.shown from o's own canonical arguments, the ones its action digest was
// computed from, masking the values at the rule's pointers. An error (arguments that cannot be
// masked) leaves the option unshowable, and the moment is not offered.
func (o momentOption) withShown(masks []string) (momentOption, error) {
	args, masked, err := argmask.Apply(o.args, masks)
	if err != nil {
		return o, err
	}
	o.shown = envelope.Call{Server: o.server, Destination: o.destination, Tool: o.tool, Args: args, Masked: masked}
	return o, nil
}

// calls returns the shown calls of a moment's options, in order.
func (m *moment) calls() []envelope.Call {
	out := make([]envelope.Call, len(m.options))
	for i, o := range m.options {
		c := o.shown
		c.Args = slices.Clone(c.Args)
		c.Masked = slices.Clone(c.Masked)
		out[i] = c
	}
	return out
}

// moment is one registered binding moment.
type moment struct {
	id           string
	env          *envelope.Envelope
	text         string
	session      string
	agent        string
	actID        string // the escalated act (gate-authored moments); "" for proposals
	gateAuthored bool
	options      []momentOption
	principals   []string
	min          int
	sod          bool
	epoch        int64
	authorityTTL time.Duration
	created      time.Time
	expires      time.Time
	policy, rule string
	class        act.ConsequenceClass // for observers: the escalated call's, or the first human option's

	mu             sync.Mutex // serialises resolutions of this moment
	votes          map[string]int
	resolved       bool
	settled        atomic.Bool // resolved, readable without mu (momentTable.admit)
	kind           envelope.Kind
	resolvedAt     time.Time
	expiryReported bool // the Observer was told this moment expired
	// carried: the moment was restored from the MomentStore, so its session belonged to a
	// previous process; its agent continues it from any of its sessions.
	carried bool
}

func (m *moment) ref() *MomentRef {
	return &MomentRef{ID: m.id, Envelope: m.env, Digest: m.env.Digest(), Text: m.text, Expires: m.expires}
}

type sessionAction struct{ session, actionDigest string }

type pendingKey struct{ session, actionDigest, destination string }

// grant is authority issued by a resolved moment, waiting for the agent's call of its action.
type grant struct {
	actID, authorityID, destination, momentID string
	expires                                   time.Time
	session                                   string // the session the act id was minted for
}

// momentTable holds moments, grants, declines and the resolutions waiting for delivery.
type momentTable struct {
	mu      sync.Mutex
	byID    map[string]*moment
	pending map[pendingKey]*moment // gate-authored, unresolved: one per escalated action
	grants  map[sessionAction][]grant
	// agentGrants and agentPending hold the grants and gate-authored pending moments of
	// carried moments, keyed by the moment's agent instead of its session (sessionAction and
	// pendingKey with the agent in the session field): the session they were made in ended
	// with the process that made them.
	agentGrants  map[sessionAction][]grant
	agentPending map[pendingKey]*moment
	closed       map[sessionAction]ef.EFCode // declined (EFMomentDeclined) or reopened by question
	deliveries   map[string][]Delivery
	sweepAt      int
	nClosed      atomic.Int64
	nDeliver     atomic.Int64

	// open holds the moments registered and not yet seen resolved or expired, for the
	// pending-moment limits (admit); perAgent and perSession are those limits.
	open                 map[*moment]struct{}
	perAgent, perSession int
}

func newMomentTable() *momentTable {
	return &momentTable{
		byID:         map[string]*moment{},
		pending:      map[pendingKey]*moment{},
		grants:       map[sessionAction][]grant{},
		agentGrants:  map[sessionAction][]grant{},
		agentPending: map[pendingKey]*moment{},
		closed:       map[sessionAction]ef.EFCode{},
		deliveries:   map[string][]Delivery{},
		open:         map[*moment]struct{}{},
		sweepAt:      minSweep,
	}
}

// takeDeliveries returns and forgets the resolutions waiting for a session.
func (t *momentTable) takeDeliveries(session string) []Delivery {
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

func (t *momentTable) deliver(session string, d Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliveries[session] = append(t.deliveries[session], d)
	t.nDeliver.Add(1)
}

// closedCode reports whether calls of an action in a session are refused after a decline or a
// question-space veto, and with which code.
func (t *momentTable) closedCode(session, digest string) (ef.EFCode, bool) {
	if t.nClosed.Load() == 0 {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.closed[sessionAction{session, digest}]
	return c, ok
}

func (t *momentTable) declined(session, digest string) bool {
	c, ok := t.closedCode(session, digest)
	return ok && c == ef.EFMomentDeclined
}

func (t *momentTable) close(session string, digests []string, code ef.EFCode) {
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

func (t *momentTable) reopen(session string, digests []string) {
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
func (t *momentTable) grantFor(session, agent, digest, destination string, now time.Time) (grant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := pickGrant(t.grants, sessionAction{session, digest}, destination, now); ok {
		return g, true
	}
	return pickGrant(t.agentGrants, sessionAction{agent, digest}, destination, now)
}

func pickGrant(grants map[sessionAction][]grant, k sessionAction, destination string, now time.Time) (grant, bool) {
	list := grants[k][:0]
	for _, g := range grants[k] {
		if now.Before(g.expires) {
			list = append(list, g)
		}
	}
	if len(list) == 0 {
		delete(grants, k)
		return grant{}, false
	}
	grants[k] = list
	for _, g := range list {
		if g.destination == destination {
			return g, true
		}
	}
	return list[0], true
}

// grantKey is where m's grants for an action are held.
func (t *momentTable) grantKey(m *moment, digest string) (map[sessionAction][]grant, sessionAction) {
	if m.carried {
		return t.agentGrants, sessionAction{m.agent, digest}
	}
	return t.grants, sessionAction{m.session, digest}
}

func (t *momentTable) addGrant(m *moment, digest string, g grant) {
	t.mu.Lock()
	defer t.mu.Unlock()
	grants, k := t.grantKey(m, digest)
	grants[k] = append(grants[k], g)
}

// dropGrant forgets a grant (consumed, refused or withdrawn), wherever it is held.
func (t *momentTable) dropGrant(session, agent, digest, authorityID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropFrom(t.grants, sessionAction{session, digest}, authorityID)
	dropFrom(t.agentGrants, sessionAction{agent, digest}, authorityID)
}

func dropFrom(grants map[sessionAction][]grant, k sessionAction, authorityID string) {
	list := grants[k]
	for i, g := range list {
		if g.authorityID == authorityID {
			grants[k] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(grants[k]) == 0 {
		delete(grants, k)
	}
}

// grantsOf lists the grants m issued that are still held, for its stored record.
func (t *momentTable) grantsOf(m *moment) []grantRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []grantRecord
	for _, o := range m.options {
		grants, k := t.grantKey(m, o.actionDigest)
		for _, g := range grants[k] {
			if g.momentID == m.id && !slices.ContainsFunc(out, func(r grantRecord) bool { return r.AuthorityID == g.authorityID }) {
				out = append(out, grantRecord{ActID: g.actID, AuthorityID: g.authorityID, Destination: g.destination,
					Digest: o.actionDigest, Expires: g.expires.UTC()})
			}
		}
	}
	return out
}

func (t *momentTable) get(id string) (*moment, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.byID[id]
	return m, ok
}

// pendingFor returns the open gate-authored moment of an escalated action in a session, or of
// a carried moment of the agent.
func (t *momentTable) pendingFor(k pendingKey, agent string, now time.Time) (*moment, bool) {
	if m, ok := t.openPending(t.pending, k, now); ok {
		return m, true
	}
	return t.openPending(t.agentPending, pendingKey{agent, k.actionDigest, k.destination}, now)
}

func (t *momentTable) openPending(pending map[pendingKey]*moment, k pendingKey, now time.Time) (*moment, bool) {
	// Lock order is moment.mu before momentTable.mu (Resolve holds a moment while it records
	// grants and deliveries), so the moment is examined after the table is released.
	t.mu.Lock()
	m, ok := pending[k]
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	open := !m.resolved && now.Before(m.expires)
	m.mu.Unlock()
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
func (t *momentTable) restore(m *moment, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[m.id] = m
	if m.resolved || !now.Before(m.expires) {
		return
	}
	t.open[m] = struct{}{}
	if m.gateAuthored {
		// A gate-authored moment's first option is the escalated call.
		o := m.options[0]
		t.agentPending[pendingKey{m.agent, o.actionDigest, o.destination}] = m
	}
}

// remove forgets a moment add registered (its record could not be stored).
func (t *momentTable) remove(m *moment, pk *pendingKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, m)
	if t.byID[m.id] == m {
		delete(t.byID, m.id)
	}
	if pk != nil && t.pending[*pk] == m {
		delete(t.pending, *pk)
	}
}

// errMomentLimit: the agent or the session has as many pending moments as allowed.
var errMomentLimit = errors.New("sink: pending binding-moment limit reached")

// admit reports whether a new moment of agent in session stays within the pending-moment
// limits, forgetting the open moments that are resolved or expired by now.
func (t *momentTable) admit(agent, session string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.admitLocked(agent, session, now)
}

func (t *momentTable) admitLocked(agent, session string, now time.Time) error {
	var byAgent, bySession int
	for m := range t.open {
		if m.settled.Load() || !now.Before(m.expires) {
			delete(t.open, m)
			continue
		}
		if m.agent == agent {
			byAgent++
		}
		if m.session == session {
			bySession++
		}
	}
	switch {
	case t.perAgent > 0 && byAgent >= t.perAgent:
		return fmt.Errorf("%w: agent has %d pending", errMomentLimit, byAgent)
	case t.perSession > 0 && bySession >= t.perSession:
		return fmt.Errorf("%w: session has %d pending", errMomentLimit, bySession)
	}
	return nil
}

// add registers m unless it would exceed the pending-moment limits (errMomentLimit).
func (t *momentTable) add(m *moment, pk *pendingKey, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.admitLocked(m.agent, m.session, now); err != nil {
		return err
	}
	t.open[m] = struct{}{}
	if len(t.byID) >= t.sweepAt {
		for id, old := range t.byID {
			if now.Sub(old.expires) > time.Hour {
				delete(t.byID, id)
			}
		}
		t.sweepAt = max(minSweep, 2*len(t.byID))
	}
	t.byID[m.id] = m
	if pk != nil {
		t.pending[*pk] = m
	}
	return nil
}

func (t *momentTable) list() []*moment {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*moment, 0, len(t.byID))
	for _, m := range t.byID {
		out = append(out, m)
	}
	return out
}

// momentLimitMessage is what the agent is told when a pending-moment limit refuses a moment.
const momentLimitMessage = "Too many binding moments are pending for this agent or session; " +
	"wait until the principals resolve them (or they expire). Nothing was registered or invoked."

// momentLimit refuses an escalated call whose moment a pending-moment limit refused.
func (g *gate) momentLimit(cl *callState, m *moment, err error) Result {
	g.log.Info("escalation refused: too many pending binding moments", "act", m.actID, "code", ef.EFMomentLimit, "reason", err.Error())
	return g.refuse(cl, ef.EFMomentLimit, momentLimitMessage)
}

// newMomentID returns "bm-" + 32 random hex digits.
func newMomentID() string {
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
	if code, ok := g.moments.closedCode(cl.c.Session, digest); ok {
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
	gr, granted := g.moments.grantFor(cl.c.Session, cl.c.Agent, digest, cl.c.Destination, g.now())
	if granted {
		// The call continues the act the principal authorised: its id is the escalated act's
		// (or the one minted at resolution), bound into the authority, and so is its session
		// (another one only for a carried moment, whose session ended with a previous process).
		cl.cand.Act.CandidateActID = gr.actID
		cl.cand.Act.Freshness.SessionID = gr.session
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
	res, err := g.dispatch(ctx, cl, inv, k, entry, gr.expires, nil)
	switch {
	case res.Allowed, res.Code == ef.EF005, res.Code == ef.EF002:
		g.moments.dropGrant(cl.c.Session, cl.c.Agent, digest, gr.authorityID)
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
	pk := pendingKey{cl.c.Session, digest, cl.c.Destination}
	if m, ok := g.moments.pendingFor(pk, cl.c.Agent, now); ok {
		res := g.refuse(cl, ef.EFEscalationRequired, "")
		res.Moment = m.ref()
		return res
	}
	ev := cl.dec.Evidence
	if len(ev.Principals) == 0 {
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision and policy names no principal to make it.")
	}
	requested, err := momentOption{
		tool: cl.c.Tool, server: cl.c.Server, destination: cl.c.Destination,
		args: cl.cand.Arguments, argsDigest: cl.cand.ArgumentsDigest(), actionDigest: digest, needsHuman: true,
	}.withShown(cl.dec.MaskArguments)
	if err != nil {
		g.log.Error(err, "escalated call cannot be shown to a principal; no binding moment", "act", cl.cand.Act.CandidateActID)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; it cannot be shown to a principal.")
	}
	opts := []momentOption{requested}
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
			Tool:      o.tool,
			Args:      o.args,
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
	m := &moment{
		id: newMomentID(), env: env, session: cl.c.Session, agent: cl.c.Agent,
		actID: cl.cand.Act.CandidateActID, gateAuthored: true, options: opts,
		principals: slices.Clone(ev.Principals), min: minPrincipals(ev), sod: ev.SeparationOfDuties,
		epoch: cl.dec.Epoch, authorityTTL: g.authorityTTLFor(cl.dec), created: now,
		expires: now.Add(g.momentTTL), policy: cl.dec.Policy, rule: cl.dec.Rule, votes: map[string]int{},
		class: cl.class,
	}
	if err := g.moments.admit(m.agent, m.session, now); err != nil {
		return g.momentLimit(cl, m, err)
	}
	if err := g.register(ctx, m); err != nil {
		g.log.Error(err, "binding moment not registered", "act", m.actID)
		return g.refuse(cl, ef.EFEscalationRequired, "This call needs a human decision; the binding moment could not be registered.")
	}
	if err := g.addMoment(ctx, m, &pk, now); err != nil {
		if errors.Is(err, errMomentLimit) {
			return g.momentLimit(cl, m, err)
		}
		g.log.Error(err, "binding moment not stored", "act", m.actID, "moment", m.id)
		return g.refuse(cl, ef.EFStoreUnavailable, "This call needs a human decision; the binding moment could not be stored.")
	}
	g.observer.MomentEmitted(m.event())
	g.log.Info("escalated to a binding moment", "act", m.actID, "actionDigest", digest, "moment", m.id,
		"envelope", env.Digest(), "policy", cl.dec.Policy, "rule", cl.dec.Rule)
	res := g.refuse(cl, ef.EFEscalationRequired, "")
	res.Moment = m.ref()
	return res
}

// alternative builds the option of a declared alternative: the merge patch applied to the
// requested arguments, canonicalized in the strict profile. An alternative that fails, or
// repeats an option already offered, is left out.
func (g *gate) alternative(cl *callState, alt Alternative, have []momentOption) (momentOption, bool) {
	patched, err := MergePatch(cl.cand.Arguments, alt.Args)
	if err != nil {
		return momentOption{}, false
	}
	canon, err := jcs.Canonicalize(patched, jcs.Strict)
	if err != nil {
		return momentOption{}, false
	}
	d, err := action.Digest(cl.c.Tool, canon, jcs.Strict)
	if err != nil {
		return momentOption{}, false
	}
	for _, o := range have {
		if o.actionDigest == d {
			return momentOption{}, false
		}
	}
	o, err := momentOption{
		tool: cl.c.Tool, server: cl.c.Server, destination: cl.c.Destination,
		args: canon, argsDigest: jcs.Digest(canon), actionDigest: d, needsHuman: true,
	}.withShown(cl.dec.MaskArguments)
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
func (g *gate) addMoment(ctx context.Context, m *moment, pk *pendingKey, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := g.moments.add(m, pk, now); err != nil {
		return err
	}
	if err := g.persist(ctx, m, nil, ""); err != nil {
		g.moments.remove(m, pk)
		return err
	}
	return nil
}

// register renders the moment and records its envelope in the registry, which refuses an
// envelope identical to one already emitted (envelope-04 §12.5).
func (g *gate) register(ctx context.Context, m *moment) error {
	var b bytes.Buffer
	if err := (envelope.TextRenderer{}).Render(&b, m.env); err == nil {
		m.text = b.String()
	}
	opts := envelope.EmitOptions{TTL: g.momentTTL}
	if len(m.principals) == 1 {
		opts.Principal = m.principals[0]
	}
	_, err := g.registry.Emit(ctx, m.env, opts)
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
	res.Resolutions = append(res.Resolutions, g.moments.takeDeliveries(session)...)
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
		opts       []momentOption
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
		mo, err := momentOption{tool: o.Tool, server: server, destination: dest, args: canon,
			argsDigest: jcs.Digest(canon), actionDigest: digest}.withShown(d.MaskArguments)
		if err != nil {
			return momentRefused(fmt.Sprintf("Option %d: the call cannot be shown to a principal.", i))
		}
		switch d.Outcome {
		case PolicyAllow, PolicyPermit:
		case PolicyEscalate:
			mo.needsHuman = true
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
	m := &moment{
		id: newMomentID(), env: env, session: session, agent: agent, options: opts,
		principals: principals, min: minPrincipals(req.Evidence), sod: req.Evidence.SeparationOfDuties,
		epoch: req.Epoch, authorityTTL: g.authorityTTLFor(*req), created: now, expires: now.Add(g.momentTTL),
		policy: req.Policy, rule: req.Rule, votes: map[string]int{}, class: proposalClass(req, opts),
	}
	if err := g.moments.admit(agent, session, now); err != nil {
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
		if !errors.Is(err, errMomentLimit) {
			g.log.Error(err, "binding moment not stored", "moment", m.id)
			return denyResult(ef.EFStoreUnavailable, "The binding moment could not be stored; nothing was registered.")
		}
		g.log.Info("binding moment refused: too many pending", "code", ef.EFMomentLimit, "reason", err.Error())
		return denyResult(ef.EFMomentLimit, momentLimitMessage)
	}
	g.observer.MomentEmitted(m.event())
	// A new moment about these actions lifts an earlier decline or reopening of them.
	digests := make([]string, len(opts))
	for i, o := range opts {
		digests[i] = o.actionDigest
	}
	g.moments.reopen(session, digests)
	g.log.Info("binding moment proposed", "moment", m.id, "envelope", env.Digest(), "options", len(opts),
		"policy", m.policy, "rule", m.rule)
	return Result{
		Allowed: true,
		Moment:  m.ref(),
		Message: fmt.Sprintf("Binding moment %s awaits a decision by %d of the principals policy names.", m.id, m.min),
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
	m, ok := g.moments.get(momentID)
	if !ok {
		return ResolveResult{}, fmt.Errorf("%w: %s", ErrMomentNotFound, clip(momentID, 64))
	}
	r, err := envelope.ParseResolution(raw)
	if err != nil {
		return ResolveResult{}, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := g.now()
	out := ResolveResult{MomentID: m.id, Kind: string(r.Kind), Required: m.min}
	switch {
	case r.EnvelopeDigest != m.env.Digest():
		// §12.5: a resolution names its envelope; one naming another is not a decision.
		return out, fmt.Errorf("%w: the resolution names another envelope", ErrResolutionInvalid)
	case m.resolved:
		return out, fmt.Errorf("%w: %s", ErrMomentResolved, m.id)
	case !now.Before(m.expires):
		return out, fmt.Errorf("%w: %s expired at %s", ErrMomentExpired, m.id, m.expires.UTC().Format(time.RFC3339))
	case principal == "":
		return out, fmt.Errorf("%w: no principal", ErrNotPrincipal)
	case principal == m.agent, m.sod && principal == g.sinkID:
		return out, fmt.Errorf("%w: %s", ErrSelfResolution, clip(principal, 64))
	case !slices.Contains(m.principals, principal):
		return out, fmt.Errorf("%w: %s", ErrNotPrincipal, clip(principal, 64))
	}
	if _, voted := m.votes[principal]; voted {
		return out, fmt.Errorf("%w: %s already resolved %s", ErrMomentResolved, clip(principal, 64), m.id)
	}
	if err := envelope.Verify(m.env, r); err != nil {
		return out, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
	}
	if r.Kind != envelope.KindOption {
		// answer, question, declined: final, whoever of the principals makes it.
		if _, err := g.registry.Resolve(ctx, r, principal); err != nil {
			return out, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
		}
		m.resolved, m.kind, m.resolvedAt = true, r.Kind, now
		if err := g.persist(ctx, m, nil, ""); err != nil {
			// The registry holds the resolution, so the moment cannot be resolved again in
			// this process: it stays unresolved and refuses (fail closed).
			m.resolved, m.kind, m.resolvedAt = false, "", time.Time{}
			return out, err
		}
		m.settled.Store(true)
		g.closeOut(m, r)
		g.log.Info("binding moment resolved", "moment", m.id, "resolution", r.Kind)
		g.observer.MomentResolved(m.event(), ResolutionEvent{Kind: string(r.Kind), Principal: principal, At: now})
		return out, nil
	}
	opt := m.options[r.OptionIdx]
	out.OptionID = fmt.Sprintf("%d", r.OptionIdx)
	m.votes[principal] = r.OptionIdx
	votes := m.votersFor(r.OptionIdx)
	out.Votes = len(votes)
	authorized, err := g.quorum(m, r.OptionIdx, votes, now)
	if err != nil {
		delete(m.votes, principal)
		return out, err
	}
	if !authorized {
		if err := g.persist(ctx, m, nil, ""); err != nil {
			delete(m.votes, principal)
			return out, err
		}
		out.Pending = true
		g.log.Info("binding moment vote recorded", "moment", m.id, "option", r.OptionIdx, "votes", len(votes), "required", m.min)
		return out, nil
	}
	d := Delivery{MomentID: m.id, EnvelopeDigest: m.env.Digest(), Kind: string(r.Kind), OptionIdx: intPtr(r.OptionIdx),
		Tool: opt.tool, Server: opt.server, ActionDigest: opt.actionDigest}
	var gr *grant
	if opt.needsHuman {
		issued, err := g.grantOption(ctx, m, opt)
		if err != nil {
			delete(m.votes, principal)
			return out, err
		}
		gr = &issued
		out.AuthorityID = gr.authorityID
		d.Authorized = true
		d.Expires = gr.expires.UTC().Format(time.RFC3339)
	}
	if gr != nil {
		_ = failpoint.Inject(failpoint.MomentGranted)
	}
	if _, err := g.registry.Resolve(ctx, r, principal); err != nil {
		// The registry refused the final record: the authority stays unconsumed and
		// unreachable (no grant names it) until it expires.
		delete(m.votes, principal)
		return out, fmt.Errorf("%w: %w", ErrResolutionInvalid, err)
	}
	m.resolved, m.kind, m.resolvedAt = true, r.Kind, now
	// The resolution and its grant are stored (fsynced) before the grant is filed, so no call
	// uses a grant a restart would not know of; the authority is already in its store.
	if err := g.persist(ctx, m, gr, opt.actionDigest); err != nil {
		// Not filed: the authority stays unreachable. The registry holds the resolution, so
		// the moment cannot be resolved again in this process (fail closed).
		delete(m.votes, principal)
		m.resolved, m.kind, m.resolvedAt = false, "", time.Time{}
		return out, err
	}
	if gr != nil {
		g.moments.addGrant(m, opt.actionDigest, *gr)
		_ = failpoint.Inject(failpoint.MomentStored)
	}
	m.settled.Store(true)
	g.moments.reopen(m.session, []string{opt.actionDigest})
	if !m.carried {
		// A carried moment's session ended with a previous process: nobody would collect it.
		g.moments.deliver(m.session, d)
	}
	g.observer.MomentResolved(m.event(), ResolutionEvent{Kind: string(r.Kind), Principal: principal, At: now})
	g.log.Info("binding moment resolved", "moment", m.id, "resolution", r.Kind, "option", r.OptionIdx,
		"actionDigest", opt.actionDigest, "authority", out.AuthorityID)
	return out, nil
}

func intPtr(i int) *int { return &i }

// votersFor lists the principals who chose option idx, sorted.
func (m *moment) votersFor(idx int) []string {
	var out []string
	for p, i := range m.votes {
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
func (g *gate) closeOut(m *moment, r *envelope.Resolution) {
	digests := make([]string, len(m.options))
	for i, o := range m.options {
		digests[i] = o.actionDigest
	}
	switch r.Kind {
	case envelope.KindDeclined:
		g.moments.close(m.session, digests, ef.EFMomentDeclined)
	case envelope.KindQuestion:
		g.moments.close(m.session, digests, ef.EFEscalationRequired)
	}
	if !m.carried {
		g.moments.deliver(m.session, Delivery{MomentID: m.id, EnvelopeDigest: m.env.Digest(), Kind: string(r.Kind), Answer: r.Answer})
	}
}

// quorum decides, with the AEB evidence chain, whether the principals who chose option idx
// fill the rule's human-authorization requirement: minPrincipals distinct principals, never
// the initiating agent (and, with separation of duties, never the sink), each a verified
// resolution of this envelope for exactly this action (action-evidence-boundary "Evaluate AEC
// Evidence Satisfaction", "Make the Local Authorization Decision").
func (g *gate) quorum(m *moment, idx int, voters []string, now time.Time) (bool, error) {
	opt := m.options[idx]
	caid, err := aeb.CAIDFromDigest(aeb.ActionTypeToolCall, opt.actionDigest)
	if err != nil {
		return false, fmt.Errorf("sink: quorum: %w", err)
	}
	norm := normalizedAction(opt, g.sinkID)
	op := aeb.Operation{
		OperationID:            aebID("moment", m.id),
		ProviderID:             aebID("dest", opt.destination),
		InitiatorID:            aebID("p", m.agent),
		ExecutorID:             aebID("p", g.sinkID),
		CAID:                   caid,
		NormalizedActionDigest: norm,
		Requirements: []aeb.Requirement{{
			Role: aeb.RoleHumanAuthorization, PrincipalKind: aeb.PrincipalHuman, Minimum: m.min,
			DistinctPrincipals: true, ExcludeInitiator: true, ExcludeExecutor: m.sod,
		}},
	}
	if len(voters) > aeb.MaxEvidence {
		voters = voters[:aeb.MaxEvidence]
	}
	evidence := make([]aeb.Evidence, 0, len(voters))
	for _, p := range voters {
		unit := EvidenceDigest([]byte(m.env.Digest() + "\x00" + p + "\x00" + opt.actionDigest))
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
				CheckedAt: now, ValidUntil: m.expires},
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
func normalizedAction(o momentOption, sinkID string) string {
	b, _ := json.Marshal([]string{"actgate.normalized-action.1", o.tool, o.argsDigest, o.destination, sinkID})
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
func (g *gate) grantOption(ctx context.Context, m *moment, opt momentOption) (grant, error) {
	actID := m.actID
	if actID == "" {
		id, err := g.ids.New(m.session)
		if err != nil {
			return grant{}, fmt.Errorf("sink: minting an act id: %w", err)
		}
		actID = id
	}
	b := g.bindingForOption(actID, opt, m.epoch)
	a, err := g.issue(ctx, b, m.authorityTTL)
	if errors.Is(err, authority.ErrAlreadyIssued) && m.carried {
		// An authority id derives from its binding, so a restored moment resolved again after
		// a crash between the issue and the stored resolution meets the authority issued
		// then. No grant ever named that one, so nothing can consume it: the option is
		// granted under an act id minted now for the moment's session instead.
		id, idErr := g.ids.New(m.session)
		if idErr != nil {
			return grant{}, fmt.Errorf("sink: minting an act id: %w", idErr)
		}
		actID = id
		a, err = g.issue(ctx, g.bindingForOption(actID, opt, m.epoch), m.authorityTTL)
	}
	if err != nil {
		return grant{}, fmt.Errorf("sink: issuing authority for moment %s: %w", m.id, err)
	}
	return grant{actID: actID, authorityID: a.ID, destination: opt.destination, momentID: m.id, expires: a.ExpiresAt, session: m.session}, nil
}

func (g *gate) bindingForOption(actID string, o momentOption, epoch int64) authority.Binding {
	return authority.Binding{
		ActID:           actID,
		ArgumentsDigest: o.argsDigest,
		ActionDigest:    o.actionDigest,
		Tool:            o.tool,
		Destination:     o.destination,
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
	for _, m := range g.moments.list() {
		m.mu.Lock()
		resolved, kind := m.resolved, m.kind
		m.mu.Unlock()
		if f.Session != "" && m.session != f.Session {
			continue
		}
		if f.Pending && (resolved || !now.Before(m.expires)) {
			continue
		}
		mm := Moment{
			ID: m.id, Session: m.session, Agent: m.agent, ActID: m.actID, Envelope: m.env,
			Digest: m.env.Digest(), Principals: slices.Clone(m.principals), Created: m.created,
			Expires: m.expires, Resolved: resolved, Resolution: string(kind), Class: string(m.class),
			GateAuthored: m.gateAuthored, Calls: m.calls(),
		}
		for _, o := range m.options {
			if o.needsHuman {
				mm.Server, mm.Tool, mm.ActionDigest = o.server, o.tool, o.actionDigest
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
