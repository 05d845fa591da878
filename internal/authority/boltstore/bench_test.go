package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/internal/latency"
	"github.com/actgate/actgate/internal/journal"
)

// Durability mode of every benchmark here, named in each sub-benchmark as "fsync-group-commit":
// fsync (fdatasync) on every commit, commits grouped across concurrent callers (one commit,
// hence one sync of data and one of the meta page, per group). Nothing is measured with NoSync.

// prepare signs n authorities and writes them straight into the file in one transaction, so
// that setting up a benchmark does not cost n commits.
func prepare(b *testing.B, f *fixture, s *Store, n int) []authority.Authority {
	b.Helper()
	auths := make([]authority.Authority, n)
	for i := range auths {
		// Act IDs as unordered as real tool-call IDs, so the act index costs what it would.
		bind := bindingN(i)
		bind.ActID = "act-" + digestOf(fmt.Sprint("act", i))[7:39]
		a, err := f.signer.Sign(bind, f.clock.Now(), 10*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		auths[i] = a
	}
	if err := s.own.db.Update(func(tx *bolt.Tx) error {
		for _, a := range auths {
			payload, err := a.Payload()
			if err != nil {
				return err
			}
			enc, err := json.Marshal(storedAuthority{Payload: payload, Signature: a.Signature, State: authority.StateIssued})
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketAuthorities).Put([]byte(a.ID), enc); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return auths
}

// runConcurrent runs op for i in [0, n) from `callers` goroutines and reports per-operation
// p50/p95/p99 and throughput.
func runConcurrent(b *testing.B, callers, n int, op func(i int) error) {
	b.Helper()
	ds := make([][]time.Duration, callers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				ds[c] = append(ds[c], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, d := range ds {
		all = append(all, d...)
	}
	latency.Report(b, all, elapsed)
}

// BenchmarkConsumeAndPend: the protected path's store operation (full verify, CAS, dispatch
// record and receipt in one durable commit) with 1 and 64 concurrent callers.
func BenchmarkConsumeAndPend(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fsync-group-commit/callers=%d", callers), func(b *testing.B) {
			f := newFixture(b)
			s := f.open(b)
			auths := prepare(b, f, s, b.N)
			receipt := make([]byte, 512)
			runConcurrent(b, callers, b.N, func(i int) error {
				a := auths[i]
				_, _, err := s.ConsumeAndPend(context.Background(), a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), receipt)
				return err
			})
		})
	}
}

// BenchmarkIssueConsumeAndPend: the machine Permit's store operation (verify a freshly signed
// authority once, create it already consumed, write its dispatch record and receipt, all in one
// durable commit) with 1 and 64 concurrent callers. It replaces BenchmarkIssue followed by
// BenchmarkConsumeAndPend on that path.
func BenchmarkIssueConsumeAndPend(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fsync-group-commit/callers=%d", callers), func(b *testing.B) {
			f := newFixture(b)
			s := f.open(b)
			auths := make([]authority.Authority, b.N)
			for i := range auths {
				bind := bindingN(i)
				bind.ActID = "act-" + digestOf(fmt.Sprint("act", i))[7:39]
				a, err := f.signer.Sign(bind, f.clock.Now(), 10*time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				auths[i] = a
			}
			receipt := make([]byte, 512)
			runConcurrent(b, callers, b.N, func(i int) error {
				a := auths[i]
				_, _, err := s.IssueConsumeAndPend(context.Background(), a, a.Binding, pendingFor(a, journal.NewOperationID()), receipt)
				return err
			})
		})
	}
}

// BenchmarkIssue: storing a signed authority (signature check and durable create).
func BenchmarkIssue(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fsync-group-commit/callers=%d", callers), func(b *testing.B) {
			f := newFixture(b)
			s := f.open(b)
			auths := make([]authority.Authority, b.N)
			for i := range auths {
				auths[i] = f.sign(b, i)
			}
			runConcurrent(b, callers, b.N, func(i int) error {
				_, err := s.Issue(context.Background(), auths[i])
				return err
			})
		})
	}
}

// BenchmarkConsumeAndPendShared: the same from a client process's side of shared mode (here a
// second handle in this process, which talks to the owner over the unix socket exactly as
// another process would).
func BenchmarkConsumeAndPendShared(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fsync-group-commit/callers=%d", callers), func(b *testing.B) {
			f := newFixture(b)
			owner := f.open(b, shared)
			auths := prepare(b, f, owner, b.N)
			cli := f.open(b, shared)
			if cli.Owner() {
				b.Fatal("second handle owns the file")
			}
			runConcurrent(b, callers, b.N, func(i int) error {
				a := auths[i]
				_, _, err := cli.ConsumeAndPend(context.Background(), a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), nil)
				return err
			})
		})
	}
}

// BenchmarkBaselineCommit is the floor the store's numbers sit on: one bbolt commit (fsync'ed,
// same options) of a single small value, with 1 and 64 callers through the same group commit.
// Compare ConsumeAndPend with it on the same machine at the same time.
func BenchmarkBaselineCommit(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fsync-group-commit/callers=%d", callers), func(b *testing.B) {
			f := newFixture(b)
			s := f.open(b)
			c := s.own.l.commit
			runConcurrent(b, callers, b.N, func(i int) error {
				return c.do(func(tx *bolt.Tx) error {
					return tx.Bucket(bucketMeta).Put([]byte(fmt.Sprintf("k%09d", i)), []byte("v"))
				})
			})
		})
	}
}
