package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/sink/moment"
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

// StoredMoment is one moment's record as a MomentStore holds it (moment.Stored).
type StoredMoment = moment.Stored

// ErrMomentRecord: a stored moment record is malformed (a corrupt or foreign store file).
var ErrMomentRecord = moment.ErrRecord

// MomentRetention is how long a settled moment's record is kept: the window in which a start
// reads the journal's settled dispatches (authority.MaxTTL plus an hour).
const MomentRetention = authority.MaxTTL + time.Hour

// DecodeMoment checks a stored moment record and returns its id. It reads what decodeMoment
// reads and refuses what it refuses (ErrMomentRecord), so a record a store returns is checked
// before the gate trusts any of it.
func DecodeMoment(data []byte) (string, error) {
	m, _, err := moment.Decode(data)
	if err != nil {
		return "", err
	}
	return m.ID, nil
}

// persist writes m's record with its filed grants and, when not nil, gr (a grant for the
// action digest, about to be filed); m.mu is held. Without a MomentStore it does nothing
// (moments live in memory).
func (g *gate) persist(ctx context.Context, m *moment.Moment, gr *moment.Grant, digest string) error {
	if g.momentStore == nil {
		return nil
	}
	grants := g.moments.GrantsOf(m)
	if gr != nil {
		grants = append(grants, moment.GrantRecord{ActID: gr.ActID, AuthorityID: gr.AuthorityID,
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
		m, gs, err := moment.Decode(sm.Data)
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
				g.moments.AddGrant(m, gr.Digest, moment.Grant{ActID: gr.ActID, AuthorityID: gr.AuthorityID,
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
