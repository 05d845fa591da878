package receipt

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// OnCheckpoint sees the last checkpoint of every commit after its fsync, and Open offers the
// file's last checkpoint again; each verifies under the log's key and pins the file's chain.
func TestOnCheckpoint(t *testing.T) {
	sv := testKey(t, "hook")
	path := filepath.Join(t.TempDir(), "r.jsonl")
	var mu sync.Mutex
	var got []SignedCheckpoint
	hook := func(o *Options) {
		o.MaxDelay = time.Hour
		o.OnCheckpoint = func(c SignedCheckpoint) { mu.Lock(); got = append(got, c); mu.Unlock() }
	}
	l := openTest(t, path, sv, hook)
	for batch := range 3 {
		for i := range 2 {
			if _, err := l.Append(sample(batch*2 + i + 1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d checkpoints offered, want 3", len(got))
	}
	for i, c := range got {
		if c.Seq != uint64(2*(i+1)) || c.PrevSeq != uint64(2*i) {
			t.Errorf("checkpoint %d: seq %d prev %d", i, c.Seq, c.PrevSeq)
		}
		if err := VerifyCheckpoint(sv, c); err != nil {
			t.Errorf("checkpoint %d: %v", i, err)
		}
	}
	rep, err := verifyFile(t, path, sv)
	if err != nil || rep.SignedSeq != 6 || rep.SignedHead != got[2].Head {
		t.Fatalf("file report %+v, %v; last offered %+v", rep, err, got[2].Checkpoint)
	}

	// Reopening offers the last checkpoint again before any new commit.
	got = nil
	l = openTest(t, path, sv, hook)
	mu.Lock()
	if len(got) != 1 || got[0].Seq != 6 || got[0].Head != rep.SignedHead {
		t.Errorf("reopen offered %+v, want the checkpoint at 6", got)
	}
	mu.Unlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCheckpointRefuses(t *testing.T) {
	sv := testKey(t, "hook")
	var last SignedCheckpoint
	path := filepath.Join(t.TempDir(), "r.jsonl")
	l := openTest(t, path, sv, func(o *Options) { o.OnCheckpoint = func(c SignedCheckpoint) { last = c } })
	if _, err := l.Append(sample(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := VerifyCheckpoint(sv, last); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*SignedCheckpoint)
		want error
	}{
		{"other head", func(c *SignedCheckpoint) { c.Head = sample(2).ArgumentsDigest }, ErrBadSignature},
		{"other seq", func(c *SignedCheckpoint) { c.Seq++ }, ErrBadSignature},
		{"other time", func(c *SignedCheckpoint) { c.Time = c.Time.Add(time.Nanosecond) }, ErrBadSignature},
		{"flipped signature", func(c *SignedCheckpoint) { c.Signature = append([]byte(nil), c.Signature...); c.Signature[0] ^= 1 }, ErrBadSignature},
		{"no signature", func(c *SignedCheckpoint) { c.Signature = nil }, ErrInvalid},
		{"wrong type", func(c *SignedCheckpoint) { c.Type = "x" }, ErrInvalid},
		{"seq not after prev", func(c *SignedCheckpoint) { c.PrevSeq = c.Seq }, ErrInvalid},
		{"bad head", func(c *SignedCheckpoint) { c.Head = "sha256:00" }, ErrInvalid},
		{"no key id", func(c *SignedCheckpoint) { c.KeyID = "" }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := last
			tc.mod(&c)
			if err := VerifyCheckpoint(sv, c); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	if err := VerifyCheckpoint(testKey(t, "other"), last); !errors.Is(err, ErrBadSignature) {
		t.Errorf("other key: %v", err)
	}
}
