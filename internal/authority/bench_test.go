package authority

import (
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority/internal/latency"
)

// BenchmarkSign measures issuing (signing) one authority; BenchmarkVerify measures Verify (the
// signature check dominates). Both report p50/p95/p99 per operation.
func BenchmarkSign(b *testing.B) {
	for _, alg := range []struct {
		name   string
		signer func(testing.TB) *Signer
	}{{"ed25519", ed25519Signer}, {"ecdsa-p256", ecdsaSigner}} {
		b.Run(alg.name, func(b *testing.B) {
			s := alg.signer(b)
			bind := testBinding()
			ds := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				if _, err := s.Sign(bind, t0.Add(time.Duration(i)*time.Millisecond), time.Minute); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
			}
			latency.Report(b, ds, 0)
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, alg := range []struct {
		name   string
		signer func(testing.TB) *Signer
	}{{"ed25519", ed25519Signer}, {"ecdsa-p256", ecdsaSigner}} {
		b.Run(alg.name, func(b *testing.B) {
			s := alg.signer(b)
			v := s.Verifier()
			a, err := s.Sign(testBinding(), t0, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			expect := testBinding()
			ds := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := v.Verify(a, expect, t0); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
			}
			latency.Report(b, ds, 0)
		})
	}
}

// BenchmarkPayload measures the canonical bytes of an authority (its ID derivation included),
// which a Permit computes when signing and the store when verifying.
func BenchmarkPayload(b *testing.B) {
	a, err := ed25519Signer(b).Sign(testBinding(), t0, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Payload(); err != nil {
			b.Fatal(err)
		}
	}
}
