package kubectlplugin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestMainRefusesBeforeAnyRequest: usage mistakes end with ExitUsage and a message, before any
// request (the kubeconfig names a server that is not there, so a request would fail with
// ExitError instead). The picker needs a terminal; a buffer is none.
func TestMainRefusesBeforeAnyRequest(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: payments}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"unknown command", []string{"approve"}, ExitUsage, `unknown command "approve"`},
		{"unknown flag", []string{"acts", "--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{"show needs a name", []string{"show"}, ExitUsage, "accepts 1 arg(s)"},
		{"resolve needs a name", []string{"resolve", "--decline"}, ExitUsage, "accepts 1 arg(s)"},
		{"two resolutions", []string{"resolve", "bm", "--option", "1", "--decline"}, ExitUsage, "only one of"},
		{"question and decline", []string{"resolve", "bm", "--question", "--decline"}, ExitUsage, "only one of"},
		{"options are numbered from 1", []string{"resolve", "bm", "--option", "0"}, ExitUsage, "numbered from 1"},
		{"no resolution and no terminal", []string{"resolve", "bm"}, ExitUsage, "no resolution given"},
		{"pick without a terminal", []string{"pick", "bm"}, ExitUsage, "needs a terminal"},
		{"unknown output", []string{"acts", "-o", "xml"}, ExitUsage, `unknown output format "xml"`},
		{"moments output", []string{"moments", "-o", "table"}, ExitUsage, "unknown output format"},
		{"server unreachable", []string{"acts", "--request-timeout", "5s"}, ExitError, "list acts"},
		{"help", []string{"--help"}, ExitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			status := Main(append(tc.args, "--kubeconfig", kubeconfig), Options{
				Streams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
				Now:     func() time.Time { return testNow },
			})
			if status != tc.status {
				t.Fatalf("status %d, want %d\nstdout: %s\nstderr: %s", status, tc.status, out.String(), errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("stderr %q does not say %q", errOut.String(), tc.stderr)
			}
			if tc.status != ExitOK && !strings.HasPrefix(errOut.String(), "error: ") {
				t.Errorf("stderr does not begin with kubectl's \"error: \": %q", errOut.String())
			}
		})
	}
}
