package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/sidecar"
)

func TestSidecarProbe(t *testing.T) {
	var gotQuery string
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != sidecar.ReadyPath {
			http.NotFound(w, r)
			return
		}
		gotQuery = r.URL.RawQuery
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(`{"ready":` + map[bool]string{true: "true", false: "false"}[ready] + `}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name      string
		args      []string
		ready     bool
		code      int
		query     string
		errPrefix string
	}{
		{"ready", []string{"--listen", addr}, true, 0, "", ""},
		{"startup", []string{"--listen", addr, "--check", "startup"}, true, 0, "check=policy", ""},
		{"not ready", []string{"--listen", addr}, false, exitRejected, "", "SIDECAR_NOT_READY HTTP 503"},
		{"nothing listening", []string{"--listen", "127.0.0.1:1"}, true, exitRejected, "", "SIDECAR_NOT_READY"},
		{"not loopback", []string{"--listen", "10.0.0.1:15080"}, true, exitUsage, "", "USAGE"},
		{"bad check", []string{"--listen", addr, "--check", "live"}, true, exitUsage, "", "USAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, gotQuery = tc.ready, ""
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"sidecar", "probe"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stderr.String(), tc.errPrefix) {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, stderr.String(), tc.code, tc.errPrefix)
			}
			if code == 0 && (gotQuery != tc.query || !strings.Contains(stdout.String(), `"ready":true`)) {
				t.Fatalf("query %q, stdout %q", gotQuery, stdout.String())
			}
		})
	}
}

// TestSidecarProbePrintsReasons: a not-ready answer's problems are printed first, one line each
// with its reason code and fix (the kubelet copies the probe's output into the pod's Event), and
// the exit message names the codes; control characters in the answer are dropped.
func TestSidecarProbePrintsReasons(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"ready":false,"reason":"NotYetReceived","authority":"AuthorityUnreachable","problems":[` +
			`{"reason":"NotYetReceived","subject":"policy","message":"not yet","fix":"wait"},` +
			`{"reason":"AuthorityUnreachable","subject":"authority","message":"dial tcp: refused\u001b[2J","fix":"check the service"}]}`))
	}))
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	code := run([]string{"sidecar", "probe", "--check", "startup", "--listen", strings.TrimPrefix(srv.URL, "http://")}, strings.NewReader(""), &stdout, &stderr)
	if code != exitRejected || !strings.HasPrefix(stderr.String(), "SIDECAR_NOT_READY HTTP 503: NotYetReceived, AuthorityUnreachable") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	if len(lines) < 3 || lines[0] != "NotYetReceived (policy): not yet. Fix: wait" ||
		lines[1] != "AuthorityUnreachable (authority): dial tcp: refused[2J. Fix: check the service" || !strings.HasPrefix(lines[2], `{"ready":false`) {
		t.Fatalf("stdout:\n%s", stdout.String())
	}
}
