package standalone

import (
	"context"
	"time"

	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/sink"
)

// boltMoments is the gate's sink.MomentStore on the embedded store: binding moments, their
// votes, resolutions and grants survive a restart in actgate.db beside the journal.
type boltMoments struct{ st *boltstore.Store }

var _ sink.MomentStore = boltMoments{}

func (b boltMoments) PutMoment(ctx context.Context, m sink.StoredMoment) error {
	return b.st.PutMoment(ctx, boltstore.Moment{ID: m.ID, Settled: m.Settled, Data: m.Data})
}

func (b boltMoments) LoadMoments(ctx context.Context, retainSince time.Time) ([]sink.StoredMoment, error) {
	ms, err := b.st.LoadMoments(ctx, retainSince)
	if err != nil {
		return nil, err
	}
	out := make([]sink.StoredMoment, len(ms))
	for i, m := range ms {
		out[i] = sink.StoredMoment{ID: m.ID, Settled: m.Settled, Data: m.Data}
	}
	return out, nil
}
