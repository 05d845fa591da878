package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// check is one entry of a conformance scenario's checks.json.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// outcome is a scenario's verdict: its checks other than INFO, as "id=STATUS" sorted, and the
// counts.
type outcome struct {
	checks         []string
	passed, failed int
	errors         []string
}

func (o outcome) String() string { return fmt.Sprintf("%d passed, %d failed", o.passed, o.failed) }

// resultDir is the conformance CLI's per-scenario output directory: server-{scenario}-{time}.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[0-9-]+Z$`)

// suite is one conformance CLI and the server scenarios it runs.
type suite struct {
	// name is the suite as the tables title it; prefix names its rows in knownDifferences.
	name, prefix string
	cli          string
	args         []string
}

// The suites: 0.1.16's active server scenarios (2025-11-25), and the 0.2.0 pre-release's
// scenarios that each revision requires, frozen at its release (--requirements).
var (
	conformance0116 = suite{name: "conformance 0.1.16 server scenarios", prefix: "conformance/", cli: conformanceCLI}
	next2026        = suite{name: "conformance 0.2.0-alpha.12, 2026-07-28 requirements", prefix: "conformance-0.2.0/2026-07-28/", cli: conformanceNextCLI, args: []string{"--requirements", "2026-07-28"}}
	next2025        = suite{name: "conformance 0.2.0-alpha.12, 2025-11-25 requirements", prefix: "conformance-0.2.0/2025-11-25/", cli: conformanceNextCLI, args: []string{"--requirements", "2025-11-25"}}
)

// runConformance runs the suite's server scenarios against url and returns each scenario's
// outcome.
func runConformance(t *testing.T, s suite, url string) map[string]outcome {
	t.Helper()
	out := t.TempDir()
	args := append([]string{s.cli, "server", "--url", url, "-o", out}, s.args...)
	stdout, err := runNode(t, 5*time.Minute, args...)
	// The CLI exits non-zero when a check fails; the checks themselves are the result.
	entries, rerr := os.ReadDir(out)
	if rerr != nil || len(entries) == 0 {
		t.Fatalf("conformance against %s wrote no results (%v): %v\n%s", url, rerr, err, tail(string(stdout), 4000))
	}
	res := map[string]outcome{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []check
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("%s: checks.json: %v", e.Name(), err)
		}
		var o outcome
		for _, c := range checks {
			switch c.Status {
			case "INFO":
				continue
			case "SUCCESS":
				o.passed++
			default:
				o.failed++
				o.errors = append(o.errors, c.ID+": "+c.ErrorMessage)
			}
			o.checks = append(o.checks, c.ID+"="+c.Status)
		}
		sort.Strings(o.checks)
		res[m[1]] = o
	}
	return res
}

// conformance compares the scenarios' checks of the suite directly and through the gate; the
// rows are named s.prefix + server + "/" + scenario.
func conformance(t *testing.T, s suite, server, direct, gated string) {
	d := runConformance(t, s, direct)
	g := runConformance(t, s, gated)
	names := map[string]bool{}
	for n := range d {
		names[n] = true
	}
	for n := range g {
		names[n] = true
	}
	var rows []row
	var passed, gpassed int
	for n := range names {
		do, dok := d[n]
		gc, gok := g[n]
		passed += do.passed
		gpassed += gc.passed
		same := dok && gok && strings.Join(do.checks, ",") == strings.Join(gc.checks, ",")
		if !same {
			t.Logf("%s/%s:\n  direct: %v %v\n  gated:  %v %v", server, n, do.checks, do.errors, gc.checks, gc.errors)
		}
		rows = append(rows, row{name: n, direct: do.String(), gated: gc.String(), same: same})
	}
	report(t, fmt.Sprintf("%s, %s: %d checks passed direct, %d gated", s.name, server, passed, gpassed),
		s.prefix+server+"/", rows)
}
