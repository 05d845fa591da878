package leasestore_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/internal/latency"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/test/envtest"
)

// BenchmarkLeaseConsume measures Consume (an uncached GET, signature and binding checks, and
// the resourceVersion-conditioned UPDATE) against a real kube-apiserver and etcd, and reports
// p50/p95/p99 per consume. The Leases are issued before the timer starts. -cpu sets nothing
// here; "parallel" runs 16 consumers on distinct Leases, as concurrent sidecars would.
func BenchmarkLeaseConsume(b *testing.B) {
	env := envtest.Start(b)
	ns := env.Namespace(b)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := authority.NewSigner(priv)
	if err != nil {
		b.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	store, err := leasestore.NewForConfig(cfg, leasestore.Options{Verifier: signer.Verifier()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	seq := 0
	issue := func(n int) []authority.Authority {
		out := make([]authority.Authority, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 16)
		for i := range out {
			seq++
			s := seq
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				sum := sha256.Sum256(fmt.Appendf(nil, "%d", s))
				d := "sha256:" + hex.EncodeToString(sum[:])
				a, err := signer.Sign(authority.Binding{ActID: fmt.Sprintf("act-%d", s), ArgumentsDigest: d, ActionDigest: d, Tool: "send_payment",
					Destination: "https://payments.example/mcp", SinkID: "sink", PolicyEpoch: "1", Namespace: ns}, time.Now(), time.Hour)
				if err == nil {
					_, err = store.Issue(ctx, a)
				}
				if err != nil {
					errs <- err
				}
				out[i] = a
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return out
	}

	b.Run("serial", func(b *testing.B) {
		auths := issue(b.N)
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			t := time.Now()
			if _, err := store.Consume(ctx, auths[i].ID, auths[i].Binding, authority.Consumption{OperationID: "op"}); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t))
		}
		b.StopTimer()
		latency.Report(b, ds, time.Since(start))
	})

	b.Run("parallel16", func(b *testing.B) {
		auths := issue(b.N)
		ds := make([]time.Duration, b.N)
		next := make(chan int, b.N)
		for i := range b.N {
			next <- i
		}
		close(next)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for i := range next {
					t := time.Now()
					if _, err := store.Consume(ctx, auths[i].ID, auths[i].Binding, authority.Consumption{OperationID: "op"}); err != nil {
						b.Error(err)
						return
					}
					ds[i] = time.Since(t)
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		latency.Report(b, ds, time.Since(start))
	})
}
