package standalone

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/test/testutil"
)

// testConfig is a gate configuration with one server, finance at upstreamURL, whose credential
// is in tokenFile, and one principal, alice.
func testConfig(upstreamURL, dataDir, tokenFile string) []byte {
	return fmt.Appendf(nil, `listen: 127.0.0.1:0
dataDir: %q
sinkID: standalone-test
agent:
  name: test-agent
principals:
- name: alice
upstreams:
- server: finance
  bearerTokenFile: %q
policy:
  podSelector: {}
  servers:
  - name: finance
    url: %q
  rules:
  - name: balances
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
`, dataDir, tokenFile, upstreamURL)
}

// TestOpenRefusesBadReconciliationCredentials: the reconciliation credential files are checked
// when the gate opens; a MAC key shorter than 32 bytes, a missing token file or a CA file
// without a certificate stops it, naming the server.
func TestOpenRefusesBadReconciliationCredentials(t *testing.T) {
	for _, tc := range []struct {
		name               string
		token, mac, caFile []byte
		want               string
	}{
		{"short MAC key", []byte("tok\n"), []byte("too short"), nil, "at least 32"},
		{"empty token", []byte("\n"), []byte("0123456789abcdef0123456789abcdef"), nil, "bearerTokenFile"},
		{"CA file without a certificate", []byte("tok\n"), []byte("0123456789abcdef0123456789abcdef"), []byte("not PEM"), "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, b []byte) string { return testutil.WriteFile(t, dir, name, b) }
			tok := write("finance.token", []byte("tok\n"))
			ca := ""
			if tc.caFile != nil {
				ca = fmt.Sprintf(", caFile: %q", write("ca.pem", tc.caFile))
			}
			doc := string(testConfig("http://127.0.0.1:9/mcp", filepath.Join(dir, "data"), tok))
			doc = strings.Replace(doc, "    url: \"http://127.0.0.1:9/mcp\"\n",
				"    url: \"http://127.0.0.1:9/mcp\"\n    reconciliation: {url: \"https://127.0.0.1:9/operations\"}\n", 1)
			doc = strings.Replace(doc, fmt.Sprintf("  bearerTokenFile: %q\n", tok),
				fmt.Sprintf("  bearerTokenFile: %q\n  reconciliation: {bearerTokenFile: %q, macKeyFile: %q%s}\n",
					tok, write("rec.token", tc.token), write("rec.mac", tc.mac), ca), 1)
			cfg, err := gateconfig.Parse([]byte(doc), dir)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := Open(context.Background(), cfg, logr.Discard(), Hooks{})
			if err == nil {
				_ = rt.Close()
				t.Fatal("the gate opened")
			}
			if !strings.Contains(err.Error(), "upstreams[finance].reconciliation") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name the server and %q", err, tc.want)
			}
		})
	}
}

// TestOpenFailureIsAnError: a gate that cannot open reports why and closes what it had
// opened (here: the upstream's token file is missing once the store is open), without touching
// the nil result.
func TestOpenFailureIsAnError(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "missing.token")
	cfg, err := gateconfig.Parse(testConfig("http://127.0.0.1:9/mcp", filepath.Join(dir, "data"), tok), dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Open(context.Background(), cfg, logr.Discard(), Hooks{})
	if err == nil || rt != nil || !strings.Contains(err.Error(), "bearerTokenFile") {
		t.Fatalf("Open = %v, %v; want no runtime and an error naming bearerTokenFile", rt, err)
	}
	// The store it had opened is closed: a second gate can open the same data dir.
	if err := os.WriteFile(tok, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err = Open(context.Background(), cfg, logr.Discard(), Hooks{})
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	_ = rt.Close()
}
