package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

func TestApprovalUsage(t *testing.T) {
	kc := writeKubeconfig(t, "https://127.0.0.1:1")
	base := []string{"--kubeconfig", kc, "--external-url", "https://approve.example", "--oidc-issuer", "https://127.0.0.1:1",
		"--oidc-client-id", "actgate-approval", "--namespaces", "payments"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no flags", nil, exitUsage, "USAGE"},
		{"no namespaces", base[:len(base)-2], exitUsage, "USAGE"},
		{"external URL with a path", with("--external-url", "https://approve.example/x"), exitUsage, "USAGE external URL"},
		{"lone TLS certificate", with("--tls-cert-file", "/x.crt"), exitUsage, "USAGE --tls-cert-file and --tls-key-file"},
		{"zero session lifetime", with("--session-lifetime", "0s"), exitUsage, "USAGE --session-lifetime"},
		{"lower-case step-up class", with("--step-up-classes", "financial"), exitUsage, "USAGE step-up classes"},
		{"missing client secret", with("--oidc-client-secret-file", "/nonexistent"), exitRejected, "APPROVAL_CONFIG client secret"},
		{"issuer CA not PEM", with("--oidc-ca-file", kc), exitRejected, "APPROVAL_CONFIG issuer CA"},
		{"missing kubeconfig", with("--kubeconfig", "/nonexistent/kubeconfig"), exitUsage, "USAGE kubeconfig:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"approval"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestApprovalServes runs `actgate-controlplane approval` against the OpenID provider fixture:
// /healthz answers, /readyz turns ready once the provider's discovery document is read, /login
// sends the browser to the provider with PKCE, another Host is refused, and the logs carry no
// client secret.
func TestApprovalServes(t *testing.T) {
	addr := testutil.FreeAddr(t)
	external := "http://" + addr
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "actgate-approval", Secret: "the-client-secret", RedirectURIs: []string{external + "/callback"}}}})
	secret := testutil.WriteFile(t, t.TempDir(), "secret", []byte("the-client-secret\n"))
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testutil.Buffer
	done := make(chan error, 1)
	go func() {
		root := newRootCmd(streams{in: strings.NewReader(""), out: io.Discard, err: &stderr})
		root.SetArgs([]string{"approval", "--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1"), "--listen", addr, "--external-url", external,
			"--oidc-issuer", p.Issuer(), "--oidc-ca-file", p.CAFile(), "--oidc-client-id", "actgate-approval", "--oidc-client-secret-file", secret,
			"--namespaces", "payments,clinic"})
		done <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("approval: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("the approval service did not stop")
		}
	})
	waitHTTP(t, done, external+"/healthz", "ok")
	waitHTTP(t, done, external+"/readyz", "ok")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(external + "/login?moment=payments/pay-1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, p.Issuer()) || !strings.Contains(loc, "code_challenge_method=S256") {
		t.Fatalf("/login: %d %q", resp.StatusCode, loc)
	}
	req, _ := http.NewRequest(http.MethodGet, external+"/", nil)
	req.Host = "rebound.example"
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("another Host: %d", resp.StatusCode)
	}
	if strings.Contains(stderr.String(), "the-client-secret") {
		t.Fatalf("the logs carry the client secret:\n%s", stderr.String())
	}
}
