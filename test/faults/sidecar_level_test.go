//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/test/testutil"
)

// readyz is the sidecar's readiness answer at base (query "" or "?check=policy"): its status
// and body.
func readyz(t *testing.T, base, query string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + sidecar.ReadyPath + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tooOld reports whether a readiness body names AuthorityTooOld about the authority, with a fix.
func tooOld(body string) bool {
	var b struct {
		Ready    bool           `json:"ready"`
		Problems []diag.Problem `json:"problems"`
	}
	if json.Unmarshal([]byte(body), &b) != nil || b.Ready {
		return false
	}
	for _, p := range b.Problems {
		if p.Reason == diag.AuthorityTooOld && p.Subject == "authority" && strings.Contains(p.Fix, "helm upgrade") {
			return true
		}
	}
	return false
}

// TestSidecarWaitsForTheAuthorityLevel: `actgate sidecar` in front of the real `actgate-controlplane
// authority` (on a real API server), through a proxy that removes the service's review protocol
// level from its answers, as a service of a release before levels sends them — the skew of a
// `helm upgrade` in which a pod gets the new sidecar while old authority replicas still serve.
//
// Started against it, the sidecar waits fail-closed: the startup probe fails naming
// AuthorityTooOld (the `actgate sidecar probe` output the kubelet puts in the pod's Event), the
// log says it once with its fix, and a protected call is refused without reaching the upstream.
// When the service answers at its level the sidecar becomes ready without a restart and the call
// runs once. When the level is lost again, a protected call is refused with the code of an
// unavailable authority (EF_STORE_UNAVAILABLE) — the service was asked, the upstream never —
// and readiness says AuthorityTooOld; with the level back the same call runs once. A sidecar of
// a release before levels (its requests carry no level) is served as level 1. The journal
// holds exactly the calls that ran.
func TestSidecarWaitsForTheAuthorityLevel(t *testing.T) {
	r := newK8sRig(t, rigOptions{})
	r.authF.mode.Store(int32(authNoLevel))
	endpoint, p := r.startSidecar(t, r.authF.srv.URL)
	defer p.stop(t)
	base := strings.TrimSuffix(endpoint, mcpproxy.Path("tools"))
	ran := func() int { return r.up.Count(protectedTool) }

	// Started against a service without levels.
	testutil.Eventually(t, 30*time.Second, "the startup check to name AuthorityTooOld", func() error {
		if code, body := readyz(t, base, "?check=policy"); code != http.StatusServiceUnavailable || !tooOld(body) {
			return errors.New(body)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, actgateBin, "sidecar", "probe", "--check", "startup", "--listen", strings.TrimPrefix(base, "http://")).Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), diag.AuthorityTooOld+" (authority): ") {
		t.Fatalf("startup probe: %v\n%s", err, out)
	}
	logged := regexp.MustCompile(`msg="Not ready" (?:logger=\S+ )?reason=` + diag.AuthorityTooOld + ` subject=authority\b`)
	p.WaitFor(t, 10*time.Second, func() bool { return logged.MatchString(p.Out.String()) })
	if res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"before the upgrade"}`); !res.IsError || ran() != 0 {
		t.Fatalf("a protected call before any answer of a good level: %s (upstream %d)", js(res), ran())
	}

	// The control plane is upgraded: ready without a restart, the call runs once.
	r.authF.mode.Store(int32(authPass))
	testutil.Eventually(t, 30*time.Second, "the sidecar to be ready at the service's level", func() error {
		if code, body := readyz(t, base, ""); code != http.StatusOK {
			return errors.New(body)
		}
		return nil
	})
	if res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"after the upgrade"}`); res.IsError || ran() != 1 {
		t.Fatalf("at the service's level: %s (upstream %d)", js(res), ran())
	}

	// An old replica answers again: refused, not sent, and readiness says why.
	r.authF.mode.Store(int32(authNoLevel))
	permits := r.authF.count(review.OperationPermit)
	res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"skew"}`)
	if !res.IsError || efCode(res) != string(ef.EFStoreUnavailable) || ran() != 1 {
		t.Fatalf("a protected call answered without a level: %s (upstream %d)", js(res), ran())
	}
	if r.authF.count(review.OperationPermit) != permits+1 {
		t.Fatal("the Permit never reached the service: the case tests nothing")
	}
	if code, body := readyz(t, base, ""); code != http.StatusServiceUnavailable || !tooOld(body) {
		t.Fatalf("readyz after an answer without a level: HTTP %d %s", code, body)
	}

	// The level is back: the same call, in a new session, runs once.
	r.authF.mode.Store(int32(authPass))
	if res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"skew"}`); res.IsError || ran() != 2 {
		t.Fatalf("with the level back: %s (upstream %d)", js(res), ran())
	}
	if code, body := readyz(t, base, ""); code != http.StatusOK {
		t.Fatalf("readyz with the level back: HTTP %d %s", code, body)
	}

	// A sidecar of a release before levels: its requests carry none, and it is served.
	r.authF.mode.Store(int32(authNoSidecarLevel))
	if res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"an old sidecar"}`); res.IsError || ran() != 3 {
		t.Fatalf("a request without the sidecar's level: %s (upstream %d)", js(res), ran())
	}
	r.authF.mode.Store(int32(authPass))
	p.stop(t)
	recs := r.readJournal(t)
	if len(recs) != 3 {
		t.Fatalf("journal: %s; want the three calls that ran", js(recs))
	}
	for _, rec := range recs {
		if rec.State != "EXECUTED" {
			t.Fatalf("journal: %s", js(recs))
		}
	}
}
