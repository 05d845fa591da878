package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
)

// Moment is one binding moment's record as the store holds it: the gate's encoding (Data,
// opaque here) under the moment's id, with the time it is settled by, for retention.
type Moment = wire.Moment

// maxMomentBytes bounds one stored moment record.
const maxMomentBytes = 8 << 20

// maxMomentID bounds a moment id (the gate's are "bm-" + 32 hex digits).
const maxMomentID = 128

// storedMoment is a Moment as the moments bucket holds it.
type storedMoment struct {
	ID      string    `json:"id"`
	Settled time.Time `json:"settled"`
	Data    []byte    `json:"data"`
}

// decodeMoment reads the record stored under key. A malformed record is an error, never a
// panic: the file is corrupt, and the caller refuses to start rather than guess.
func decodeMoment(key, v []byte) (Moment, error) {
	if len(v) > maxMomentBytes {
		return Moment{}, unavailablef("corrupt moment record %q: %d bytes", clipKey(key), len(v))
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	var s storedMoment
	if err := dec.Decode(&s); err != nil {
		return Moment{}, unavailablef("corrupt moment record %q: %v", clipKey(key), err)
	}
	switch {
	case dec.More():
		return Moment{}, unavailablef("corrupt moment record %q: trailing data", clipKey(key))
	case s.ID == "" || s.ID != string(key):
		return Moment{}, unavailablef("corrupt moment record %q: it names moment %q", clipKey(key), clipKey([]byte(s.ID)))
	case s.Settled.IsZero():
		return Moment{}, unavailablef("corrupt moment record %q: no settled time", clipKey(key))
	case len(s.Data) == 0:
		return Moment{}, unavailablef("corrupt moment record %q: no data", clipKey(key))
	}
	return Moment{ID: s.ID, Settled: s.Settled, Data: s.Data}, nil
}

func clipKey(k []byte) string {
	if len(k) > 64 {
		k = k[:64]
	}
	return string(k)
}

// settledKey is the moments_by_settled key of a moment.
func settledKey(settled time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(max(settled.UnixNano(), 0)))
	return append(k, id...)
}

// PutMoment stores m, replacing the record with its id, in one fsynced commit (sink.MomentStore).
func (s *Store) PutMoment(ctx context.Context, m Moment) error {
	_, err := s.do(ctx, &wire.Request{Op: wire.OpPutMoment, Moment: m})
	return err
}

// LoadMoments deletes, in one commit, the moments settled before retainSince and returns the
// others in id order (sink.MomentStore).
func (s *Store) LoadMoments(ctx context.Context, retainSince time.Time) ([]Moment, error) {
	resp, err := s.do(ctx, &wire.Request{Op: wire.OpLoadMoments, Since: retainSince})
	return resp.Moments, err
}

func (l *local) putMoment(ctx context.Context, m Moment) error {
	switch {
	case m.ID == "" || len(m.ID) > maxMomentID:
		return invalidMoment("id of %d bytes", len(m.ID))
	case m.Settled.IsZero():
		return invalidMoment("no settled time")
	case len(m.Data) == 0 || len(m.Data) > maxMomentBytes:
		return invalidMoment("%d bytes of data", len(m.Data))
	}
	enc, err := json.Marshal(storedMoment{ID: m.ID, Settled: m.Settled.UTC(), Data: m.Data})
	if err != nil {
		return unavailable(err)
	}
	return l.batch(ctx, func(tx *bolt.Tx) error {
		if ctx.Err() != nil {
			return nil
		}
		b, idx := tx.Bucket(bucketMoments), tx.Bucket(bucketBySettled)
		if prev := b.Get([]byte(m.ID)); prev != nil {
			old, err := decodeMoment([]byte(m.ID), prev)
			if err != nil {
				return err
			}
			if err := idx.Delete(settledKey(old.Settled, old.ID)); err != nil {
				return err
			}
		}
		if err := b.Put([]byte(m.ID), enc); err != nil {
			return err
		}
		return idx.Put(settledKey(m.Settled, m.ID), []byte{})
	})
}

func (l *local) loadMoments(ctx context.Context, retainSince time.Time) ([]Moment, error) {
	var out []Moment
	err := run(ctx, func() error {
		if err := l.db.Update(func(tx *bolt.Tx) error {
			out = nil
			b, idx := tx.Bucket(bucketMoments), tx.Bucket(bucketBySettled)
			stop := settledKey(retainSince, "")
			var expired [][]byte
			c := idx.Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k, stop) < 0; k, _ = c.Next() {
				expired = append(expired, bytes.Clone(k))
			}
			for _, k := range expired {
				if len(k) <= 8 {
					return unavailablef("corrupt moment index key %x", k)
				}
				if err := b.Delete(k[8:]); err != nil {
					return err
				}
				if err := idx.Delete(k); err != nil {
					return err
				}
			}
			return b.ForEach(func(k, v []byte) error {
				m, err := decodeMoment(k, v)
				if err != nil {
					return err
				}
				out = append(out, m)
				return nil
			})
		}); err != nil {
			return asUnavailable(err)
		}
		return nil
	})
	return out, err
}

func invalidMoment(format string, args ...any) error {
	return unavailablef("invalid moment record: "+format, args...)
}

// asUnavailable returns err as a store failure, unwrapped once if it already is one.
func asUnavailable(err error) error {
	var u *unavailableError
	if errors.As(err, &u) {
		return u
	}
	return unavailable(err)
}
