package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestSidecarRefusesBadConfiguration: `actgate sidecar` names every problem with a stable code
// and never starts half-configured.
func TestSidecarRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"sidecar", "--namespace", "billing", "--service-account", "agent", "--token-file", token,
		"--authority-url", "https://actgate-authority.actgate-system.svc", "--sink-id", "s", "--journal-dir", filepath.Join(dir, "j")}
	oauthFile := func(doc string) string {
		f := filepath.Join(t.TempDir(), "oauth.yaml")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	goodOAuth := oauthFile("grant: token_exchange\ntokenURL: https://idp.example/token\nsubjectTokenFile: " + token + "\n")
	withServer := func(extra ...string) []string {
		return append(append(append([]string(nil), base...), "--server", "payments=https://p.example/mcp"), extra...)
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		status int
		want   []string
	}{
		{"no server", nil, base, exitUsage, []string{"USAGE at least one --server"}},
		{"server without URL", nil, append(base, "--server", "payments"), exitUsage, []string{`USAGE --server "payments" is not NAME=URL`}},
		{"injected server without URL", map[string]string{envServers: "payments,mail"}, append(base, "--server", "payments=https://p.example/mcp"),
			exitUsage, []string{"USAGE server mail (--servers) has no URL"}},
		{"credential for no server", nil, append(base, "--server", "payments=https://p.example/mcp", "--credential-file", "mail=/x"),
			exitUsage, []string{"USAGE --credential-file mail names no --server"}},
		{"no identity", nil, []string{"sidecar", "--server", "p=https://p.example/mcp"}, exitUsage, []string{"USAGE --namespace and --service-account are required"}},
		{"listen on all interfaces", nil, append(base, "--server", "payments=https://p.example/mcp", "--listen", "0.0.0.0:15080"),
			exitRejected, []string{"SIDECAR_CONFIG", "loopback"}},
		{"no public key", nil, append(base, "--server", "payments=https://p.example/mcp"), exitRejected,
			[]string{"SIDECAR_CONFIG sidecar: authority trust anchor: the authority's public key is required"}},
		{"garbled injected public key", map[string]string{envPublicKeyPEM: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"},
			append(base, "--server", "payments=https://p.example/mcp"), exitRejected, []string{"SIDECAR_CONFIG sidecar: authority trust anchor: inline public keys"}},
		{"public key inline and as a file", map[string]string{envPublicKeyPEM: "x"},
			append(base, "--server", "payments=https://p.example/mcp", "--authority-public-key-file", token), exitRejected,
			[]string{"SIDECAR_CONFIG sidecar: authority trust anchor: public keys given both inline and as file"}},
		{"unknown flag", nil, append(base, "--listen-all"), exitUsage, []string{"USAGE"}},
		{"OAuth for no server", nil, withServer("--upstream-oauth", "mail="+goodOAuth), exitUsage, []string{"USAGE --upstream-oauth mail names no --server"}},
		{"OAuth not NAME=PATH", nil, withServer("--upstream-oauth", goodOAuth), exitUsage, []string{"USAGE --upstream-oauth"}},
		{"OAuth and a credential file", nil, withServer("--credential-file", "payments="+token, "--upstream-oauth", "payments="+goodOAuth),
			exitUsage, []string{"USAGE --upstream-oauth payments: the server has a --credential-file too"}},
		{"OAuth file missing", nil, withServer("--upstream-oauth", "payments="+filepath.Join(dir, "nope")), exitUsage, []string{"USAGE --upstream-oauth payments:"}},
		{"OAuth unknown field", nil, withServer("--upstream-oauth", "payments="+oauthFile("grant: token_exchange\nsecret: x\n")),
			exitUsage, []string{"USAGE --upstream-oauth payments:", "secret"}},
		{"OAuth over http", nil, withServer("--upstream-oauth", "payments="+oauthFile("grant: token_exchange\ntokenURL: http://idp.example/token\nsubjectTokenFile: "+token+"\n")),
			exitUsage, []string{"USAGE --upstream-oauth payments:", "https"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			status := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			if status != tc.status {
				t.Fatalf("exit %d, want %d; stderr:\n%s", status, tc.status, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q before failing", stdout.String())
			}
		})
	}
}

// TestSidecarEnvironment: the variables the injector sets configure the sidecar.
func TestSidecarEnvironment(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "creds", "payments"), 0o700); err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(dir, "creds", "payments", "credential")
	if err := os.WriteFile(cred, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		envListen: "127.0.0.1:15081", envNamespace: "billing", envServiceAccount: "billing-agent",
		envServers: "payments", envServerURLs: "payments=https://payments-mcp.payments.svc/mcp,mail=https://mail.example/mcp",
		envCredentialsDir: filepath.Join(dir, "creds"), envSinkID: "billing-agent-sink", envAuthorityURL: "https://a.example",
		envMetricsAddress: ":15090", envPublicKeyPEM: "the public key PEM", envAuthorityCAPEM: "the CA PEM",
	} {
		t.Setenv(k, v)
	}
	var o sidecarOptions
	f := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
	o.bind(f)
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(streams{err: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:15081" || cfg.Agent != "system:serviceaccount:billing:billing-agent" || cfg.SinkID != "billing-agent-sink" {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.PublicKey != "the public key PEM" || cfg.AuthorityCA != "the CA PEM" || cfg.PublicKeyFile != "" || cfg.AuthorityCAFile != "" {
		t.Fatalf("trust anchors %q %q (files %q %q)", cfg.PublicKey, cfg.AuthorityCA, cfg.PublicKeyFile, cfg.AuthorityCAFile)
	}
	if o.metricsAddr != ":15090" {
		t.Fatalf("metrics address %q", o.metricsAddr)
	}
	if len(cfg.Upstreams) != 2 || cfg.Upstreams[1].Name != "payments" || cfg.Upstreams[1].CredentialFile != cred || cfg.Upstreams[0].CredentialFile != "" {
		t.Fatalf("upstreams %+v", cfg.Upstreams)
	}
}

// TestSidecarUpstreamOAuthFlag: --upstream-oauth NAME=FILE gives the server the OAuth settings
// of the file (relative paths resolved against its folder) instead of the injected static
// credential.
func TestSidecarUpstreamOAuthFlag(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"oauth.yaml":    "grant: client_credentials\ntokenURL: https://idp.example/token\nclientID: sidecar\nclientSecretFile: client-secret\nscopes: [mcp]\n",
		"client-secret": "s3cret\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "creds", "payments"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "creds", "payments", "credential"), []byte("static"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &sidecarOptions{serverURLs: []string{"payments=https://p.example/mcp"}, oauthFiles: []string{"payments=" + filepath.Join(dir, "oauth.yaml")},
		credentialsDir: filepath.Join(dir, "creds"), namespace: "billing", serviceAccount: "agent", callTimeout: time.Second, reviewTimeout: time.Second, tracingRatio: "1"}
	cfg, err := o.config(streams{out: io.Discard, err: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Upstreams[0]
	if u.OAuth == nil || u.CredentialFile != "" || u.OAuth.ClientSecretFile != filepath.Join(dir, "client-secret") ||
		u.OAuth.Resource != "https://p.example/mcp" || u.OAuth.HTTPClient == nil || len(u.OAuth.Scopes) != 1 {
		t.Fatalf("upstream %+v oauth %+v", u, u.OAuth)
	}
}
