package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// TestReadSnapshot: after the store is closed, a snapshot shows every authority with its state
// and consumer and every dispatch record in its state; while a writer holds the file the
// snapshot waits and then fails with ErrUnavailable; a file that is not a store is refused.
func TestReadSnapshot(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	auths := f.issueN(t, s, 3)
	rec := pendingFor(auths[0], journal.NewOperationID())
	if _, _, err := s.ConsumeAndPend(ctx, auths[0].ID, auths[0].Binding, rec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, rec.OperationID, journal.StateExecuted,
		journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("ok"), Result: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}

	if _, err := ReadSnapshot(f.path, 50*time.Millisecond); !errors.Is(err, journal.ErrUnavailable) {
		t.Fatalf("snapshot while the writer holds the file: %v, want journal.ErrUnavailable", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadSnapshot(f.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Authorities) != 3 || len(snap.Dispatches) != 1 {
		t.Fatalf("snapshot holds %d authorities and %d dispatches, want 3 and 1", len(snap.Authorities), len(snap.Dispatches))
	}
	consumed := 0
	for _, a := range snap.Authorities {
		if a.State == authority.StateConsumed {
			consumed++
			if a.Authority.ID != auths[0].ID || a.ConsumedBy != rec.OperationID {
				t.Fatalf("consumed authority %s by %s, want %s by %s", a.Authority.ID, a.ConsumedBy, auths[0].ID, rec.OperationID)
			}
		}
	}
	if consumed != 1 {
		t.Fatalf("%d consumed authorities, want 1", consumed)
	}
	if d := snap.Dispatches[0]; d.OperationID != rec.OperationID || d.State != journal.StateExecuted || d.AuthorityID != auths[0].ID {
		t.Fatalf("dispatch %+v", d)
	}

	other := filepath.Join(t.TempDir(), "not-a-store")
	if err := os.WriteFile(other, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshot(other, time.Second); err == nil {
		t.Fatal("a file that is not a store was read")
	}
}
