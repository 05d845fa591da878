package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
)

// testKey returns a deterministic Ed25519 signer-verifier for seed.
func testKey(tb testing.TB, seed string) *signature.ED25519SignerVerifier {
	tb.Helper()
	s := sha256.Sum256([]byte(seed))
	sv, err := signature.LoadED25519SignerVerifier(ed25519.NewKeyFromSeed(s[:]))
	if err != nil {
		tb.Fatal(err)
	}
	return sv
}

// stepClock is a deterministic clock that advances 1ms per reading; safe for concurrent use.
func stepClock() func() time.Time {
	var n atomic.Int64
	start := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	return func() time.Time { return start.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// sample returns a receipt with every member the caller supplies, varied by i.
func sample(i int) Receipt {
	d := func(s string) string { return jcs.Digest([]byte(s)) }
	r := Receipt{
		ActID:           fmt.Sprintf("act-%04d", i),
		Tool:            "payment.release",
		Server:          "mcp://payments.internal",
		Class:           "FINANCIAL",
		ArgumentsDigest: d(fmt.Sprintf("args-%d", i)),
		Decision:        DecisionDeny,
		Code:            "EF_AUTHORITY_MISSING",
	}
	switch i % 4 {
	case 1:
		r.Decision, r.Code = DecisionAllow, ""
		r.ActionDigest = d(fmt.Sprintf("action-%d", i))
		r.AuthorityID = fmt.Sprintf("auth-%d", i)
		r.OperationID = fmt.Sprintf("op-%d", i)
	case 2:
		r.Decision, r.Code = DecisionOutcome, ""
		r.OperationID = fmt.Sprintf("op-%d", i)
		r.State = "EXECUTED"
	case 3:
		r.Decision, r.Code = DecisionEscalate, "EF_HUMAN_REQUIRED"
		r.Server, r.Class = "", ""
	}
	return r
}

func openTest(tb testing.TB, path string, sv signature.SignerVerifier, mod func(*Options)) *Log {
	tb.Helper()
	o := Options{Path: path, Signer: sv, Now: stepClock()}
	if mod != nil {
		mod(&o)
	}
	l, err := Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// buildLog writes batches of receipts sample(base+1), sample(base+2), ... (one checkpoint per
// batch) to a new log under dir with key and returns its path and bytes.
func buildLog(tb testing.TB, dir, name string, sv signature.SignerVerifier, base int, batches ...int) (string, []byte) {
	tb.Helper()
	path := filepath.Join(dir, name)
	l := openTest(tb, path, sv, func(o *Options) { o.MaxDelay = time.Hour; o.MaxBatch = 1 << 20 })
	i := base
	for _, n := range batches {
		for range n {
			i++
			if _, err := l.Append(sample(i)); err != nil {
				tb.Fatal(err)
			}
		}
		if err := l.Flush(tb.Context()); err != nil {
			tb.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return path, b
}

func lines(b []byte) [][]byte {
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) > 0 && len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func join(ls [][]byte) []byte { return bytes.Join(ls, nil) }

func codesOf(err error) []Code {
	var cs []Code
	for _, p := range ProblemsOf(err) {
		cs = append(cs, p.Code)
	}
	return cs
}

// recFile wraps the log file to record what was written and what was fsync'ed, and to fail or
// hold Sync on demand.
type recFile struct {
	f *os.File

	mu      sync.Mutex
	written int64
	synced  int64
	syncs   int
	failErr error
	gate    chan struct{} // when non-nil, Sync waits for it to be closed
}

func (r *recFile) Write(b []byte) (int, error) {
	n, err := r.f.Write(b)
	r.mu.Lock()
	r.written += int64(n)
	r.mu.Unlock()
	return n, err
}

func (r *recFile) Sync() error {
	r.mu.Lock()
	gate, fail := r.gate, r.failErr
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return fail
	}
	if err := r.f.Sync(); err != nil {
		return err
	}
	r.mu.Lock()
	r.synced = r.written
	r.syncs++
	r.mu.Unlock()
	return nil
}

func (r *recFile) Close() error { return r.f.Close() }

func (r *recFile) state() (written, synced int64, syncs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written, r.synced, r.syncs
}

func openRecorded(tb testing.TB, o Options) (*Log, *recFile) {
	tb.Helper()
	var rf *recFile
	l, err := open(o, func(f *os.File) file { rf = &recFile{f: f}; return rf })
	if err != nil {
		tb.Fatal(err)
	}
	return l, rf
}
