//go:build unix

package faults

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/test/testutil"
)

// TestSidecarProcessSaysWhyItIsNotReady runs the `actgate sidecar` process as the injector runs
// it, with an authority service nobody listens at and an upstream that is down: within seconds
// its log names both reasons with their codes (and each once, not once per check), and `actgate
// sidecar probe`, the kubelet's exec probe, exits 1 printing the problem lines first, which the
// doctor reads back from the probe-failure Event the kubelet writes with that output.
func TestSidecarProcessSaysWhyItIsNotReady(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir)
	token := testutil.WriteFile(t, dir, "token", []byte("not-a-real-token\n"))
	authority, upstream := "https://"+testutil.FreeAddr(t), "http://"+testutil.FreeAddr(t)+"/mcp"
	sc := startProc(t, nil, `serving on http://(127\.0\.0\.1:\d+)`, "sidecar",
		"--listen", "127.0.0.1:0", "--authority-url", authority, "--authority-ca-file", p.CAFile,
		"--token-file", token, "--authority-public-key-file", p.publicKey, "--namespace", "billing",
		"--service-account", "billing-agent", "--sink-id", "sink-billing", "--servers", "payments", "--server", "payments="+upstream,
		"--journal-dir", filepath.Join(dir, "journal"), "--review-timeout", "500ms")
	addr := sc.addr(t)
	logged := func(reason, subject string) *regexp.Regexp {
		return regexp.MustCompile(`msg="Not ready" (?:logger=\S+ )?reason=` + reason + ` subject=` + subject + `\b`)
	}
	authLine, upLine := logged(diag.AuthorityUnreachable, "authority"), logged(diag.UpstreamUnreachable, "payments")
	start := time.Now()
	sc.WaitFor(t, 30*time.Second, func() bool {
		out := sc.Out.String()
		return authLine.MatchString(out) && upLine.MatchString(out) && logged(diag.NotYetReceived, "policy").MatchString(out)
	})
	t.Logf("both reasons logged %s after start", time.Since(start).Round(time.Millisecond))
	time.Sleep(6 * time.Second) // more than one readiness check, less than the 30 s log period
	out := sc.Out.String()
	if n := len(authLine.FindAllString(out, -1)); n != 1 {
		t.Errorf("AuthorityUnreachable logged %d times in under 30 s, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "fix=") {
		t.Errorf("the log lines carry no fix:\n%s", out)
	}

	// The kubelet's startup probe.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	probe := exec.CommandContext(ctx, actgateBin, "sidecar", "probe", "--check", "startup", "--listen", addr)
	stdout, err := probe.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("probe: %v, want exit 1\n%s", err, stdout)
	}
	if !strings.HasPrefix(string(stdout), diag.NotYetReceived+" (policy): ") || !strings.Contains(string(stdout), "\n"+diag.AuthorityUnreachable+" (authority): ") {
		t.Fatalf("probe output does not begin with the problem lines:\n%s", stdout)
	}
	got := map[string]bool{}
	for _, pr := range diag.ParseProbeOutput("Startup probe failed: " + string(stdout)) {
		got[pr.Reason+"/"+pr.Subject] = pr.Fix != ""
	}
	if !got[diag.NotYetReceived+"/policy"] || !got[diag.AuthorityUnreachable+"/authority"] {
		t.Fatalf("the doctor's reading of the probe's Event: %v\n%s", got, stdout)
	}
	sc.stop(t)
}
