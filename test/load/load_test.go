package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/test/envtest"
)

// TestLoadShort is `make test`'s load run: a short bounded run of the whole mix against the
// standalone gate at concurrency 1 and 16 and against the sidecar rig, every invariant checked. It
// builds cmd/actgate (set ACTGATE_LOAD_BIN to reuse a binary) and skips under -short. The numbers
// it logs come from a shared machine and are not asserted.
func TestLoadShort(t *testing.T) {
	envtest.SkipIfShort(t)
	mix, err := ParseMix(DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("ACTGATE_LOAD_BIN")
	if bin == "" {
		root, err := envtest.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if bin, err = buildActgate(t.Context(), root, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		t.Logf("built cmd/actgate in %s", time.Since(start).Round(100*time.Millisecond))
	}
	runs := []struct {
		target      string
		concurrency []int
	}{
		{"standalone", []int{1, 16}},
		{"sidecar", []int{4}},
	}
	for _, r := range runs {
		t.Run(r.target, func(t *testing.T) {
			var log strings.Builder
			o := options{
				targets: []string{r.target}, concurrency: r.concurrency,
				duration: 2 * time.Second, directDuration: 500 * time.Millisecond,
				mix: mix, listen: "127.0.0.1", actgate: bin, seed: uint64(time.Now().UnixNano()), log: &log, floor: true,
			}
			start := time.Now()
			rep, err := runAll(t.Context(), o)
			var out strings.Builder
			writeText(&out, rep)
			t.Logf("%s in %s:\n%s", r.target, time.Since(start).Round(100*time.Millisecond), out.String())
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			if len(rep.Runs) != len(r.concurrency) {
				t.Fatalf("%d runs, want %d", len(rep.Runs), len(r.concurrency))
			}
			for _, run := range rep.Runs {
				checkRun(t, run)
			}
		})
	}
}

// checkRun asserts one run: completed, every kind exercised, every check PASS or N/A, no
// unexpected answer.
func checkRun(t *testing.T, run RunReport) {
	t.Helper()
	name := fmt.Sprintf("%s/%d", run.Target, run.Concurrency)
	if run.Error != "" {
		t.Errorf("%s: %s", name, run.Error)
		return
	}
	// A run that did nothing would pass every check: every kind must have run, and the steps
	// that matter must have been measured.
	for _, k := range kinds {
		if run.Ops[string(k)] == 0 {
			t.Errorf("%s: no %s operation ran", name, k)
		}
	}
	for _, s := range []string{seriesHot, seriesPermit, seriesEscalate, seriesResolve, seriesGranted, seriesReplay, seriesSubstitute} {
		if run.Gate[s].N == 0 {
			t.Errorf("%s: no %s step was measured", name, s)
		}
	}
	if run.Direct[toolBalance].N == 0 {
		t.Errorf("%s: no direct call was measured", name)
	}
	for step, n := range run.Unexpected {
		t.Errorf("%s: %d unexpected answers at %s", name, n, step)
	}
	for _, c := range run.Checks {
		if c.Status == StatusPass || c.Status == StatusNA {
			continue
		}
		t.Errorf("%s: %s %s: %s %v", name, c.Name, c.Status, c.Detail, c.Errors)
	}
	if run.Target == targetSidecar {
		checkFloor(t, name, run.Floor)
	}
}

// checkFloor asserts a sidecar run's API floor: every protected step measured, exactly the
// writes floor.go names per step, and the Acts they stand for in the API server.
func checkFloor(t *testing.T, name string, f *FloorReport) {
	t.Helper()
	if f == nil {
		t.Errorf("%s: no API floor", name)
		return
	}
	for _, s := range []string{seriesPermit, seriesEscalate, seriesResolve, seriesGranted, seriesSubstitute} {
		if f.Series[s].N == 0 {
			t.Errorf("%s: API floor: no %s step was measured", name, s)
		}
	}
	n := func(s string) int { return f.Series[s].N }
	acts := n(seriesPermit) + n(seriesEscalate) + n(seriesGranted) + n(seriesSubstitute)
	writes := 2*n(seriesPermit) + 2*n(seriesEscalate) + n(seriesResolve) + 3*n(seriesGranted) + 2*n(seriesSubstitute)
	if f.Writes != int64(writes) || f.Acts != acts || f.Executed != n(seriesPermit)+n(seriesGranted) {
		t.Errorf("%s: API floor made %d writes, %d Acts, %d executed; its steps (%v) stand for %d, %d, %d",
			name, f.Writes, f.Acts, f.Executed, f.Series, writes, acts, n(seriesPermit)+n(seriesGranted))
	}
}
