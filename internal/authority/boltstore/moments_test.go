package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority"
)

func momentN(i int, settled time.Time) Moment {
	return Moment{ID: fmt.Sprintf("bm-%032x", i), Settled: settled, Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
}

// TestMomentsRoundTrip: what PutMoment stored (the last write of each id) is what LoadMoments
// returns after a reopen; retention deletes exactly the moments settled before its cut, and
// the settled index follows every rewrite.
func TestMomentsRoundTrip(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	for i := range 4 {
		if err := s.PutMoment(ctx, momentN(i, t0.Add(time.Duration(i)*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	// Moment 0 is rewritten (a vote, then its resolution) and now settles last.
	m0 := momentN(0, t0.Add(10*time.Hour))
	m0.Data = []byte(`{"n":0,"resolved":true}`)
	if err := s.PutMoment(ctx, m0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = f.open(t)
	got, err := s.LoadMoments(ctx, time.Time{})
	if err != nil || len(got) != 4 {
		t.Fatalf("LoadMoments: %d %v", len(got), err)
	}
	if got[0].ID != m0.ID || !bytes.Equal(got[0].Data, m0.Data) || !got[0].Settled.Equal(m0.Settled) {
		t.Fatalf("moment 0: %+v", got[0])
	}
	// Cut at t0+2h: moments 1 (t0+1h) goes; 0 (rewritten to t0+10h), 2 and 3 stay.
	got, err = s.LoadMoments(ctx, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	if want := []string{momentN(0, t0).ID, momentN(2, t0).ID, momentN(3, t0).ID}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("after retention %v, want %v", ids, want)
	}
	s.Close()
	editFile(t, f.path, func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketBySettled).Stats().KeyN; n != 3 {
			return fmt.Errorf("settled index holds %d keys, want 3", n)
		}
		return nil
	})
}

// TestPutMomentRefusesBadInput: a record without id, settled time or data is refused.
func TestPutMomentRefusesBadInput(t *testing.T) {
	s := newFixture(t).open(t)
	for name, m := range map[string]Moment{
		"no id":      {Settled: t0, Data: []byte("{}")},
		"long id":    {ID: string(make([]byte, maxMomentID+1)), Settled: t0, Data: []byte("{}")},
		"no settled": {ID: "bm-1", Data: []byte("{}")},
		"no data":    {ID: "bm-1", Settled: t0},
	} {
		if err := s.PutMoment(ctx, m); !errors.Is(err, authority.ErrStoreUnavailable) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestMomentCorruption: a damaged moment record or index key makes LoadMoments fail as
// unavailable (the gate then refuses to start), never panic or skip it.
func TestMomentCorruption(t *testing.T) {
	for name, edit := range map[string]func(tx *bolt.Tx) error{
		"garbage": func(tx *bolt.Tx) error { return tx.Bucket(bucketMoments).Put([]byte("bm-9"), []byte("{not json")) },
		"other id": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMoments).Put([]byte("bm-9"), []byte(`{"id":"bm-8","settled":"2026-07-27T12:00:00Z","data":"e30="}`))
		},
		"no data": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMoments).Put([]byte("bm-9"), []byte(`{"id":"bm-9","settled":"2026-07-27T12:00:00Z"}`))
		},
		"short index key": func(tx *bolt.Tx) error { return tx.Bucket(bucketBySettled).Put([]byte{0}, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t)
			if err := s.PutMoment(ctx, momentN(1, t0)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			editFile(t, f.path, edit)
			s = f.open(t)
			if _, err := s.LoadMoments(ctx, t0.Add(time.Hour)); !errors.Is(err, authority.ErrStoreUnavailable) {
				t.Fatalf("LoadMoments of a corrupt file: %v", err)
			}
		})
	}
}

// TestMigrateSchema2: a schema 2 file (no moments buckets) opens, keeps its journal, stores
// moments and records schema 3; a build reading schema 2 refuses the result (exact schema
// string), as the open of a newer schema here does.
func TestMigrateSchema2(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	a := f.sign(t, 1)
	if _, err := s.Issue(ctx, a); err != nil {
		t.Fatal(err)
	}
	s.Close()
	editFile(t, f.path, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMoments, bucketBySettled} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(schemaVersion2))
	})
	if _, err := ReadSnapshot(f.path, time.Second); err != nil {
		t.Fatalf("a schema 2 file is no longer readable as a backup: %v", err)
	}
	s = f.open(t)
	if _, err := s.Get(ctx, "", a.ID); err != nil {
		t.Fatalf("authority after migration: %v", err)
	}
	if err := s.PutMoment(ctx, momentN(1, t0)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadMoments(ctx, time.Time{}); err != nil || len(got) != 1 {
		t.Fatalf("moments after migration: %d %v", len(got), err)
	}
	s.Close()
	editFile(t, f.path, func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != schemaVersion {
			return fmt.Errorf("schema after migration %q, want %q", v, schemaVersion)
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("actgate-boltstore/99"))
	})
	if _, err := Open(f.path, f.options()); err == nil {
		t.Fatal("a file of a newer schema opened")
	}
}

func FuzzStoredMoment(f *testing.F) {
	f.Add([]byte("bm-1"), []byte(`{"id":"bm-1","settled":"2026-07-27T12:00:00Z","data":"e30="}`))
	f.Add([]byte("bm-1"), []byte(`{"id":"bm-1","settled":"0001-01-01T00:00:00Z","data":""}`))
	f.Add([]byte(""), []byte(`{"id":"","extra":1}`))
	f.Add([]byte("bm-1"), []byte(`[]`))
	f.Fuzz(func(t *testing.T, key, data []byte) {
		m, err := decodeMoment(key, data)
		if err != nil {
			if !errors.Is(err, authority.ErrStoreUnavailable) {
				t.Fatalf("decode error %v is not unavailable", err)
			}
			return
		}
		if m.ID != string(key) || m.ID == "" || m.Settled.IsZero() || len(m.Data) == 0 {
			t.Fatalf("accepted an inconsistent record: %+v", m)
		}
	})
}

// TestMomentsThroughTheSocket: in shared mode a client stores and loads moments through the
// owner, and a refusal arrives as unavailable.
func TestMomentsThroughTheSocket(t *testing.T) {
	f := newFixture(t)
	owner := f.open(t, shared)
	cli := f.open(t, shared)
	if err := cli.PutMoment(ctx, momentN(1, t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := cli.PutMoment(ctx, Moment{ID: "bm-1"}); !errors.Is(err, authority.ErrStoreUnavailable) {
		t.Fatalf("bad moment via client: %v", err)
	}
	got, err := owner.LoadMoments(ctx, t0)
	if err != nil || len(got) != 1 || got[0].ID != momentN(1, t0).ID || !got[0].Settled.Equal(t0.Add(time.Hour)) {
		t.Fatalf("owner reads %+v %v", got, err)
	}
	if got, err := cli.LoadMoments(ctx, t0.Add(2*time.Hour)); err != nil || len(got) != 0 {
		t.Fatalf("client retention: %+v %v", got, err)
	}
}
