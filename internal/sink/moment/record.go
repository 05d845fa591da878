package moment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/aeb"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
)

// Stored is one moment's record as the gate's MomentStore (sink.MomentStore) holds it.
type Stored struct {
	// ID is the moment id ("bm-" + 32 hex digits).
	ID string
	// Settled is when the record stops mattering: the moment's expiry while it is pending,
	// else the latest of its resolution and its grants' expiry.
	Settled time.Time
	// Data is the gate's encoding of the moment (Decode reads it).
	Data []byte
}

// maxMomentRecordBytes bounds one stored moment record: an envelope (envelope.MaxDocumentBytes)
// and its options' arguments, with room to spare.
const maxMomentRecordBytes = 4 << 20

// momentRecordVersion is the version of the record layout this build writes and reads.
const momentRecordVersion = 1

// ErrRecord: a stored moment record is malformed (a corrupt or foreign store file).
var ErrRecord = errors.New("sink: malformed stored binding moment")

type momentRecord struct {
	V            int                `json:"v"`
	ID           string             `json:"id"`
	Session      string             `json:"session"`
	Agent        string             `json:"agent"`
	ActID        string             `json:"actId,omitempty"`
	GateAuthored bool               `json:"gateAuthored,omitempty"`
	Envelope     *envelope.Envelope `json:"envelope"`
	Options      []optionRecord     `json:"options"`
	Principals   []string           `json:"principals"`
	Min          int                `json:"min"`
	SoD          bool               `json:"sod,omitempty"`
	Epoch        int64              `json:"epoch"`
	AuthorityTTL time.Duration      `json:"authorityTTL"`
	Created      time.Time          `json:"created"`
	Expires      time.Time          `json:"expires"`
	Policy       string             `json:"policy,omitempty"`
	Rule         string             `json:"rule,omitempty"`
	Class        string             `json:"class,omitempty"`
	Votes        map[string]int     `json:"votes,omitempty"`
	Resolved     bool               `json:"resolved,omitempty"`
	ResolvedAt   time.Time          `json:"resolvedAt,omitzero"`
	Kind         string             `json:"kind,omitempty"`
	Grants       []GrantRecord      `json:"grants,omitempty"`
}

type optionRecord struct {
	Tool         string          `json:"tool"`
	Server       string          `json:"server"`
	Destination  string          `json:"destination"`
	Args         json.RawMessage `json:"args"`
	ActionDigest string          `json:"actionDigest"`
	NeedsHuman   bool            `json:"needsHuman,omitempty"`
	Shown        envelope.Call   `json:"shown"`
}

// GrantRecord is a grant as a moment's stored record holds it.
type GrantRecord struct {
	ActID       string    `json:"actId"`
	AuthorityID string    `json:"authorityId"`
	Destination string    `json:"destination"`
	Digest      string    `json:"actionDigest"`
	Expires     time.Time `json:"expires"`
}

// Stored encodes m with its grants; m.Mu is held.
func (m *Moment) Stored(grants []GrantRecord) (Stored, error) {
	r := momentRecord{
		V: momentRecordVersion, ID: m.ID, Session: m.Session, Agent: m.Agent, ActID: m.ActID,
		GateAuthored: m.GateAuthored, Envelope: m.Env, Principals: m.Principals, Min: m.Min, SoD: m.SoD,
		Epoch: m.Epoch, AuthorityTTL: m.AuthorityTTL, Created: m.Created.UTC(), Expires: m.Expires.UTC(),
		Policy: m.Policy, Rule: m.Rule, Class: string(m.Class), Votes: m.Votes, Resolved: m.Resolved,
		ResolvedAt: m.ResolvedAt.UTC(), Kind: string(m.Kind), Grants: grants,
	}
	for _, o := range m.Options {
		r.Options = append(r.Options, optionRecord{Tool: o.Tool, Server: o.Server, Destination: o.Destination,
			Args: o.Args, ActionDigest: o.ActionDigest, NeedsHuman: o.NeedsHuman, Shown: o.Shown})
	}
	b, err := json.Marshal(r)
	if err != nil {
		return Stored{}, fmt.Errorf("sink: encoding moment %s: %w", m.ID, err)
	}
	settled := m.Expires
	if m.Resolved {
		settled = m.ResolvedAt
		for _, g := range grants {
			settled = later(settled, g.Expires)
		}
	}
	return Stored{ID: m.ID, Settled: settled.UTC(), Data: b}, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func badRecord(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRecord, fmt.Sprintf(format, args...))
}

// Decode rebuilds a moment and its grants from a stored record. Every digest is
// recomputed from the record's own arguments: a record whose options do not match the
// envelope it carries is refused, so a damaged record cannot authorise another call.
func Decode(data []byte) (*Moment, []GrantRecord, error) {
	if len(data) > maxMomentRecordBytes {
		return nil, nil, badRecord("%d bytes, at most %d", len(data), maxMomentRecordBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r momentRecord
	if err := dec.Decode(&r); err != nil {
		return nil, nil, badRecord("%v", err)
	}
	if dec.More() {
		return nil, nil, badRecord("trailing data")
	}
	switch {
	case r.V != momentRecordVersion:
		return nil, nil, badRecord("version %d, this build reads %d", r.V, momentRecordVersion)
	case !validMomentID(r.ID):
		return nil, nil, badRecord("id %q", clip(r.ID, 64))
	case r.Envelope == nil:
		return nil, nil, badRecord("%s: no envelope", r.ID)
	case r.Session == "" || r.Agent == "":
		return nil, nil, badRecord("%s: no session or agent", r.ID)
	case len(r.Options) != r.Envelope.NumOptions() || len(r.Options) < envelope.MinOptions || len(r.Options) > envelope.MaxOptions:
		return nil, nil, badRecord("%s: %d options for an envelope of %d", r.ID, len(r.Options), r.Envelope.NumOptions())
	case len(r.Principals) == 0 || slices.Contains(r.Principals, ""):
		return nil, nil, badRecord("%s: no principals", r.ID)
	case r.Min < 1 || r.Min > aeb.MaxEvidence:
		return nil, nil, badRecord("%s: min %d", r.ID, r.Min)
	case r.Epoch < 0 || r.Epoch > jcs.MaxSafeInteger:
		return nil, nil, badRecord("%s: epoch %d", r.ID, r.Epoch)
	case r.AuthorityTTL <= 0 || r.AuthorityTTL > authority.MaxTTL:
		return nil, nil, badRecord("%s: authority TTL %s", r.ID, r.AuthorityTTL)
	case r.Created.IsZero() || !r.Expires.After(r.Created):
		return nil, nil, badRecord("%s: created %s, expires %s", r.ID, r.Created, r.Expires)
	case r.Class != "" && !act.ConsequenceClass(r.Class).Valid():
		return nil, nil, badRecord("%s: class %q", r.ID, clip(r.Class, 32))
	case len(r.Votes) > len(r.Principals):
		return nil, nil, badRecord("%s: %d votes for %d principals", r.ID, len(r.Votes), len(r.Principals))
	}
	m := &Moment{
		ID: r.ID, Env: r.Envelope, Session: r.Session, Agent: r.Agent, ActID: r.ActID,
		GateAuthored: r.GateAuthored, Principals: r.Principals, Min: r.Min, SoD: r.SoD, Epoch: r.Epoch,
		AuthorityTTL: r.AuthorityTTL, Created: r.Created, Expires: r.Expires, Policy: r.Policy,
		Rule: r.Rule, Class: act.ConsequenceClass(r.Class), Votes: map[string]int{},
		Resolved: r.Resolved, ResolvedAt: r.ResolvedAt, Kind: envelope.Kind(r.Kind), Carried: true,
	}
	for i, o := range r.Options {
		mo, err := optionFromRecord(o)
		if err != nil {
			return nil, nil, badRecord("%s: option %d: %v", r.ID, i, err)
		}
		eo, _ := r.Envelope.Option(i)
		if eo.ActionDigest != mo.ActionDigest {
			return nil, nil, badRecord("%s: option %d's digest is not the envelope's", r.ID, i)
		}
		m.Options = append(m.Options, mo)
	}
	for p, idx := range r.Votes {
		if !slices.Contains(r.Principals, p) || idx < 0 || idx >= len(m.Options) {
			return nil, nil, badRecord("%s: vote of %q for option %d", r.ID, clip(p, 64), idx)
		}
		m.Votes[p] = idx
	}
	switch envelope.Kind(r.Kind) {
	case "":
		if r.Resolved || len(r.Grants) > 0 {
			return nil, nil, badRecord("%s: resolved without a kind", r.ID)
		}
	case envelope.KindOption, envelope.KindAnswer, envelope.KindQuestion, envelope.KindDeclined:
		if !r.Resolved || r.ResolvedAt.IsZero() {
			return nil, nil, badRecord("%s: a resolution kind without a resolution", r.ID)
		}
	default:
		return nil, nil, badRecord("%s: resolution kind %q", r.ID, clip(r.Kind, 32))
	}
	if len(r.Grants) > 0 && envelope.Kind(r.Kind) != envelope.KindOption {
		return nil, nil, badRecord("%s: grants without an option resolution", r.ID)
	}
	for _, g := range r.Grants {
		ok := slices.ContainsFunc(m.Options, func(o Option) bool {
			return o.NeedsHuman && o.ActionDigest == g.Digest && o.Destination == g.Destination
		})
		if !ok || g.ActID == "" || g.AuthorityID == "" || g.Expires.IsZero() {
			return nil, nil, badRecord("%s: a grant for no option of the moment", r.ID)
		}
	}
	m.Settled.Store(m.Resolved)
	return m, r.Grants, nil
}

func optionFromRecord(o optionRecord) (Option, error) {
	if act.CheckToolName("tool", o.Tool) != nil || o.Server == "" || o.Destination == "" {
		return Option{}, errors.New("no tool, server or destination")
	}
	canon, err := jcs.Canonicalize(o.Args, jcs.Strict)
	if err != nil || len(canon) == 0 || canon[0] != '{' {
		return Option{}, errors.New("arguments are not a strict-profile object")
	}
	d, err := action.Digest(o.Tool, canon, jcs.Strict)
	if err != nil {
		return Option{}, err
	}
	if d != o.ActionDigest {
		return Option{}, errors.New("action digest does not match the arguments")
	}
	if o.Shown.Tool != o.Tool || o.Shown.Server != o.Server || o.Shown.Destination != o.Destination {
		return Option{}, errors.New("the shown call is another call")
	}
	return Option{Tool: o.Tool, Server: o.Server, Destination: o.Destination, Args: canon,
		ArgsDigest: jcs.Digest(canon), ActionDigest: d, NeedsHuman: o.NeedsHuman, Shown: o.Shown}, nil
}

func validMomentID(id string) bool {
	if len(id) != len("bm-")+32 || id[:3] != "bm-" {
		return false
	}
	for _, c := range id[3:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
