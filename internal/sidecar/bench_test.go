package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/sink"
)

// BenchmarkHandle measures the sidecar's part of one call, with the authority service a stub
// over loopback HTTPS and an invoker that answers at once: the hot path (decided in the pod, no
// request) and a permit (one Permit request; the authority verified and journaled consumed
// with DISPATCH_PENDING, then the outcome, fsynced in bbolt; the outcome's report goes through
// the outbox, off the call). It reports p50/p95/p99 per call; the real service adds its
// API-server round trips.
func BenchmarkHandle(b *testing.B) {
	for _, tool := range []string{"get_balance", "send_payment"} {
		b.Run(tool, func(b *testing.B) {
			f := newFixture(b)
			inv := func(context.Context, string) (sink.InvokeResult, error) {
				return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				c := sink.Call{Session: "bench", Agent: testAgent, Server: "payments", Destination: f.up.URL, Tool: tool,
					Args: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, i))}
				start := time.Now()
				res, err := f.gate.Handle(context.Background(), c, inv)
				lat = append(lat, time.Since(start))
				if err != nil || !res.Allowed {
					b.Fatalf("%+v %v", res, err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.50), "p50-µs")
			b.ReportMetric(q(0.95), "p95-µs")
			b.ReportMetric(q(0.99), "p99-µs")
		})
	}
}
