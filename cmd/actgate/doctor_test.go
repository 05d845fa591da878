package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// TestDoctorStandalone runs `actgate doctor` on the configuration `actgate serve` takes, against
// a real MCP upstream that accepts one bearer token: every check passes with the right token;
// an upstream nobody listens at, one whose certificate no trusted CA signed, and a token the
// upstream refuses each fail with their reason code and fix, and exit 1; so do a rule's
// principal missing from principals and a data dir that is a file.
func TestDoctorStandalone(t *testing.T) {
	const good = "upstream-token-42"
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}, {Name: "send_payment"}, {Name: "email_send"}}, mcptest.Options{
		Name: "finance-mcp",
		Intercept: func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Authorization") != "Bearer "+good {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return true
			}
			return false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(untrusted.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close()

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodTok, badTok := write("good.token", good+"\n"), write("bad.token", "not-the-token\n")
	aFile := write("a-file", "x")
	for _, tc := range []struct {
		name       string
		config     string
		status     int
		want       []string
		wantAbsent []string
	}{
		{"every check passes", string(demoConfig(up.URL, filepath.Join(dir, "data"), goodTok)), exitOK,
			[]string{"OK    config", "OK    data dir", "OK    upstream finance", `MCP server "finance-mcp"`, "OK    principals"}, []string{"FAIL"}},
		{"upstream unreachable", string(demoConfig(down, filepath.Join(dir, "data"), goodTok)), exitRejected,
			[]string{"FAIL  upstream finance  " + diag.UpstreamUnreachable, "fix: start your MCP server, or correct policy.servers[finance].url"}, nil},
		{"upstream certificate from an unknown CA", string(demoConfig(untrusted.URL+"/mcp", filepath.Join(dir, "data"), goodTok)), exitRejected,
			[]string{"FAIL  upstream finance  " + diag.UpstreamTLSFailure, "certificate signed by unknown authority", "SSL_CERT_FILE"}, nil},
		{"token the upstream refuses", string(demoConfig(up.URL, filepath.Join(dir, "data"), badTok)), exitRejected,
			[]string{"FAIL  upstream finance  " + diag.UpstreamRefused, "HTTP 401: the server did not accept the credential", badTok}, []string{"not-the-token"}},
		{"principal of a rule not configured", strings.Replace(string(demoConfig(up.URL, filepath.Join(dir, "data"), goodTok)),
			"principals:\n- name: alice\n", "", 1), exitRejected,
			[]string{"FAIL  principals", "the policy escalates to alice, not configured", "add them under principals:"}, nil},
		{"data dir is a file", string(demoConfig(up.URL, aFile, goodTok)), exitRejected,
			[]string{"FAIL  data dir", "is not a directory"}, nil},
		{"config invalid", "dataDir: d\nagent: {name: a}\nlisten: 0.0.0.0:1\npolicy: {podSelector: {}, servers: [{name: s, url: 'ftp://x'}]}\n", exitRejected,
			[]string{"FAIL  config  listen:"}, []string{"OK"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := write("actgate.yaml", tc.config)
			var stdout, stderr bytes.Buffer
			status := run([]string{"doctor", "--config", cfg}, strings.NewReader(""), &stdout, &stderr)
			if status != tc.status {
				t.Fatalf("status %d, want %d\nstdout:\n%s\nstderr: %s", status, tc.status, stdout.String(), stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tc.wantAbsent {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("stdout has %q:\n%s", w, stdout.String())
				}
			}
			if tc.status != exitOK && !strings.HasPrefix(stderr.String(), "DOCTOR_FAILED") {
				t.Errorf("stderr %q does not begin with DOCTOR_FAILED", stderr.String())
			}
		})
	}
	// The refused token reached the upstream (the check is a real initialize), and the right
	// one was accepted there.
	var sawBad, sawGood bool
	for _, a := range up.Authorizations() {
		sawBad = sawBad || a == "Bearer not-the-token"
		sawGood = sawGood || a == "Bearer "+good
	}
	if !sawBad || !sawGood {
		t.Errorf("the upstream did not see both tokens: %q", up.Authorizations())
	}
}
