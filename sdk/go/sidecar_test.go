package actgate_test

// Sidecar mode: the same tests against the pod's sidecar instead of `actgate serve`. The
// caller (test/e2e's TestSDKSuitesAgainstSidecar) runs the sidecar as the injection configures
// it, under a ToolPolicy built from testdata/hostloop/policy.yaml, and names it in the
// environment:
//
//	ACTGATE_TEST_GATE=sidecar
//	ACTGATE_TEST_GATE_URL          the sidecar whose policy fronts finance
//	ACTGATE_TEST_GATE_EU_URL       the sidecar whose policy fronts finance and finance-eu
//	ACTGATE_TEST_UPSTREAM_ADDR     host:port of finance in those policies (the test's upstream listens there)
//	ACTGATE_TEST_UPSTREAM_EU_ADDR  host:port of finance-eu
//	ACTGATE_TEST_RESOLVE           a JSON argv resolving a moment as alice (`kubectl actgate resolve -n NS`)
//	                               that returns once the BindingMoment is Resolved; the harness appends
//	                               the moment's name and `--option N`
//
// Without ACTGATE_TEST_GATE (or with "serve") each test starts its own `actgate serve`.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	envGate            = "ACTGATE_TEST_GATE"
	envGateURL         = "ACTGATE_TEST_GATE_URL"
	envGateEUURL       = "ACTGATE_TEST_GATE_EU_URL"
	envUpstreamAddr    = "ACTGATE_TEST_UPSTREAM_ADDR"
	envUpstreamEUAddr  = "ACTGATE_TEST_UPSTREAM_EU_ADDR"
	envResolveCommand  = "ACTGATE_TEST_RESOLVE"
	gateModeSidecar    = "sidecar"
	gateModeServe      = "serve"
	financeServer      = "finance"
	financeEUServer    = "finance-eu"
	upstreamPathSuffix = "/mcp"
)

// sidecarMode reports whether the tests run against a running sidecar; any value of
// ACTGATE_TEST_GATE other than serve and sidecar stops the run rather than testing the wrong gate.
func sidecarMode() bool {
	switch m := os.Getenv(envGate); m {
	case "", gateModeServe:
		return false
	case gateModeSidecar:
		return true
	default:
		panic(fmt.Sprintf("%s=%q: want %q or %q", envGate, m, gateModeServe, gateModeSidecar))
	}
}

// requireEnv is the value of a sidecar-mode variable; a missing one fails the test.
func requireEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s=%s needs %s", envGate, gateModeSidecar, name)
	}
	return v
}

// upstreamAddr is where server's upstream listens: a free loopback port, or in sidecar mode the
// address the sidecar's policy names.
func upstreamAddr(t testing.TB, server string) string {
	t.Helper()
	if !sidecarMode() {
		return "127.0.0.1:0"
	}
	switch server {
	case swappedServer:
		return "127.0.0.1:0" // a server no policy names, wherever it listens
	case financeServer:
		return requireEnv(t, envUpstreamAddr)
	case financeEUServer:
		return requireEnv(t, envUpstreamEUAddr)
	}
	t.Fatalf("sidecar mode has no upstream address for server %q", server)
	return ""
}

// sidecarGate is the running sidecar whose policy fronts exactly servers, each at the URL the
// test's upstream serves.
func sidecarGate(t testing.TB, servers map[string]string) *gate {
	t.Helper()
	var base string
	switch names := slices.Sorted(maps.Keys(servers)); strings.Join(names, ",") {
	case financeServer:
		base = requireEnv(t, envGateURL)
	case financeServer + "," + financeEUServer:
		base = requireEnv(t, envGateEUURL)
	default:
		t.Fatalf("no sidecar fronts servers %v", names)
	}
	for name, url := range servers {
		if want := "http://" + upstreamAddr(t, name) + upstreamPathSuffix; url != want {
			t.Fatalf("server %s at %s, but the sidecar's policy names %s", name, url, want)
		}
	}
	return &gate{Base: base, sidecar: true}
}

// resolveWithCommand chooses option 1 of a moment with ACTGATE_TEST_RESOLVE.
func resolveWithCommand(momentID string) error {
	var argv []string
	if err := json.Unmarshal([]byte(os.Getenv(envResolveCommand)), &argv); err != nil || len(argv) == 0 {
		return fmt.Errorf("%s is not a JSON argv: %q", envResolveCommand, os.Getenv(envResolveCommand))
	}
	argv = append(argv, momentID, "--option", "1")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// runID keeps one run's sessions apart from earlier runs' against a long-lived sidecar.
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// session names a conversation of this run.
func session(name string) string { return name + "-" + runID }
