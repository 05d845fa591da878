package main

import (
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
	var log strings.Builder
	o := options{
		targets: []string{"standalone"}, concurrency: []int{1, 16},
		duration: 2 * time.Second, directDuration: 500 * time.Millisecond,
		mix: mix, listen: "127.0.0.1", actgate: os.Getenv("ACTGATE_LOAD_BIN"), seed: uint64(time.Now().UnixNano()), log: &log,
	}
	rep, err := runAll(t.Context(), o)
	var out strings.Builder
	writeText(&out, rep)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rep.Runs) != len(o.targets)*len(o.concurrency) {
		t.Fatalf("%d runs, want %d", len(rep.Runs), len(o.targets)*len(o.concurrency))
	}
	for _, run := range rep.Runs {
		if run.Error != "" {
			t.Errorf("%s/%d: %s", run.Target, run.Concurrency, run.Error)
			continue
		}
		for _, c := range run.Checks {
			if c.Status == StatusFail {
				t.Errorf("%s/%d: %s FAIL: %s %v", run.Target, run.Concurrency, c.Name, c.Detail, c.Errors)
			}
		}
		// The run must have exercised every kind and every check must have had something to
		// look at: a run that did nothing would pass every check.
		for _, k := range kinds {
			if run.Ops[string(k)] == 0 {
				t.Errorf("%s/%d: no %s operation ran", run.Target, run.Concurrency, k)
			}
		}
		if run.Gate[seriesGranted].N == 0 || run.Gate[seriesSubstitute].N == 0 || run.Direct[toolBalance].N == 0 {
			t.Errorf("%s/%d: no approved payment, substitution or direct call was measured", run.Target, run.Concurrency)
		}
	}
	if !rep.Pass {
		t.Error("the report says FAIL")
	}
}
