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
// standalone gate at concurrency 1 and 16 and against the sidecar rig, every invariant checked
// (issue 5). It builds cmd/actgate (set ACTGATE_LOAD_BIN to reuse a binary) and skips under
// -short. The numbers it logs come from a shared machine and are not asserted.
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
				mix: mix, listen: "127.0.0.1", actgate: bin, seed: uint64(time.Now().UnixNano()), log: &log,
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

// knownSidecarReplayDefect is an open finding of this generator in internal/sidecar (issue 5):
// a permitted call that already ran, sent again in the same session, runs a second time. The
// sidecar mints a new act per call and keeps no index of settled dispatches, so the authority
// service issues a fresh authority; the embedded gate answers the same retry with the recorded
// result (internal/sink "Retries"; tool-use-binding §9 "never a second invoke"). A retried
// approved payment is refused, as it should be. The sidecar run asserts exactly this failure and
// nothing else; once the sidecar is fixed the test fails until this constant is removed.
const knownSidecarReplayDefect = "replay: replay of " + toolEmail

// checkRun asserts one run: completed, every kind exercised, every check PASS or N/A (for the
// sidecar, apart from knownSidecarReplayDefect, which must be there).
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
	known := run.Target == "sidecar"
	if known {
		if run.Unexpected[knownSidecarReplayDefect] == 0 {
			t.Errorf("%s: a replayed %s no longer runs twice through the sidecar: remove knownSidecarReplayDefect", name, toolEmail)
		}
		for step, n := range run.Unexpected {
			if step != knownSidecarReplayDefect {
				t.Errorf("%s: %d unexpected answers at %s", name, n, step)
			}
		}
	}
	for _, c := range run.Checks {
		if c.Status == StatusPass || c.Status == StatusNA {
			continue
		}
		if known && explainedByReplayDefect(c) {
			t.Logf("%s: %s FAIL, the known sidecar replay defect: %v", name, c.Name, c.Errors)
			continue
		}
		t.Errorf("%s: %s %s: %s %v", name, c.Name, c.Status, c.Detail, c.Errors)
	}
}

// explainedByReplayDefect reports whether every error of c is the known defect: a permitted
// email_send run more than once (once per replay of it), or the unexpected answers it causes.
func explainedByReplayDefect(c Check) bool {
	for _, e := range c.Errors {
		switch {
		case c.Name == CheckDeniedNeverReached && strings.HasPrefix(e, "protected call "+toolEmail+" ") && strings.HasSuffix(e, " times upstream"):
		case c.Name == CheckDeniedNeverReached && strings.HasPrefix(e, "… and "):
		case c.Name == CheckExpectedAnswers && (strings.HasSuffix(e, " unexpected answers") || strings.Contains(e, " replay replay of "+toolEmail+": ")):
		default:
			return false
		}
	}
	return c.Name == CheckDeniedNeverReached || c.Name == CheckExpectedAnswers
}
