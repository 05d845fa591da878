package receipt

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
)

// TestRoundTrip: many goroutines mix Append and AppendDurable; after Close the file verifies
// with seq 1..N contiguous and holds exactly the receipts Append returned; reopening continues
// the chain.
func TestRoundTrip(t *testing.T) {
	for _, key := range []struct {
		name string
		sv   func(t *testing.T) signature.SignerVerifier
	}{
		{"ed25519", func(t *testing.T) signature.SignerVerifier { return testKey(t, "round-trip") }},
		{"ecdsa-p256", func(t *testing.T) signature.SignerVerifier {
			priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			return sv
		}},
	} {
		t.Run(key.name, func(t *testing.T) {
			sv := key.sv(t)
			path := filepath.Join(t.TempDir(), "receipts.jsonl")
			l := openTest(t, path, sv, func(o *Options) { o.MaxBatch = 16; o.MaxDelay = time.Millisecond })

			const workers, each = 16, 40
			got := make([][]Receipt, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						r := sample(w*each + i)
						var out Receipt
						var err error
						if i%3 == 0 {
							out, err = l.AppendDurable(t.Context(), r)
						} else {
							out, err = l.Append(r)
						}
						if err != nil {
							t.Error(err)
							return
						}
						got[w] = append(got[w], out)
					}
				})
			}
			wg.Wait()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			const n = workers * each
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(bytes.NewReader(b), sv)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if rep.Receipts != n || rep.UnsignedTail != 0 || rep.Checkpoints < n/16 || rep.SignedSeq != n || rep.SignedHead != rep.Head {
				t.Fatalf("report %+v", rep)
			}
			// Every returned receipt is in the file, at its seq, byte for byte.
			bySeq := map[uint64][]byte{}
			for _, ln := range lines(b) {
				if bytes.HasPrefix(ln, []byte(`{"checkpoint":`)) {
					continue
				}
				r, err := decodeReceipt(ln)
				if err != nil {
					t.Fatal(err)
				}
				bySeq[r.Seq] = bytes.TrimSuffix(ln, []byte("\n"))
			}
			for seq := uint64(1); seq <= n; seq++ {
				if bySeq[seq] == nil {
					t.Fatalf("seq %d missing", seq)
				}
			}
			for _, rs := range got {
				for _, r := range rs {
					c, _ := r.Canonical()
					if !bytes.Equal(bySeq[r.Seq], c) {
						t.Fatalf("seq %d in file:\n%s\nreturned:\n%s", r.Seq, bySeq[r.Seq], c)
					}
				}
			}

			// Reopen: nothing to recover; the chain continues from the head.
			l = openTest(t, path, sv, nil)
			if rec := l.Recovered(); rec.TornBytes != 0 || rec.UnsignedReceipts != 0 || rec.SavedTo != "" || rec.Report.Head != rep.Head || rec.Report.Receipts != n {
				t.Fatalf("recovery %+v", rec)
			}
			next, err := l.AppendDurable(t.Context(), sample(n))
			if err != nil {
				t.Fatal(err)
			}
			if next.Seq != n+1 || next.Prev != rep.Head {
				t.Fatalf("after reopen: seq %d prev %s, want %d %s", next.Seq, next.Prev, n+1, rep.Head)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			f, _ := os.Open(path)
			defer f.Close()
			if rep, err := Verify(f, sv); err != nil || rep.Receipts != n+1 || rep.Head != next.Digest {
				t.Fatalf("after reopen: %+v %v", rep, err)
			}
		})
	}
}

// TestAppendDurableIsOnDisk: when AppendDurable returns, the bytes fsync'ed so far verify and a
// checkpoint in them covers the receipt. Append alone writes nothing until a commit is due.
func TestAppendDurableIsOnDisk(t *testing.T) {
	sv := testKey(t, "durable")
	path := filepath.Join(t.TempDir(), "log")
	// MaxDelay of an hour: only AppendDurable, Flush, MaxBatch or Close can start a commit.
	l, rf := openRecorded(t, Options{Path: path, Signer: sv, Now: stepClock(), MaxDelay: time.Hour, MaxBatch: 1000})

	for i := range 5 {
		if _, err := l.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if w, _, _ := rf.state(); w != 0 {
		t.Fatalf("Append wrote %d bytes before any commit was due", w)
	}

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				r, err := l.AppendDurable(t.Context(), sample(100*g+i))
				if err != nil {
					t.Error(err)
					return
				}
				_, synced, _ := rf.state()
				b, err := os.ReadFile(path)
				if err != nil {
					t.Error(err)
					return
				}
				if int64(len(b)) < synced {
					t.Errorf("file is %d bytes, %d were fsync'ed", len(b), synced)
					return
				}
				rep, err := Verify(bytes.NewReader(b[:synced]), sv)
				if err != nil || rep.SignedSeq < r.Seq {
					t.Errorf("seq %d returned, fsync'ed prefix (%d bytes) covers up to %d (%v)", r.Seq, synced, rep.SignedSeq, err)
				}
			}
		})
	}
	wg.Wait()
	_, _, syncs := rf.state()
	t.Logf("40 durable appends from 8 goroutines: %d fsyncs", syncs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.Receipts != 45 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestFlushAndMaxDelay: Flush makes earlier Appends durable; without it, MaxDelay does.
func TestFlushAndMaxDelay(t *testing.T) {
	sv := testKey(t, "flush")
	path := filepath.Join(t.TempDir(), "log")
	l, rf := openRecorded(t, Options{Path: path, Signer: sv, Now: stepClock(), MaxDelay: 20 * time.Millisecond})
	defer l.Close()
	for i := range 3 {
		if _, err := l.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.SignedSeq != 3 {
		t.Fatalf("after Flush: %+v %v", rep, err)
	}
	if _, err := l.Append(sample(3)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, syncs := rf.state(); syncs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an Append was not committed within MaxDelay (waited 5s)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.SignedSeq != 4 {
		t.Fatalf("after MaxDelay: %+v %v", rep, err)
	}
}

// TestMaxBatch: a checkpoint covers at most MaxBatch receipts.
func TestMaxBatch(t *testing.T) {
	sv := testKey(t, "batch")
	path := filepath.Join(t.TempDir(), "log")
	l := openTest(t, path, sv, func(o *Options) { o.MaxBatch = 4; o.MaxDelay = time.Hour })
	for i := range 10 {
		if _, err := l.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var prev uint64
	for _, ln := range lines(b) {
		if !bytes.HasPrefix(ln, []byte(`{"checkpoint":`)) {
			continue
		}
		c, _, err := decodeCheckpoint(bytes.TrimSuffix(ln, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if c.PrevSeq != prev || c.Seq-c.PrevSeq > 4 {
			t.Fatalf("checkpoint %+v after %d", c, prev)
		}
		prev = c.Seq
	}
	if prev != 10 {
		t.Fatalf("last checkpoint at %d", prev)
	}
}

// TestFailClosed: a failed fsync fails the waiting AppendDurable and every later call, and the
// receipts it held are never reported durable.
func TestFailClosed(t *testing.T) {
	sv := testKey(t, "fail")
	path := filepath.Join(t.TempDir(), "log")
	l, rf := openRecorded(t, Options{Path: path, Signer: sv, Now: stepClock()})
	if _, err := l.AppendDurable(t.Context(), sample(0)); err != nil {
		t.Fatal(err)
	}
	rf.mu.Lock()
	rf.failErr = errors.New("EIO")
	rf.mu.Unlock()
	if _, err := l.AppendDurable(t.Context(), sample(1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("AppendDurable with failing fsync: %v", err)
	}
	if _, err := l.Append(sample(2)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after failure: %v", err)
	}
	if err := l.Flush(t.Context()); !errors.Is(err, ErrFailed) {
		t.Fatalf("Flush after failure: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close after failure: %v", err)
	}
	// Only the fsync failed: the batch's bytes, checkpoint included, reached the file, so
	// reopening finds a complete, verifying batch and keeps it.
	l = openTest(t, path, sv, nil)
	defer l.Close()
	if rep := l.Recovered().Report; rep.Receipts != 2 {
		t.Fatalf("reopen: %+v", l.Recovered())
	}
}

// TestAppendDurableContext: an ended context appends nothing; a deadline that passes during
// the fsync returns an error, and the receipt is still committed later.
func TestAppendDurableContext(t *testing.T) {
	sv := testKey(t, "ctx")
	path := filepath.Join(t.TempDir(), "log")
	l, rf := openRecorded(t, Options{Path: path, Signer: sv, Now: stepClock()})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.AppendDurable(ctx, sample(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	gate := make(chan struct{})
	rf.mu.Lock()
	rf.gate = gate
	rf.mu.Unlock()
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	r, err := l.AppendDurable(ctx, sample(1))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held fsync: %v", err)
	}
	if r.Seq != 1 {
		t.Fatalf("the cancelled call must not have taken a seq; got %d", r.Seq)
	}
	rf.mu.Lock()
	rf.gate = nil
	rf.mu.Unlock()
	close(gate)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.Receipts != 1 || rep.SignedSeq != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestBacklog: when commits cannot keep up, Append fails with ErrBacklog instead of growing
// without bound, and appends nothing.
func TestBacklog(t *testing.T) {
	sv := testKey(t, "backlog")
	path := filepath.Join(t.TempDir(), "log")
	l, rf := openRecorded(t, Options{Path: path, Signer: sv, Now: stepClock(), MaxBatch: 4, MaxPending: 8, MaxDelay: time.Hour})
	gate := make(chan struct{})
	rf.mu.Lock()
	rf.gate = gate
	rf.mu.Unlock()
	for i := range 4 { // a full batch: taken by the committer, which then blocks in Sync
		if _, err := l.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		taken := len(l.entries) == 0
		l.mu.Unlock()
		if taken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("committer did not take the full batch")
		}
		time.Sleep(time.Millisecond)
	}
	var err error
	n := 0
	for ; n < 100 && err == nil; n++ {
		_, err = l.Append(sample(10 + n))
	}
	if !errors.Is(err, ErrBacklog) || n != 9 {
		t.Fatalf("after %d appends: %v, want ErrBacklog on the 9th", n, err)
	}
	rf.mu.Lock()
	rf.gate = nil
	rf.mu.Unlock()
	close(gate)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.Receipts != 12 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestCloseAndLock: Close commits what is pending; a second writer is refused while the first
// holds the log; after Close every call fails with ErrClosed.
func TestCloseAndLock(t *testing.T) {
	sv := testKey(t, "close")
	path := filepath.Join(t.TempDir(), "log")
	l := openTest(t, path, sv, func(o *Options) { o.MaxDelay = time.Hour })
	if _, err := Open(Options{Path: path, Signer: sv}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	for i := range 3 {
		if _, err := l.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.Receipts != 3 || rep.UnsignedTail != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(sample(9)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := l.AppendDurable(t.Context(), sample(9)); !errors.Is(err, ErrClosed) {
		t.Fatalf("AppendDurable after Close: %v", err)
	}
	// The lock went with the file.
	l = openTest(t, path, sv, nil)
	l.Close()
}

// TestOpenOptions: options Open refuses.
func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	rsaLike, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384, _ := signature.LoadECDSASignerVerifier(rsaLike, crypto.SHA384)
	for _, tt := range []struct {
		name string
		o    Options
	}{
		{"no path", Options{Signer: testKey(t, "x")}},
		{"no signer", Options{Path: filepath.Join(dir, "a")}},
		{"P-384 key", Options{Path: filepath.Join(dir, "b"), Signer: p384}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Open(tt.o); !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
		})
	}
}
