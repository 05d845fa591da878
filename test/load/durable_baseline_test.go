package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/test/envtest"
)

// baselineResult is one line of hack/durable-baseline.py --json.
type baselineResult struct {
	Callers     int     `json:"callers"`
	Permits     int     `json:"permits"`
	Seconds     float64 `json:"seconds"`
	PermitsPerS float64 `json:"permits_per_s"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	RanOut      bool    `json:"ran_out"`
}

// baselineCmd runs the SQLite baseline the durable permit path is measured against
// (docs/performance.md "Durable permits against SQLite") with the machine's python3 (PYTHON to
// choose another).
func baselineCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	return exec.CommandContext(t.Context(), python, append([]string{filepath.Join(root, "hack", "durable-baseline.py")}, args...)...)
}

// TestDurableBaseline runs the baseline briefly at 1 and 4 callers: each concurrency reports
// permits it counted only after their commits, and the harness itself checks, before it
// reports, that the journal holds exactly that many rows and that many leases are consumed (it
// exits non-zero otherwise). Its temporary databases are gone afterwards.
func TestDurableBaseline(t *testing.T) {
	dir := t.TempDir()
	cmd := baselineCmd(t, "--callers", "1,4", "--duration", "0.3", "--json", "--dir", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("durable-baseline.py: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per concurrency, got %q", out)
	}
	for i, want := range []int{1, 4} {
		var r baselineResult
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("line %d: %v: %q", i, err, lines[i])
		}
		if r.Callers != want || r.Permits <= 0 || r.PermitsPerS <= 0 || r.Seconds <= 0 || r.RanOut {
			t.Errorf("callers %d: %+v", want, r)
		}
		if r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.Max {
			t.Errorf("callers %d: percentiles out of order: %+v", want, r)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the baseline left %d entries in its directory", len(left))
	}
}

// TestDurableBaselineRefusesBadArguments: bad flags are a usage error (exit status 2, a message
// naming the flag), never a run.
func TestDurableBaselineRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--callers", "0"}, "--callers"},
		{[]string{"--callers", "x"}, "--callers"},
		{[]string{"--callers", "1,,-3"}, "--callers"},
		{[]string{"--callers", "5000"}, "--callers"},
		{[]string{"--duration", "0"}, "--duration"},
		{[]string{"--duration", "nan"}, "--duration"},
		{[]string{"--duration", "-1"}, "--duration"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := baselineCmd(t, append(tc.args, "--dir", t.TempDir())...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("want exit status 2, got %v; stdout %q", err, out)
			}
			if len(out) != 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stdout %q, stderr %q: want no run and a message naming %s", out, stderr.String(), tc.want)
			}
		})
	}
}

// TestDurableRounds runs hack/durable-rounds.py for one round against stand-ins for the two Go
// benchmark binaries (scripts printing the lines `go test -bench` prints) and the real SQLite
// baseline: the summary carries each series at each concurrency with its ratio to the baseline
// of the same round, and the JSON file every round's figures, the stand-ins' p50 and p99 read
// in milliseconds whichever unit the benchmark reported them in.
func TestDurableRounds(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store.test")
	sink := filepath.Join(dir, "sink.test")
	const script = "#!/bin/sh\necho 'goos: linux'\n"
	if err := os.WriteFile(store, []byte(script+
		"echo 'BenchmarkIssueConsumeAndPend/fsync-group-commit/callers=1-2  100  3000000 ns/op  300.0 ops/s  2.500 p50-ms  9.000 p95-ms  12.00 p99-ms'\n"+
		"echo 'BenchmarkIssueConsumeAndPend/fsync-group-commit/callers=64-2  900  500000 ns/op  2000 ops/s  30.00 p50-ms  90.00 p95-ms  120.0 p99-ms'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sink, []byte(script+
		"echo 'BenchmarkHandlePermitDurable/fsync-group-commit/callers=1-2  100  5000000 ns/op  200.0 calls/s  4000 p50-µs  20000 p95-µs  30000 p99-µs  130000 B/op  480 allocs/op'\n"+
		"echo 'BenchmarkHandlePermitDurable/fsync-group-commit/callers=64-2  900  900000 ns/op  1000 calls/s  50000 p50-µs  150000 p95-µs  200000 p99-µs  68000 B/op  290 allocs/op'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	out := filepath.Join(dir, "rounds.json")
	cmd := exec.CommandContext(t.Context(), python, filepath.Join(root, "hack", "durable-rounds.py"), "--rounds", "1", "--seconds", "0.3",
		"--store", "s="+store, "--sink", "g="+sink, "--json", out)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("durable-rounds.py: %v\n%s", err, text)
	}
	for _, want := range []string{"store s c=1 ", "store s c=64", "sink g c=1 ", "sink g c=64", "÷sqlite p50"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the summary has no %q:\n%s", want, text)
		}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rounds []map[string]map[string][3]float64
	if err := json.Unmarshal(raw, &rounds); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(rounds) != 1 {
		t.Fatalf("want 1 round, got %d", len(rounds))
	}
	r := rounds[0]
	for _, tc := range []struct {
		series, callers string
		want            [3]float64
	}{
		{"store s", "1", [3]float64{2.5, 12, 300}},
		{"store s", "64", [3]float64{30, 120, 2000}},
		{"sink g", "1", [3]float64{4, 30, 200}},
		{"sink g", "64", [3]float64{50, 200, 1000}},
	} {
		if got := r[tc.series][tc.callers]; got != tc.want {
			t.Errorf("%s callers=%s: got %v, want %v (p50 ms, p99 ms, ops/s)", tc.series, tc.callers, got, tc.want)
		}
	}
	for _, c := range []string{"1", "64"} {
		if b := r["sqlite"][c]; b[0] <= 0 || b[1] < b[0] || b[2] <= 0 {
			t.Errorf("sqlite callers=%s: %v", c, b)
		}
	}
}
