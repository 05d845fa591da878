package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestWriteTextGolden: the plain report of a fixed report (passing runs, a failed run, one with
// a failed check, a sidecar run with its API floor, and the sidecar's comparison with standalone at concurrency 16) matches testdata/report.golden (`go test ./test/load -run TestWriteTextGolden
// -update` rewrites it).
func TestWriteTextGolden(t *testing.T) {
	w, tl := goodRun()
	w.HotSource = "the receipt log"
	pass := RunChecks(w, tl)
	w.Upstream = append(w.Upstream, w.Upstream[2])
	w.Receipts, w.ReceiptsNA = nil, "this target writes no signed receipts"
	fail := RunChecks(w, tl)
	gate := map[string]Latency{seriesHot: {N: 120, P50: 1.5, P95: 4.25, P99: 9}, seriesPermit: {N: 40, P50: 4, P95: 10, P99: 16.5},
		seriesGranted: {N: 8, P50: 5, P95: 11, P99: 20}}
	direct := map[string]Latency{toolBalance: {N: 300, P50: 0.2, P95: 2, P99: 4}, toolEmail: {N: 100, P50: 0.25, P95: 2, P99: 5},
		toolPayment: {N: 90, P50: 0.2, P95: 1.75, P99: 4.5}}
	rep := Report{
		Machine: Machine{GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", NumCPU: 2, GOMAXPROCS: 2,
			LoadAvgStart: [3]float64{1.5, 1.25, 1}, LoadAvgEnd: [3]float64{2, 1.5, 1.25}, Started: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)},
		Runs: []RunReport{
			{Target: "standalone", Concurrency: 16, Mix: DefaultMix, Duration: 5, Elapsed: 5.02, Calls: 1500, Throughput: 298.8, SinkCPU: 230,
				Ops:  map[string]int{"hot": 800, "permit": 250, "escalate": 100, "replay": 60, "substitute": 70},
				Gate: gate, Direct: direct, DirectCalls: 490, DirectDuration: 2.5, Overhead: overheads(gate, direct), Checks: pass, Pass: true},
			{Target: "sidecar", Concurrency: 1, Mix: "hot=1", Error: "sidecar: actgate-sidecar exited before listening"},
			{Target: "sidecar", Concurrency: 4, Mix: DefaultMix, Duration: 5, Elapsed: 5.3, Calls: 40, Throughput: 7.5,
				Ops: map[string]int{"hot": 20, "permit": 5}, Gate: gate, Direct: direct, Overhead: overheads(gate, direct), Checks: fail},
			{Target: "sidecar", Concurrency: 16, Mix: DefaultMix, Duration: 5, Elapsed: 5.01, Calls: 1250, Throughput: 249.5, SinkCPU: 253,
				Ops:  map[string]int{"hot": 700, "permit": 200, "escalate": 150, "replay": 100, "substitute": 100},
				Gate: gate, Direct: direct, DirectCalls: 480, DirectDuration: 2.5, Overhead: overheads(gate, direct), Checks: pass, Pass: true,
				Floor: &FloorReport{Elapsed: 5.05, Calls: 2000, Throughput: 396, Writes: 1900, Acts: 900, Executed: 500, ProtectedP99: 210.5,
					Series: map[string]Latency{seriesPermit: {N: 400, P50: 50, P95: 120, P99: 150}, seriesGranted: {N: 100, P50: 80, P95: 170, P99: 210.5}}}},
		},
	}
	rep.Compare = compare(rep.Runs)
	if len(rep.Compare) != 1 || rep.Compare[0].Concurrency != 16 || rep.Compare[0].CPUPerCall != 253.0/230 {
		t.Fatalf("compare: %+v", rep.Compare)
	}
	var buf strings.Builder
	writeText(&buf, rep)
	b := []byte(buf.String())
	golden := filepath.Join("testdata", "report.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(b) != string(want) {
		t.Fatalf("report differs from %s (-update rewrites it):\n%s", golden, b)
	}
}

// TestCompare: runs pair in the order they were made, per concurrency (a concurrency listed
// twice is two pairs); a failed run pairs with nothing.
func TestCompare(t *testing.T) {
	run := func(target string, n int, tput, cpu float64) RunReport {
		return RunReport{Target: target, Concurrency: n, Throughput: tput, SinkCPU: cpu}
	}
	failed := run("sidecar", 16, 0, 0)
	failed.Error = "exited"
	got := compare([]RunReport{run("standalone", 1, 100, 200), run("sidecar", 1, 80, 300), run("standalone", 1, 200, 100),
		run("sidecar", 1, 100, 100), run("standalone", 16, 500, 100), failed})
	if len(got) != 2 || got[0].Throughput != 0.8 || got[0].CPUPerCall != 1.5 || got[1].Throughput != 0.5 || got[1].CPUPerCall != 1 {
		t.Fatalf("compare: %+v", got)
	}
}
