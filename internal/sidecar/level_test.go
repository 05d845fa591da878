package sidecar

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/review"
)

// getReady reads the assembled sidecar's ReadyPath (query "" or "?check=policy").
func levelReady(t *testing.T, base, query string) (int, readyBody) {
	t.Helper()
	resp, err := http.Get(base + ReadyPath + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var b readyBody
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("readyz %q: %v", data, err)
	}
	return resp.StatusCode, b
}

// waitReady waits until ReadyPath answers as want says, and returns that answer.
func waitReady(t *testing.T, base, query, what string, want func(int, readyBody) bool) readyBody {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, b := levelReady(t, base, query)
		if want(code, b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: readyz is HTTP %d %+v", what, code, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasProblem(b readyBody, reason string) bool {
	for _, p := range b.Problems {
		if p.Reason == reason && p.Subject == "authority" && p.Fix != "" {
			return true
		}
	}
	return false
}

// TestSidecarWaitsForTheAuthorityLevel: the assembled sidecar in front of a service whose
// answers state no review protocol level (a service of a release before levels) waits
// fail-closed: at start it is not ready, its startup check naming AuthorityTooOld with its fix,
// and every call is refused; once the service answers at its level it becomes ready without a
// restart and a protected call runs once. When the level is lost again a protected call is
// refused with the code of an unavailable authority and never reaches the upstream, readiness
// says AuthorityTooOld; with the level back the call runs once.
func TestSidecarWaitsForTheAuthorityLevel(t *testing.T) {
	s := newStub(t, bankModes)
	s.level.Store(-1)
	files := writeSidecarFiles(t, s)
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	s.spec, s.epoch = testPolicy(t, up.URL), 1
	sc, err := New(Config{
		Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCAFile: files.ca, TokenFile: files.token,
		PublicKeyFile: files.key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
		Upstreams:  []Upstream{{Name: "payments", URL: up.URL, CredentialFile: files.cred}},
		JournalDir: filepath.Join(files.dir, "journal"), ReviewTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOnLoopback(t, sc)

	// At start, against the old service: the startup check fails naming the level.
	b := waitReady(t, base, "?check=policy", "start against a service without levels", func(code int, b readyBody) bool {
		return code == http.StatusServiceUnavailable && hasProblem(b, diag.AuthorityTooOld)
	})
	if b.Ready || b.Authority != diag.AuthorityTooOld || !strings.Contains(b.Problems[len(b.Problems)-1].Fix, "helm upgrade") {
		t.Fatalf("startup check: %+v", b)
	}
	cs := connectTo(t, base+"/mcp/payments")
	if res := call(t, cs, "send_payment", `{"amount":1}`); !res.IsError || up.Count("") != 0 {
		t.Fatalf("a call before any answer of a good level: %s (upstream %d)", text(res), up.Count(""))
	}

	// The service answers at its level: ready without a restart, the call runs once.
	s.level.Store(review.Level)
	waitReady(t, base, "", "the service at its level", func(code int, b readyBody) bool { return code == http.StatusOK && b.Ready })
	if res := call(t, cs, "send_payment", `{"amount":2}`); res.IsError || up.Count("send_payment") != 1 {
		t.Fatalf("at level %d: %s (upstream %d)", review.Level, text(res), up.Count("send_payment"))
	}

	// The level is lost (an old replica answers): the protected call is refused, never sent.
	s.level.Store(-1)
	permits := s.count(review.OperationPermit)
	res := call(t, cs, "send_payment", `{"amount":3}`)
	if !res.IsError || efCode(res) != string(ef.EFStoreUnavailable) || !strings.Contains(text(res), "older than this sidecar") {
		t.Fatalf("a protected call against an old service: %s %s", efCode(res), text(res))
	}
	if n := up.Count("send_payment"); n != 1 {
		t.Fatalf("the upstream ran send_payment %d times, want 1", n)
	}
	if s.count(review.OperationPermit) != permits+1 {
		t.Fatal("the Permit was not sent: the case tests nothing")
	}
	code, b := levelReady(t, base, "")
	if code != http.StatusServiceUnavailable || b.Ready || !hasProblem(b, diag.AuthorityTooOld) {
		t.Fatalf("readyz after an answer without a level: HTTP %d %+v", code, b)
	}

	// The level is back: the same call runs once.
	s.level.Store(review.Level)
	if res := call(t, cs, "send_payment", `{"amount":3}`); res.IsError || up.Count("send_payment") != 2 {
		t.Fatalf("with the level back: %s (upstream %d)", text(res), up.Count("send_payment"))
	}
	waitReady(t, base, "", "the level back", func(code int, b readyBody) bool {
		return code == http.StatusOK && b.Ready && !hasProblem(b, diag.AuthorityTooOld)
	})
	_ = cs.Close()
}
