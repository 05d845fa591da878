package agent2025

import (
	"context"
	"encoding/json"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/mcpproxy/elicitform"
	"github.com/actgate/actgate/internal/sink"
)

// ElicitationPolicy says which consequence classes' binding moments may also be offered as an
// MCP elicitation (ToolPolicy spec.elicitation); *policy.Compiled implements it.
type ElicitationPolicy interface {
	ElicitationAllowed(class act.ConsequenceClass) bool
}

// MomentResolver is what an elicitation needs of the gate beyond Gate: the moment as
// registered (class, principals) and the resolution path every surface uses. *sink.Gate
// implements it; a gate that does not offers no elicitation.
type MomentResolver interface {
	Moments(ctx context.Context, filter sink.MomentFilter) ([]sink.Moment, error)
	Resolve(ctx context.Context, momentID, principal string, resolution []byte) (sink.ResolveResult, error)
}

// MetaElicitation carries, in the result of a call that surfaced a binding moment, what became
// of the elicitation offered for it (elicitform.Meta).
const MetaElicitation = elicitform.Meta

// DefaultElicitationTimeout bounds how long a tools/call waits for the answer to an
// elicitation (never past the moment's expiry).
const DefaultElicitationTimeout = 2 * time.Minute

// elicit offers the moment ref as an elicitation when every condition holds, and applies an
// accepted answer as a resolution through the gate as the moment's principal. It returns nil
// when nothing was offered. The tool result is sent whatever happens here: it carries
// binding_moment either way (envelope-04 §8.1; the elicitation is additional), and a
// resolution applied here reaches the agent with its next result like any other.
//
// Offered only when:
//   - the policy lists the moment's class in spec.elicitation (ElicitationAllowed; only
//     INFORMATIONAL can be listed, envelope-04 §12.4);
//   - the agent's MCP client declared form elicitation in initialize;
//   - the gate can list and resolve moments (MomentResolver);
//   - the moment names exactly one principal and it is not the agent: an elicitation answer
//     resolves as that principal, and the gate refuses the agent's own identity. A moment
//     for several principals (or a quorum) goes to their own surfaces only.
//
// The client's "decline" and "cancel" dismiss the form and resolve nothing: the moment stays
// pending for the principal's console. A §7.3 decline is the form's explicit "Decline"
// choice (§9.1: an affordance to decline is rendered with the options).
func (b *bridge) elicit(ctx context.Context, ref *sink.MomentRef) *elicitform.Outcome {
	pol := b.p.cfg.Elicitation
	if pol == nil || ref == nil || ref.Envelope == nil {
		return nil
	}
	if e := b.caps.Elicitation; e == nil || (e.Form == nil && e.URL != nil) {
		return nil
	}
	gate, ok := b.p.cfg.Gate.(MomentResolver)
	if !ok {
		return nil
	}
	log := b.p.log.WithValues("moment", ref.ID, "envelope", ref.Envelope.Digest(), "session", b.ss.ID())
	ms, err := gate.Moments(ctx, sink.MomentFilter{Pending: true, Session: b.ss.ID()})
	if err != nil {
		log.Error(err, "Elicitation not offered: moments could not be listed")
		return nil
	}
	var m *sink.Moment
	for i := range ms {
		if ms[i].ID == ref.ID {
			m = &ms[i]
		}
	}
	if m == nil {
		return nil
	}
	if !pol.ElicitationAllowed(act.ConsequenceClass(m.Class)) {
		log.V(1).Info("Elicitation not offered: the class is not in spec.elicitation", "class", m.Class)
		return nil
	}
	if len(m.Principals) != 1 || m.Principals[0] == "" || m.Principals[0] == b.agent {
		log.V(1).Info("Elicitation not offered: the moment does not name exactly one principal other than the agent", "principals", len(m.Principals))
		return nil
	}
	principal := m.Principals[0]

	params, err := elicitform.Params(ref, principal)
	if err != nil {
		log.Error(err, "Elicitation not offered")
		return nil
	}
	timeout := b.p.cfg.ElicitationTimeout
	if timeout <= 0 {
		timeout = DefaultElicitationTimeout
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !ref.Expires.IsZero() {
		var cancelExp context.CancelFunc
		ectx, cancelExp = context.WithDeadline(ectx, ref.Expires)
		defer cancelExp()
	}
	res, err := b.ss.Elicit(ectx, params)
	if err != nil {
		log.Info("Elicitation failed; the moment stays pending", "error", err.Error())
		return &elicitform.Outcome{Action: "error"}
	}
	out := &elicitform.Outcome{Action: res.Action}
	if res.Action != "accept" {
		log.Info("Elicitation dismissed; the moment stays pending", "action", res.Action)
		return out
	}
	r, err := elicitform.Resolution(ref.Envelope, res.Content)
	if err != nil {
		log.Info("Elicitation answer not applied; the moment stays pending", "error", err.Error())
		out.Action = "error"
		return out
	}
	raw, err := json.Marshal(r)
	if err != nil {
		log.Error(err, "Elicitation answer not applied")
		out.Action = "error"
		return out
	}
	// The resolution is recorded whatever the agent does with its request now.
	rr, err := gate.Resolve(context.WithoutCancel(ctx), m.ID, principal, raw)
	if err != nil {
		log.Info("Elicitation answer refused by the gate; the moment stays as it was", "error", err.Error())
		out.Action = "error"
		return out
	}
	log.Info("Binding moment resolved by elicitation", "principal", principal, "resolution", rr.Kind, "option", rr.OptionID, "pending", rr.Pending)
	out.Resolution, out.Principal = rr.Kind, principal
	return out
}
