package sink

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// reportLatencies reports p50/p95/p99 of the observed per-call latencies, in microseconds.
func reportLatencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.95), "p95-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkEnforceHotPath: an INFORMATIONAL call on the hot path (tool-use-binding §22 T-F,
// §27.8): map the call to an act, evaluate the compiled ToolPolicy, append the in-memory
// chained receipt, invoke a no-op upstream. No authority, no consume, no fsync on the path.
// Goal: p99 < 50 µs. Figures and what sets them: docs/performance.md "Go benchmarks".
func BenchmarkEnforceHotPath(b *testing.B) { benchHotPath(b, compiledFixture(b, false)) }

// benchHotPath is the closed loop of BenchmarkEnforceHotPath on f's gate.
func benchHotPath(b *testing.B, f *fixture) {
	inv := func(context.Context, string) (InvokeResult, error) {
		return InvokeResult{Result: []byte(`{"content":[]}`), Outcome: OutcomeExecuted}, nil
	}
	c := call("s1", "tools", "search", `{"q":"weather in Lisbon","limit":10,"filters":{"lang":"en","safe":true}}`)
	// b.Loop calls the body once for the whole run, so b.N is not the number of iterations
	// here: size the sample for a few seconds of calls, so that growing it does not add
	// multi-megabyte copies to the latencies being measured.
	lat := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := f.gate.Handle(context.Background(), c, inv)
		lat = append(lat, time.Since(start))
		if err != nil || !res.Invoked {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkEnforceHotPathPaced is BenchmarkEnforceHotPath at a fixed arrival rate instead of a
// closed loop: calls start every 200 µs (5,000 calls/s, more than the MCP front end can hand the
// sink on 2 cores: a tools/call through the go-sdk costs ~0.4 ms of CPU, see T-F in
// test/conformance), so the receipt committer runs at the pace a deployment drives it rather than
// flat out beside a saturated core. Latency is still measured from each call's start. It does not
// replace the closed-loop benchmark, whose p99 is the goal. Its tail is longer than the closed
// loop's: each call starts on a goroutine just woken from a timer sleep, with cold caches, which
// is also how calls arrive from a network.
func BenchmarkEnforceHotPathPaced(b *testing.B) {
	f := compiledFixture(b, false)
	inv := func(context.Context, string) (InvokeResult, error) {
		return InvokeResult{Result: []byte(`{"content":[]}`), Outcome: OutcomeExecuted}, nil
	}
	c := call("s1", "tools", "search", `{"q":"weather in Lisbon","limit":10,"filters":{"lang":"en","safe":true}}`)
	const interval = 200 * time.Microsecond
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	next := time.Now()
	for b.Loop() {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		start := time.Now()
		res, err := f.gate.Handle(context.Background(), c, inv)
		lat = append(lat, time.Since(start))
		if err != nil || !res.Invoked {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkHandlePermitDurable: a PERSISTENT_STATE_CHANGE call under a machine permit, 1 and
// 64 concurrent callers, each call distinct: sign the authority; issue it, consume it and write
// DISPATCH_PENDING in one commit (IssueConsumeAndPend) while the receipt log makes the dispatch
// receipt durable (AppendDurable) concurrently, both before the invoke; invoke a no-op upstream;
// record EXECUTED (a second commit) before returning. Durability mode, named in the
// sub-benchmark: "fsync-group-commit" — every bbolt commit is fdatasync'ed (NoSync=false) and
// shared by every concurrent writer (boltstore's committer), and every receipt batch is written
// and fsync'ed once (receipt.Log). Nothing is measured with NoSync.
// Goal (tool-use-binding §22 T-F): p99 < 10 ms, and ≥ 2,000 calls/s on 2 cores. (With
// 64 callers in a closed loop, Little's law makes the mean latency 64 / throughput: 2,000
// calls/s means 32 ms, so p99 < 10 ms at that concurrency needs > 6,400 calls/s; callers=1
// measures the latency of one call on its own.) Figures: docs/performance.md "Go benchmarks".
func BenchmarkHandlePermitDurable(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fsync-group-commit/callers=%d", callers), func(b *testing.B) { benchPermit(b, callers) })
	}
}

func benchPermit(b *testing.B, callers int) {
	f := compiledFixture(b, false)
	inv := func(context.Context, string) (InvokeResult, error) {
		return InvokeResult{Result: []byte(`{"content":[{"type":"text","text":"created"}]}`), Outcome: OutcomeExecuted}, nil
	}
	var (
		next   atomic.Int64
		mu     sync.Mutex
		all    = make([]time.Duration, 0, b.N)
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			var lat []time.Duration
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					break
				}
				c := call(fmt.Sprintf("s%d", n%64), "tools", "ticket_create", fmt.Sprintf(`{"title":"ticket %d","priority":2}`, n))
				t0 := time.Now()
				res, err := f.gate.Handle(context.Background(), c, inv)
				lat = append(lat, time.Since(t0))
				if err != nil || !res.Invoked {
					failed.Add(1)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d calls did not invoke", failed.Load())
	}
	reportLatencies(b, all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
}
