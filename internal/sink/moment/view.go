package moment

import (
	"slices"
	"time"

	"github.com/actgate/actgate/internal/envelope"
)

// View is a registered binding moment as an operator sees it (sink.Moment).
type View struct {
	ID         string
	Session    string
	Agent      string
	Server     string
	Tool       string
	ActID      string
	Envelope   *envelope.Envelope
	Digest     string
	Principals []string
	Created    time.Time
	Expires    time.Time
	Resolved   bool
	Resolution string // kind of the final resolution, if resolved
	// Class is the consequence class of the call the moment decides (the escalated call's, or
	// the first option that needs a human); ActionDigest is that call's action digest. Both
	// are "" when no option needs a human. The web console shows them beside the envelope.
	Class        string
	ActionDigest string
	// GateAuthored: the gate wrote the envelope from policy; false: the agent proposed it and
	// every slot is the agent's words.
	GateAuthored bool
	// Calls are the calls the envelope's options authorise, one per option in order, as the
	// gate computed their action digests from them, with the rule's masks applied. Principal
	// surfaces show them beside the agent's labels (envelope.TextRenderer.Calls); they carry
	// raw arguments, so they go to principals only, never to logs or receipts.
	Calls []envelope.Call
}

// View is m as an operator sees it, resolved or not as the caller read it under m.Mu; the
// call it decides is the first option that needs a human.
func (m *Moment) View(resolved bool, kind envelope.Kind) View {
	v := View{
		ID: m.ID, Session: m.Session, Agent: m.Agent, ActID: m.ActID, Envelope: m.Env,
		Digest: m.Env.Digest(), Principals: slices.Clone(m.Principals), Created: m.Created,
		Expires: m.Expires, Resolved: resolved, Resolution: string(kind), Class: string(m.Class),
		GateAuthored: m.GateAuthored, Calls: m.Calls(),
	}
	for _, o := range m.Options {
		if o.NeedsHuman {
			v.Server, v.Tool, v.ActionDigest = o.Server, o.Tool, o.ActionDigest
			break
		}
	}
	return v
}
