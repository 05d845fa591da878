package gateconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/fileutil"
)

const minimal = `
dataDir: data
agent:
  name: agent-1
principals:
- name: alice
policy:
  podSelector: {}
  servers:
  - name: bank
    url: http://127.0.0.1:9000/mcp
  rules:
  - name: reads
    tools: [get_balance]
`

func TestSampleConfig(t *testing.T) {
	c, err := Load("../../testdata/gate/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../../testdata/gate")
	if c.DataDir != filepath.Join(abs, ".actgate") {
		t.Errorf("dataDir %q not resolved against the file's directory", c.DataDir)
	}
	if u := c.Upstream("finance"); u.BearerTokenFile != filepath.Join(abs, "finance.token") {
		t.Errorf("bearerTokenFile %q", u.BearerTokenFile)
	}
	if c.Listen != "127.0.0.1:8787" || c.SinkID != "actgate-local" || c.Agent.Name != "demo-agent" || !c.Agent.TrustDeclaredProvenance {
		t.Errorf("config %+v", c)
	}
	if c.Timeout() != 30*time.Second {
		t.Errorf("callTimeout %v", c.CallTimeout)
	}
	compiled, err := c.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if !compiled.CanEscalate("finance", "send_payment") || compiled.CanEscalate("finance", "get_balance") {
		t.Error("compiled policy does not escalate send_payment only")
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.Listen != DefaultListen:
		t.Errorf("listen %q", c.Listen)
	case c.SinkID != DefaultSinkID:
		t.Errorf("sinkID %q", c.SinkID)
	case c.Timeout() != DefaultCallTimeout:
		t.Errorf("callTimeout %v", c.CallTimeout)
	case c.MomentExpiry() != DefaultMomentTTL:
		t.Errorf("momentTTL %v", c.MomentExpiry())
	case c.DataDir != "/etc/actgate/data":
		t.Errorf("dataDir %q", c.DataDir)
	case c.Path(StoreFile) != "/etc/actgate/data/actgate.db":
		t.Errorf("store path %q", c.Path(StoreFile))
	case c.PrincipalTokenPath("alice") != "/etc/actgate/data/principals/alice.token":
		t.Errorf("token path %q", c.PrincipalTokenPath("alice"))
	case !c.Principal("alice") || c.Principal("agent-1"):
		t.Error("Principal")
	}
	// The policy's sink id is the gate's when the file names none.
	c, err = Parse([]byte(strings.Replace(minimal, "policy:\n", "policy:\n  sink:\n    id: from-policy\n", 1)), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.SinkID != "from-policy" {
		t.Errorf("sinkID %q, want policy.sink.id", c.SinkID)
	}
}

// TestMetricsAddress: loopback by default, "off" disables, an address the file names is
// reported as explicit (serve must bind it or fail).
func TestMetricsAddress(t *testing.T) {
	for _, tc := range []struct {
		name, doc, addr string
		explicit        bool
	}{
		{"default", minimal, DefaultMetricsAddress, false},
		{"off", minimal + "metrics:\n  address: \"off\"\n", "", true},
		{"explicit", minimal + "metrics:\n  address: '[::1]:9100'\n", "[::1]:9100", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc), "")
			if err != nil {
				t.Fatal(err)
			}
			if addr, explicit := c.MetricsAddress(); addr != tc.addr || explicit != tc.explicit {
				t.Fatalf("MetricsAddress() = %q, %v; want %q, %v", addr, explicit, tc.addr, tc.explicit)
			}
		})
	}
}

// TestBadConfigs: every refusal names the field it is about.
func TestBadConfigs(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(minimal, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(minimal, old, new, 1)
	}
	for _, tc := range []struct {
		name, doc, field string
	}{
		{"empty", ``, "empty document"},
		{"two documents", minimal + "\n---\n" + minimal, "more than one YAML document"},
		{"not a mapping", `[1, 2]`, "not a mapping"},
		{"duplicate key", minimal + "dataDir: other\n", "dataDir"},
		{"unknown top-level field", minimal + "listenn: x\n", "listenn"},
		{"unknown field inside policy", edit("    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    urll: x"), "urll"},
		{"field name in the wrong case", edit("dataDir: data", "DataDir: data"), "DataDir"},
		{"missing dataDir", edit("dataDir: data", ""), "dataDir"},
		{"missing agent name", edit("  name: agent-1", "  name: \"\""), "agent.name"},
		{"bad agent name", edit("  name: agent-1", "  name: \"-x\""), "agent.name"},
		{"non-loopback listen", minimal + "listen: 0.0.0.0:8787\n", "listen"},
		{"listen without port", minimal + "listen: 127.0.0.1\n", "listen"},
		{"public host", minimal + "listen: example.com:80\n", "listen"},
		{"non-loopback metrics address", minimal + "metrics:\n  address: 0.0.0.0:9787\n", "metrics.address"},
		{"metrics address without port", minimal + "metrics:\n  address: 127.0.0.1\n", "metrics.address"},
		{"metrics on the gate's listener", minimal + "listen: 127.0.0.1:8787\nmetrics:\n  address: 127.0.0.1:8787\n", "metrics.address"},
		{"unknown metrics field", minimal + "metrics:\n  addr: 127.0.0.1:1\n", "addr"},
		{"agent as principal", edit("- name: alice", "- name: agent-1"), "principals[0].name"},
		{"duplicate principal", edit("- name: alice", "- name: alice\n- name: alice"), "principals[1].name"},
		{"bad principal name", edit("- name: alice", "- name: Alice/x"), "principals[0].name"},
		{"sink as principal", minimal + "sinkID: alice\n", "principals[0].name"},
		{"sink ids disagree", edit("policy:\n", "policy:\n  sink:\n    id: other\n") + "sinkID: mine\n", "sinkID"},
		{"upstream for an unknown server", minimal + "upstreams:\n- server: nope\n  bearerTokenFile: t\n", "upstreams[0].server"},
		{"duplicate upstream", minimal + "upstreams:\n- server: bank\n- server: bank\n", "upstreams[1].server"},
		{"callTimeout not a duration", minimal + "callTimeout: 10\n", "callTimeout"},
		{"callTimeout out of range", minimal + "callTimeout: 1h\n", "callTimeout"},
		{"momentTTL not a duration", minimal + "momentTTL: 15\n", "momentTTL"},
		{"momentTTL below 1s", minimal + "momentTTL: 500ms\n", "momentTTL"},
		{"momentTTL negative", minimal + "momentTTL: -1m\n", "momentTTL"},
		{"momentTTL above 24h", minimal + "momentTTL: 25h\n", "momentTTL"},
		{"momentTTL a number", minimal + "momentTTL: 2.5\n", "momentTTL"},
		{"secret ref in embedded mode", edit("    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    credentialsSecretRef: {name: s, key: k}"), "policy.servers[0].credentialsSecretRef"},
		{"HTTP protocol server", edit("    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    protocol: HTTP"), "policy.servers[0].protocol"},
		{"policy does not compile", edit("    tools: [get_balance]", "    tools: [get_balance]\n    arguments:\n    - name: c\n      expression: 'args.x +'"), "policy.rules[0].arguments[0].expression"},
		{"rule names an unknown server", edit("    tools: [get_balance]", "    tools: [get_balance]\n    servers: [ghost]"), "policy.rules[0].servers"},
		{"reconciliation endpoint without credentials", edit("    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    reconciliation: {url: 'https://bank.example/operations'}"), "policy.servers[0].reconciliation"},
		{"reconciliation Secret ref in embedded mode", edit("    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    reconciliation: {url: 'https://bank.example/operations', credentialsSecretRef: {name: s, key: k}}") +
			"upstreams:\n- server: bank\n  reconciliation: {bearerTokenFile: t, macKeyFile: m}\n", "policy.servers[0].reconciliation.credentialsSecretRef"},
		{"reconciliation credentials without an endpoint", minimal + "upstreams:\n- server: bank\n  reconciliation: {bearerTokenFile: t, macKeyFile: m}\n", "upstreams[0].reconciliation"},
		{"reconciliation without a MAC key", edit("    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    reconciliation: {url: 'https://bank.example/operations'}") +
			"upstreams:\n- server: bank\n  reconciliation: {bearerTokenFile: t}\n", "upstreams[0].reconciliation.macKeyFile"},
		{"reconciliation interval too short", minimal + "reconciliation: {interval: 10ms}\n", "reconciliation.interval"},
		{"reconciliation interval not a duration", minimal + "reconciliation: {interval: soon}\n", "reconciliation.interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "")
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not match ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

// FuzzParse: a configuration file is untrusted bytes: never a panic, and a parsed config
// always has its required fields and a compiled policy.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "listen: '[::1]:1'\n"))
	f.Add([]byte("dataDir: x\nagent: {name: a}\npolicy: {podSelector: {}, servers: [{name: s, url: 'http://h'}]}"))
	f.Add([]byte(strings.Replace(minimal, "    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    reconciliation: {url: 'https://b.example/o'}", 1) +
		"upstreams:\n- server: bank\n  reconciliation: {bearerTokenFile: t, macKeyFile: m}\nreconciliation: {interval: 5s}\n"))
	f.Add([]byte(minimal + "notifications:\n  webhooks: [{url: 'https://h.example/x', format: teams}]\n  email: {addr: 'smtp.example:587', from: a@example.com, stripPrefix: 'oidc:', recipients: {bob: b@example.com}}\n"))
	f.Add([]byte("{"))
	f.Add([]byte("a: &x [*x]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "/base")
		if err != nil {
			return
		}
		if c.DataDir == "" || c.Agent.Name == "" || c.SinkID == "" || c.Listen == "" {
			t.Fatalf("accepted without required fields: %+v", c)
		}
		if _, err := c.Compile(); err != nil {
			t.Fatalf("accepted a policy that does not compile: %v", err)
		}
	})
}

// TestUpstreamCredential: the token file is read at start (an unreadable or empty one is an
// error then) and again on every call, so it can be rotated in place.
func TestUpstreamCredential(t *testing.T) {
	if cred, err := (Upstream{Server: "s"}).Credential(); cred != nil || err != nil {
		t.Fatalf("no token file: %v %v", cred != nil, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if _, err := (Upstream{Server: "s", BearerTokenFile: file}).Credential(); err == nil {
		t.Fatal("a missing token file was accepted")
	}
	if err := os.WriteFile(file, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Upstream{Server: "s", BearerTokenFile: file}).Credential(); err == nil {
		t.Fatal("an empty token file was accepted")
	}
	if err := os.WriteFile(file, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cred, err := (Upstream{Server: "s", BearerTokenFile: file}).Credential()
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := cred(context.Background()); tok != "one" || err != nil {
		t.Fatalf("token %q %v", tok, err)
	}
	if err := os.WriteFile(file, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A rotated file applies once fileutil.CredentialTTL has passed since the last read.
	if tok, err := cred(context.Background()); tok != "one" || err != nil {
		t.Fatalf("within the credential TTL: token %q %v", tok, err)
	}
	time.Sleep(fileutil.CredentialTTL + 50*time.Millisecond)
	if tok, err := cred(context.Background()); tok != "two" || err != nil {
		t.Fatalf("rotated token %q %v", tok, err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fileutil.CredentialTTL + 50*time.Millisecond)
	if _, err := cred(context.Background()); err == nil {
		t.Fatal("an emptied token file was presented")
	}
}

// TestReconciliationConfig: a server's reconciliation endpoint with its credential files; the
// files resolve against the configuration's directory and the interval defaults to 30s.
func TestReconciliationConfig(t *testing.T) {
	doc := strings.Replace(minimal, "    url: http://127.0.0.1:9000/mcp",
		"    url: http://127.0.0.1:9000/mcp\n    reconciliation: {url: 'https://bank.example/operations'}", 1) +
		"upstreams:\n- server: bank\n  reconciliation: {bearerTokenFile: rec.token, macKeyFile: rec.mac, caFile: /etc/rec-ca.pem}\n"
	c, err := Parse([]byte(doc), "/base")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Upstream("bank").Reconciliation
	if r == nil || r.BearerTokenFile != "/base/rec.token" || r.MACKeyFile != "/base/rec.mac" || r.CAFile != "/etc/rec-ca.pem" {
		t.Fatalf("reconciliation %+v", r)
	}
	if got := c.ReconciliationURL("bank"); got != "https://bank.example/operations" {
		t.Fatalf("ReconciliationURL = %q", got)
	}
	if c.ReconcileInterval() != DefaultReconcileInterval {
		t.Fatalf("interval %v", c.ReconcileInterval())
	}
	c, err = Parse([]byte(doc+"reconciliation: {interval: 2s}\n"), "/base")
	if err != nil || c.ReconcileInterval() != 2*time.Second {
		t.Fatalf("interval 2s: %v %v", c.ReconcileInterval(), err)
	}
}

func TestMomentTTL(t *testing.T) {
	for doc, want := range map[string]time.Duration{
		minimal:                      DefaultMomentTTL,
		minimal + "momentTTL: 2s\n":  2 * time.Second,
		minimal + "momentTTL: 24h\n": MaxMomentTTL,
	} {
		c, err := Parse([]byte(doc), "/etc/actgate")
		if err != nil {
			t.Fatalf("%q: %v", doc[len(minimal):], err)
		}
		if got := c.MomentExpiry(); got != want {
			t.Errorf("%q: momentTTL %v, want %v", doc[len(minimal):], got, want)
		}
	}
}
