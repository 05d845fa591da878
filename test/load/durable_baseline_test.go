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
