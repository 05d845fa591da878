package receipt

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
)

// reportLatency adds p50/p95/p99 of d (one entry per operation) to b's metrics.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.95), "p95-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

func benchKeys(b *testing.B) []struct {
	name string
	sv   signature.SignerVerifier
} {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	p256, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		sv   signature.SignerVerifier
	}{{"ed25519", testKey(b, "bench")}, {"ecdsa-p256", p256}}
}

// BenchmarkAppend is the hot path: chain in memory, no write, no signature, no fsync. The
// committer runs meanwhile, writing to a real file. A tight loop appends far faster than one
// fsync per default MaxBatch (512) can drain, which would end in ErrBacklog (by design: fail
// closed rather than grow without bound); the benchmark raises MaxBatch and MaxPending so
// that it measures Append and not the backlog rule.
func BenchmarkAppend(b *testing.B) {
	l := openTest(b, filepath.Join(b.TempDir(), "log"), testKey(b, "bench"), func(o *Options) {
		o.Now, o.MaxBatch, o.MaxPending = time.Now, 1<<14, 1<<21
	})
	defer l.Close()
	rs := make([]Receipt, 64)
	for i := range rs {
		rs[i] = sample(i)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := l.Append(rs[i%len(rs)]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkAppendDurable: each call returns after its batch is written, checkpointed (signed)
// and fsync'ed. With 64 concurrent callers, group commit shares one fsync and one signature
// among the receipts that arrive during the previous commit.
func BenchmarkAppendDurable(b *testing.B) {
	for _, key := range benchKeys(b) {
		for _, callers := range []int{1, 64} {
			b.Run(key.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				l := openTest(b, filepath.Join(b.TempDir(), "log"), key.sv, func(o *Options) { o.Now = time.Now })
				ctx := context.Background()
				lats := make([][]time.Duration, callers)
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for c := range callers {
					n := b.N / callers
					if c < b.N%callers {
						n++
					}
					wg.Go(func() {
						lat := make([]time.Duration, 0, n)
						r := sample(c)
						for range n {
							t0 := time.Now()
							if _, err := l.AppendDurable(ctx, r); err != nil {
								b.Error(err)
								return
							}
							lat = append(lat, time.Since(t0))
						}
						lats[c] = lat
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "receipts/s")
				reportLatency(b, slices.Concat(lats...))
			})
		}
	}
}

// BenchmarkVerify: verifying a closed log of 1024 receipts in batches of 64.
func BenchmarkVerify(b *testing.B) {
	sv := testKey(b, "bench")
	batches := slices.Repeat([]int{64}, 16)
	_, log := buildLog(b, b.TempDir(), "log", sv, 0, batches...)
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Verify(bytes.NewReader(log), sv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/receipt")
}
