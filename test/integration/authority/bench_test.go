package authority

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// reportLatency reports p50/p95/p99 of ds in milliseconds (nearest rank).
func reportLatency(b *testing.B, ds []time.Duration, elapsed time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := max(0, min(len(ds)-1, int(float64(len(ds))*p/100+0.999999999)-1))
		return float64(ds[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(95), "p95-ms")
	b.ReportMetric(at(99), "p99-ms")
	b.ReportMetric(float64(len(ds))/elapsed.Seconds(), "ops/s")
}

// BenchmarkServiceReview measures whole ActReviews over HTTPS against the envtest API server,
// as a sidecar sees them: "allow" is the hot path (TokenReview, pod, policies, Act create and
// status), "permit" adds signing and the Lease create, "consume" is the Consume review of an
// issued authority (TokenReview, pod, policies, Lease GET and UPDATE, Act status).
func BenchmarkServiceReview(b *testing.B) {
	r := newRig(b, rigOptions{})
	b.Run("allow", func(b *testing.B) {
		calls := make([]sidecarCall, b.N)
		for i := range calls {
			calls[i] = r.call(b, "bench", "get_balance", fmt.Sprintf(`{"account":"a%d"}`, i))
		}
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for i := range calls {
			t := time.Now()
			if resp := r.do(b, calls[i].req); !resp.Allowed {
				b.Fatalf("%+v", resp)
			}
			ds = append(ds, time.Since(t))
		}
		b.StopTimer()
		reportLatency(b, ds, time.Since(start))
	})
	b.Run("permit", func(b *testing.B) {
		calls := make([]sidecarCall, b.N)
		for i := range calls {
			calls[i] = r.call(b, "bench", "email_send", fmt.Sprintf(`{"to":"a%d@example.com"}`, i))
		}
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for i := range calls {
			t := time.Now()
			if resp := r.do(b, calls[i].req); !resp.Allowed || resp.Authority == nil {
				b.Fatalf("%+v", resp)
			}
			ds = append(ds, time.Since(t))
		}
		b.StopTimer()
		reportLatency(b, ds, time.Since(start))
	})
	b.Run("consume", func(b *testing.B) {
		calls := make([]sidecarCall, b.N)
		ids := make([]string, b.N)
		for i := range calls {
			calls[i] = r.call(b, "bench", "email_send", fmt.Sprintf(`{"to":"c%d@example.com"}`, i))
			resp := r.do(b, calls[i].req)
			if resp.Authority == nil {
				b.Fatalf("%+v", resp)
			}
			ids[i] = resp.Authority.ID
		}
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for i := range calls {
			t := time.Now()
			if resp := r.do(b, consumeReq(ids[i], fmt.Sprintf("op-%d", i), calls[i].binding(r.ns, 1))); !resp.Allowed {
				b.Fatalf("%+v", resp)
			}
			ds = append(ds, time.Since(t))
		}
		b.StopTimer()
		reportLatency(b, ds, time.Since(start))
	})
}
