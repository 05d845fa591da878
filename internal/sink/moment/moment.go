package moment

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/envelope"
)

// Option is one option of a registered moment: the concrete call it authorises.
type Option struct {
	Tool, Server, Destination string
	Args                      json.RawMessage // canonical, strict profile
	ArgsDigest, ActionDigest  string
	NeedsHuman                bool // policy escalates this call: a resolution issues authority for it
	// shown is the call as principal surfaces show it: these arguments with the governing
	// rule's masks applied (envelope.Call, "what you see is what you authorise").
	Shown envelope.Call
}

// WithShown fills o.Shown from o's own canonical arguments, the ones its action digest was
// computed from, masking the values at the rule's pointers. An error (arguments that cannot be
// masked) leaves the option unshowable, and the moment is not offered.
func (o Option) WithShown(masks []string) (Option, error) {
	args, masked, err := argmask.Apply(o.Args, masks)
	if err != nil {
		return o, err
	}
	o.Shown = envelope.Call{Server: o.Server, Destination: o.Destination, Tool: o.Tool, Args: args, Masked: masked}
	return o, nil
}

// Calls returns the shown calls of a moment's options, in order.
func (m *Moment) Calls() []envelope.Call {
	out := make([]envelope.Call, len(m.Options))
	for i, o := range m.Options {
		c := o.Shown
		c.Args = slices.Clone(c.Args)
		c.Masked = slices.Clone(c.Masked)
		out[i] = c
	}
	return out
}

// Moment is one registered binding moment. Its fields are the gate's (internal/sink) to set;
// Mu serialises its resolutions.
type Moment struct {
	ID           string
	Env          *envelope.Envelope
	Text         string
	Session      string
	Agent        string
	ActID        string // the escalated act (gate-authored moments); "" for proposals
	GateAuthored bool
	Options      []Option
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
	Settled        atomic.Bool // resolved, readable without Mu (Table.Admit)
	Kind           envelope.Kind
	ResolvedAt     time.Time
	ExpiryReported bool // the Observer was told this moment expired
	// carried: the moment was restored from the MomentStore, so its session belonged to a
	// previous process; its agent continues it from any of its sessions.
	Carried bool
}

// VotersFor lists the principals who chose option idx, sorted.
func (m *Moment) VotersFor(idx int) []string {
	var out []string
	for p, i := range m.Votes {
		if i == idx {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// NewID returns "bm-" + 32 random hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return "bm-" + hex.EncodeToString(b[:])
}

// Delivery is one binding-moment resolution returned to the agent of the moment's session.
type Delivery struct {
	MomentID       string `json:"moment_id"`
	EnvelopeDigest string `json:"envelope_digest"`
	Kind           string `json:"resolution"`                  // option | answer | question | declined
	OptionIdx      *int   `json:"option_idx,omitempty"`        // option only
	Answer         string `json:"answer,omitempty"`            // answer only
	Tool           string `json:"tool,omitempty"`              // option only: the call authorised
	Server         string `json:"server,omitempty"`            // option only
	ActionDigest   string `json:"action_digest,omitempty"`     // option only
	Authorized     bool   `json:"authorized"`                  // option only: authority was issued for it
	Expires        string `json:"authority_expires,omitempty"` // option only: RFC 3339
}
