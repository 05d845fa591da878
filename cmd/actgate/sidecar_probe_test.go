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
