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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/webhook/inject"
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
		{"injected agent OAuth without audience", map[string]string{envAgentOAuth: `{"issuer":"https://idp.example"}`}, withServer(),
			exitUsage, []string{"USAGE --agent-oauth ($ACTGATE_AGENT_OAUTH): audience is required"}},
		{"external URL with a path", nil, withServer("--external-url", "http://127.0.0.1:15080/mcp"),
			exitUsage, []string{`USAGE --external-url "http://127.0.0.1:15080/mcp" is not http://HOST:PORT`}},
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

// TestSidecarReadsInjectedUpstreamOAuth: the ACTGATE_UPSTREAM_OAUTH the injector renders for a
// ToolPolicy's spec.servers[].auth, with the files it projects into the credentials folder,
// configures the sidecar: client credentials with the projected client secret, and token
// exchange of the projected service-account token; a server it names that has no --server, or
// settings the sidecar cannot use, are refused.
func TestSidecarReadsInjectedUpstreamOAuth(t *testing.T) {
	pay := v1alpha1.ToolServer{Name: "payments", URL: "https://payments.example/mcp", Auth: &v1alpha1.UpstreamAuth{
		Grant: v1alpha1.UpstreamGrantClientCredentials, TokenURL: "https://idp.example/token", ClientID: "sidecar",
		ClientSecretRef: &v1alpha1.SecretKeyRef{Name: "idp", Key: "secret"}}}
	mail := v1alpha1.ToolServer{Name: "mail", URL: "https://mail.example/mcp", Auth: &v1alpha1.UpstreamAuth{
		Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token", ServiceAccountTokenAudience: "https://idp.example"}}
	pol := v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "agents"}, Spec: v1alpha1.ToolPolicySpec{Servers: []v1alpha1.ToolServer{pay, mail}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "agents"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}}}
	cfg := inject.Config{Image: "actgate:test", AuthorityURL: "https://actgate-authority.actgate-system.svc"}.Default()
	out, _, err := inject.Inject(pod, []v1alpha1.ToolPolicy{pol}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	var env string
	for _, e := range out.Spec.InitContainers[0].Env {
		if e.Name == envUpstreamOAuth {
			env = e.Value
		}
	}
	creds := t.TempDir()
	for _, f := range []string{"payments/client-secret", "mail/sa-token"} {
		if err := os.MkdirAll(filepath.Join(creds, filepath.Dir(f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(creds, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := func() *sidecarOptions {
		return &sidecarOptions{serverURLs: []string{"payments=" + pay.URL, "mail=" + mail.URL}, credentialsDir: creds,
			namespace: "agents", serviceAccount: "agent", callTimeout: time.Second, reviewTimeout: time.Second, tracingRatio: "1"}
	}
	t.Setenv(envUpstreamOAuth, env)
	c, err := opts().config(streams{out: io.Discard, err: io.Discard})
	if err != nil {
		t.Fatalf("ACTGATE_UPSTREAM_OAUTH %s: %v", env, err)
	}
	got := map[string]*sidecar.Upstream{}
	for i := range c.Upstreams {
		got[c.Upstreams[i].Name] = &c.Upstreams[i]
	}
	if p := got["payments"].OAuth; p == nil || p.Grant != "client_credentials" || p.ClientSecretFile != filepath.Join(creds, "payments/client-secret") || p.Resource != pay.URL {
		t.Fatalf("payments: %+v", p)
	}
	if m := got["mail"].OAuth; m == nil || m.Grant != "token_exchange" || m.SubjectTokenFile != filepath.Join(creds, "mail/sa-token") || m.Audience != "" {
		t.Fatalf("mail: %+v", m)
	}
	for name, bad := range map[string]string{
		"unknown server": `{"ghost":{"grant":"token_exchange","tokenURL":"https://idp.example/token","subjectTokenFile":"mail/sa-token"}}`,
		"not JSON":       `{`,
		"missing file":   `{"mail":{"grant":"token_exchange","tokenURL":"https://idp.example/token","subjectTokenFile":"mail/nope"}}`,
	} {
		t.Setenv(envUpstreamOAuth, bad)
		if _, err := opts().config(streams{out: io.Discard, err: io.Discard}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
