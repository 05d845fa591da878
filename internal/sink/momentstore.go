package sink

import (
	"bytes"
	"context"
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

// MomentStore keeps binding moments, their votes, resolutions and grants across restarts
// (the embedded bbolt store in `actgate serve`). The gate writes a moment's record when it is
// registered, on every vote and on its resolution, and reads the records back once, in New.
// The single use of a grant is never decided here: a grant names an authority, and the
// authority store's consume decides.
type MomentStore interface {
	// PutMoment writes m, replacing the record with its id, and returns once the write is
	// durable (fsynced).
	PutMoment(ctx context.Context, m StoredMoment) error
	// LoadMoments deletes the records settled before retainSince and returns the others.
	LoadMoments(ctx context.Context, retainSince time.Time) ([]StoredMoment, error)
}

// StoredMoment is one moment's record as a MomentStore holds it.
type StoredMoment struct {
	// ID is the moment id ("bm-" + 32 hex digits).
	ID string
	// Settled is when the record stops mattering: the moment's expiry while it is pending,
	// else the latest of its resolution and its grants' expiry.
	Settled time.Time
	// Data is the gate's encoding of the moment (DecodeMoment reads it).
	Data []byte
}

// MomentRetention is how long a settled moment's record is kept: the window in which a start
// reads the journal's settled dispatches (authority.MaxTTL plus an hour).
const MomentRetention = authority.MaxTTL + time.Hour

// maxMomentRecordBytes bounds one stored moment record: an envelope (envelope.MaxDocumentBytes)
// and its options' arguments, with room to spare.
const maxMomentRecordBytes = 4 << 20

// momentRecordVersion is the version of the record layout this build writes and reads.
const momentRecordVersion = 1

// ErrMomentRecord: a stored moment record is malformed (a corrupt or foreign store file).
var ErrMomentRecord = errors.New("sink: malformed stored binding moment")

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
	Grants       []GrantRecordX      `json:"grants,omitempty"`
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

type GrantRecordX struct {
	ActID       string    `json:"actId"`
	AuthorityID string    `json:"authorityId"`
	Destination string    `json:"destination"`
	Digest      string    `json:"actionDigest"`
	Expires     time.Time `json:"expires"`
}

// stored encodes m with its grants; m.mu is held.
func (m *MomentX) Stored(grants []GrantRecordX) (StoredMoment, error) {
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
		return StoredMoment{}, fmt.Errorf("sink: encoding moment %s: %w", m.ID, err)
	}
	settled := m.Expires
	if m.Resolved {
		settled = m.ResolvedAt
		for _, g := range grants {
			settled = later(settled, g.Expires)
		}
	}
	return StoredMoment{ID: m.ID, Settled: settled.UTC(), Data: b}, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// DecodeMoment checks a stored moment record and returns its id. It reads what decodeMoment
// reads and refuses what it refuses (ErrMomentRecord), so a record a store returns is checked
// before the gate trusts any of it.
func DecodeMoment(data []byte) (string, error) {
	m, _, err := DecodeX(data)
	if err != nil {
		return "", err
	}
	return m.ID, nil
}

func badRecord(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMomentRecord, fmt.Sprintf(format, args...))
}

// decodeMoment rebuilds a moment and its grants from a stored record. Every digest is
// recomputed from the record's own arguments: a record whose options do not match the
// envelope it carries is refused, so a damaged record cannot authorise another call.
func DecodeX(data []byte) (*MomentX, []GrantRecordX, error) {
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
	case r.Epoch < 0 || r.Epoch > jcsMaxSafe:
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
	m := &MomentX{
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
		ok := slices.ContainsFunc(m.Options, func(o OptionX) bool {
			return o.NeedsHuman && o.ActionDigest == g.Digest && o.Destination == g.Destination
		})
		if !ok || g.ActID == "" || g.AuthorityID == "" || g.Expires.IsZero() {
			return nil, nil, badRecord("%s: a grant for no option of the moment", r.ID)
		}
	}
	m.Settled.Store(m.Resolved)
	return m, r.Grants, nil
}

func optionFromRecord(o optionRecord) (OptionX, error) {
	if act.CheckToolName("tool", o.Tool) != nil || o.Server == "" || o.Destination == "" {
		return OptionX{}, errors.New("no tool, server or destination")
	}
	canon, err := jcs.Canonicalize(o.Args, jcs.Strict)
	if err != nil || len(canon) == 0 || canon[0] != '{' {
		return OptionX{}, errors.New("arguments are not a strict-profile object")
	}
	d, err := action.Digest(o.Tool, canon, jcs.Strict)
	if err != nil {
		return OptionX{}, err
	}
	if d != o.ActionDigest {
		return OptionX{}, errors.New("action digest does not match the arguments")
	}
	if o.Shown.Tool != o.Tool || o.Shown.Server != o.Server || o.Shown.Destination != o.Destination {
		return OptionX{}, errors.New("the shown call is another call")
	}
	return OptionX{Tool: o.Tool, Server: o.Server, Destination: o.Destination, Args: canon,
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

// persist writes m's record with its filed grants and, when not nil, gr (a grant for the
// action digest, about to be filed); m.mu is held. Without a MomentStore it does nothing
// (moments live in memory).
func (g *gate) persist(ctx context.Context, m *MomentX, gr *GrantX, digest string) error {
	if g.momentStore == nil {
		return nil
	}
	grants := g.moments.GrantsOf(m)
	if gr != nil {
		grants = append(grants, GrantRecordX{ActID: gr.ActID, AuthorityID: gr.AuthorityID,
			Destination: gr.Destination, Digest: digest, Expires: gr.Expires.UTC()})
	}
	sm, err := m.Stored(grants)
	if err != nil {
		return err
	}
	// The write runs to completion even when the caller gives up: a principal's vote or
	// resolution is recorded, or refused, but never left half known.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.recordTimeout)
	defer cancel()
	if err := g.momentStore.PutMoment(ctx, sm); err != nil {
		return fmt.Errorf("sink: storing binding moment %s: %w", m.ID, err)
	}
	return nil
}

// loadMoments reads the moments a previous process stored, re-emits their envelopes into the
// registry (so a resolution after the restart is checked as before), and restores the pending
// ones, their votes and the grants not yet expired. Their sessions belonged to that process:
// the moment's agent continues them from any session (momentTable "carried").
func (g *gate) loadMoments(ctx context.Context) error {
	if g.momentStore == nil {
		return nil
	}
	now := g.now()
	recs, err := g.momentStore.LoadMoments(ctx, now.Add(-MomentRetention))
	if err != nil {
		return fmt.Errorf("sink: loading binding moments: %w", err)
	}
	var pending, grants int
	for _, sm := range recs {
		m, gs, err := DecodeX(sm.Data)
		if err != nil {
			return fmt.Errorf("sink: loading binding moment %q: %w", clip(sm.ID, 64), err)
		}
		if m.ID != sm.ID {
			return fmt.Errorf("sink: loading binding moment %q: %w: the record is moment %s", clip(sm.ID, 64), ErrMomentRecord, m.ID)
		}
		var b bytes.Buffer
		if err := (envelope.TextRenderer{}).Render(&b, m.Env); err == nil {
			m.Text = b.String()
		}
		opts := envelope.EmitOptions{TTL: max(m.Expires.Sub(now), time.Nanosecond)}
		if len(m.Principals) == 1 {
			opts.Principal = m.Principals[0]
		}
		if _, err := g.registry.Emit(ctx, m.Env, opts); err != nil && !errors.Is(err, envelope.ErrAlreadyEmitted) {
			return fmt.Errorf("sink: re-emitting binding moment %s: %w", m.ID, err)
		}
		g.moments.Restore(m, now)
		if !m.Resolved && now.Before(m.Expires) {
			pending++
		}
		for _, gr := range gs {
			if now.Before(gr.Expires) {
				g.moments.AddGrant(m, gr.Digest, GrantX{ActID: gr.ActID, AuthorityID: gr.AuthorityID,
					Destination: gr.Destination, MomentID: m.ID, Expires: gr.Expires, Session: m.Session})
				grants++
			}
		}
	}
	if len(recs) > 0 {
		g.log.Info("Restored binding moments", "moments", len(recs), "pending", pending, "grants", grants)
	}
	return nil
}
