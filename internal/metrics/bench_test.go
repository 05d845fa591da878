package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/sink"
)

// BenchmarkCallDecided is the Observer's cost on the sink's request path for one call: a
// histogram observation and one or two counter increments.
func BenchmarkCallDecided(b *testing.B) {
	m, err := metrics.NewGate(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	events := []sink.CallEvent{
		{Class: act.ClassInformational, Allowed: true, Invoked: true, Outcome: sink.PolicyAllow, Duration: 40 * time.Microsecond},
		{Class: act.ClassFinancial, Code: ef.EFPolicyDenied, Outcome: sink.PolicyDeny, Duration: 20 * time.Microsecond},
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.CallDecided(events[i&1])
			i++
		}
	})
}
