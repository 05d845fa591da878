// Package latency turns per-operation durations collected by a benchmark into the p50/p95/p99
// metrics reported with testing.B.ReportMetric.
package latency

import (
	"slices"
	"testing"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of ds by the nearest-rank method; ds is
// sorted in place. It returns 0 for no samples.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(float64(len(ds))*p/100+0.999999999) - 1
	rank = max(0, min(rank, len(ds)-1))
	return ds[rank]
}

// Report reports p50, p95 and p99 of ds in milliseconds, and, when elapsed > 0, the throughput
// len(ds)/elapsed in operations per second.
func Report(b *testing.B, ds []time.Duration, elapsed time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(Percentile(ds, 50)), "p50-ms")
	b.ReportMetric(ms(Percentile(ds, 95)), "p95-ms")
	b.ReportMetric(ms(Percentile(ds, 99)), "p99-ms")
	if elapsed > 0 {
		b.ReportMetric(float64(len(ds))/elapsed.Seconds(), "ops/s")
	}
}
