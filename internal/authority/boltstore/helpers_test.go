package boltstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

var t0 = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)

// clock is an injectable store clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func bindingN(i int) authority.Binding {
	return authority.Binding{
		ActID:           fmt.Sprintf("act-%04d", i),
		ArgumentsDigest: digestOf(fmt.Sprintf("args-%d", i)),
		ActionDigest:    digestOf(fmt.Sprintf("action-%d", i)),
		Tool:            "payout",
		Destination:     "https://payments.example/mcp",
		SinkID:          "sink-a",
		PolicyEpoch:     "7",
	}
}

func pendingFor(a authority.Authority, opID string) journal.DispatchRecord {
	return journal.DispatchRecord{
		OperationID:     opID,
		ActID:           a.Binding.ActID,
		AuthorityID:     a.ID,
		ActionDigest:    a.Binding.ActionDigest,
		ArgumentsDigest: a.Binding.ArgumentsDigest,
		Upstream:        a.Binding.Destination,
		Tool:            a.Binding.Tool,
	}
}

type fixture struct {
	dir    string
	path   string
	signer *authority.Signer
	clock  *clock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	signer, err := authority.LoadOrCreateKey(filepath.Join(dir, "authority.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, path: filepath.Join(dir, "actgate.db"), signer: signer, clock: newClock()}
}

func (f *fixture) options() Options {
	return Options{Verifier: f.signer.Verifier(), Now: f.clock.Now}
}

func (f *fixture) open(t testing.TB, mod ...func(*Options)) *Store {
	t.Helper()
	opts := f.options()
	for _, m := range mod {
		m(&opts)
	}
	s, err := Open(f.path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func shared(o *Options) { o.Shared = true }

func (f *fixture) sign(t testing.TB, i int) authority.Authority {
	t.Helper()
	a, err := f.signer.Sign(bindingN(i), f.clock.Now(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// issueN signs and issues n authorities (act-0000 …) from 16 goroutines, so the issuing itself
// goes through the group commit.
func (f *fixture) issueN(t testing.TB, s *Store, n int) []authority.Authority {
	t.Helper()
	auths := make([]authority.Authority, n)
	for i := range auths {
		auths[i] = f.sign(t, i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if _, err := s.Issue(context.Background(), auths[i]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return auths
}
