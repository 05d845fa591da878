package sink

import (
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink/moment"
)

// Observer is told what the gate decided, for metrics, Kubernetes Events and notifications.
// Its methods are called synchronously on the request path once the decision is final, possibly
// while the gate holds the moment's lock: an implementation must be fast, must never block
// (queue slow work such as an outgoing webhook) and must not call back into the Gate. It receives
// identities, classes, codes and digests, and argument values only in MomentEvent.Calls (the
// calls a principal authorises, for the principal's own surfaces); the synopsis of a moment is
// envelope text meant for the principal.
type Observer interface {
	// CallDecided is called once for every call Handle answered.
	CallDecided(CallEvent)
	// MomentEmitted is called when a binding moment is registered (gate-authored or proposed).
	MomentEmitted(MomentEvent)
	// MomentResolved is called when a moment gets its final resolution (for `option`, when the
	// quorum of distinct principals is reached).
	MomentResolved(MomentEvent, ResolutionEvent)
	// MomentExpired is called once for a moment that reached its expiry unresolved; the gate
	// notices expiry lazily (listing, new moments) and in SweepMoments.
	MomentExpired(MomentEvent)
}

// NopObserver observes nothing; embed it to implement part of Observer.
type NopObserver struct{}

// CallDecided does nothing.
func (NopObserver) CallDecided(CallEvent) {}

// MomentEmitted does nothing.
func (NopObserver) MomentEmitted(MomentEvent) {}

// MomentResolved does nothing.
func (NopObserver) MomentResolved(MomentEvent, ResolutionEvent) {}

// MomentExpired does nothing.
func (NopObserver) MomentExpired(MomentEvent) {}

// Observers fans each event out to every non-nil observer in order.
func Observers(obs ...Observer) Observer {
	out := make(multiObserver, 0, len(obs))
	for _, o := range obs {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

type multiObserver []Observer

func (m multiObserver) CallDecided(e CallEvent) {
	for _, o := range m {
		o.CallDecided(e)
	}
}

func (m multiObserver) MomentEmitted(e MomentEvent) {
	for _, o := range m {
		o.MomentEmitted(e)
	}
}

func (m multiObserver) MomentResolved(e MomentEvent, r ResolutionEvent) {
	for _, o := range m {
		o.MomentResolved(e, r)
	}
}

func (m multiObserver) MomentExpired(e MomentEvent) {
	for _, o := range m {
		o.MomentExpired(e)
	}
}

// CallEvent is one answered call.
type CallEvent struct {
	ActID  string // "" when the call could not be mapped to an act
	Server string
	Tool   string
	// Class is the consequence class the act ended with (policy may override the default).
	Class act.ConsequenceClass
	// Policy and Rule name the ToolPolicy (or standalone policy) and the rule that decided;
	// empty when no policy was evaluated.
	Policy, Rule string
	// Outcome is the policy outcome ("" when no policy was evaluated).
	Outcome PolicyOutcome
	// Audit: the policy is in Audit mode; Code then says what enforcement would have done.
	Audit bool
	// Allowed, Invoked, Replayed and State are those of the Result.
	Allowed  bool
	Invoked  bool
	Replayed bool
	State    journal.State
	// Code is the deny or escalation code ("" when allowed).
	Code ef.EFCode
	// ActionDigest is the act's digest over {"tool","args"} ("" when no act was made).
	ActionDigest string
	// Duration is the time from receipt of the call to its answer, invocation included.
	Duration time.Duration
	// Vendor is the call's shape (act.VendorMCP for an MCP tools/call).
	Vendor act.Vendor
	// Invocation is how long the upstream call took, when the call was invoked.
	Invocation time.Duration
}

// MomentEvent describes a binding moment.
type MomentEvent struct {
	ID             string
	EnvelopeDigest string
	Session        string
	Agent          string
	Principals     []string
	// Policy and Rule that required the human decision.
	Policy, Rule string
	// Class is the consequence class of the escalated call (gate-authored moments) or of the
	// first option that needs a human (agent-proposed moments).
	Class act.ConsequenceClass
	// DecisionClass is the envelope's meta.decision_class, if any (envelope-04 §5.9).
	DecisionClass string
	Server, Tool  string
	GateAuthored  bool
	// Synopsis is the envelope's synopsis slot (envelope-04 §5.1).
	Synopsis string
	// FreeTextHatch and DialogueHatch are the envelope's two hatches (§5.8); false means the
	// hatch is disabled (§12.3).
	FreeTextHatch, DialogueHatch bool
	// CalibrationNote: the envelope carries meta.calibration_note (§5.9).
	CalibrationNote  bool
	Created, Expires time.Time
	// Calls are the calls the options authorise, one per option, masks applied (Moment.Calls).
	// They carry raw arguments: an Observer passes them only to a principal's own surface and
	// only when configured to (internal/notify's includeCalls), never to logs or metrics.
	Calls []envelope.Call
}

// ResolutionEvent is the final resolution of a moment.
type ResolutionEvent struct {
	Kind      string // option | answer | question | declined (envelope-04 §7.3)
	Principal string // the principal whose resolution was final
	At        time.Time
}

// event describes m for an Observer. The caller holds m.mu or m is not yet shared.
func momentEvent(m *moment.Moment) MomentEvent {
	c := m.Env.Content()
	e := MomentEvent{
		ID: m.ID, EnvelopeDigest: m.Env.Digest(), Session: m.Session, Agent: m.Agent,
		Principals: append([]string(nil), m.Principals...), Policy: m.Policy, Rule: m.Rule,
		Class: m.Class, GateAuthored: m.GateAuthored, Synopsis: c.Synopsis,
		FreeTextHatch: m.Env.Hatches().FreeText, DialogueHatch: m.Env.Hatches().Dialogue,
		Created: m.Created, Expires: m.Expires, Calls: m.Calls(),
	}
	if c.Meta != nil {
		e.DecisionClass = c.Meta.DecisionClass
		e.CalibrationNote = c.Meta.CalibrationNote != ""
	}
	if len(m.Options) > 0 {
		o := m.Options[0]
		for _, x := range m.Options {
			if x.NeedsHuman {
				o = x
				break
			}
		}
		e.Server, e.Tool = o.Server, o.Tool
	}
	return e
}

// proposalClass is the class of an agent-proposed moment: policy's class for the option that
// needs a human, else that tool's default class (tool-use-binding §20).
func proposalClass(req *PolicyDecision, opts []moment.Option) act.ConsequenceClass {
	if req != nil && req.Class != "" && req.Class.Valid() {
		return req.Class
	}
	for _, o := range opts {
		if o.NeedsHuman {
			return act.DefaultClass(o.Tool)
		}
	}
	return ""
}

// sweepExpired reports every moment that expired unresolved and was not yet reported.
func (g *gate) sweepExpired(now time.Time) int {
	var expired []MomentEvent
	for _, m := range g.moments.List() {
		m.Mu.Lock()
		if !m.Resolved && !m.ExpiryReported && !now.Before(m.Expires) {
			m.ExpiryReported = true
			expired = append(expired, momentEvent(m))
		}
		m.Mu.Unlock()
	}
	for _, e := range expired {
		g.observer.MomentExpired(e)
	}
	return len(expired)
}

// SweepMoments reports to the Observer every binding moment that expired unresolved since the
// last sweep and returns how many. Serve calls it periodically so expiries are counted when
// they happen rather than when someone next looks.
func (g *Gate) SweepMoments() int {
	if g == nil || g.g == nil {
		return 0
	}
	return g.g.sweepExpired(g.g.now())
}
