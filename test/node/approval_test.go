package node_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
	"github.com/actgate/actgate/test/testutil/node"
)

// The approval service as the chart installs it: people sign in at an OpenID provider the
// node's API server trusts, and the service acts with each person's own ID token.
const (
	approvalClient = "actgate-approval"
	approvalSecret = "approval-client-secret-3c9e"
	// approvalHost is the service's external name; the test's client dials the approval pod
	// for it (no DNS on this node), and its certificate names it.
	approvalHost = "approval.actgate.test"
	approvalURL  = "https://" + approvalHost
	// oidcAlice is alice as the API server names her when she signs in at the provider.
	oidcAlice = "oidc:" + "alice@example.com"
)

// approval is what the approval steps share: the provider, listening on the machine's own
// address so that the API server, the approval pod and the test reach the same issuer URL.
type approval struct {
	p   *idp.Provider
	pki *testutil.PKI
	// authConfig is the API server's AuthenticationConfiguration trusting p.
	authConfig string
}

// startApprovalProvider starts the provider before the node, whose API server must trust it.
func startApprovalProvider(t *testing.T) *approval {
	t.Helper()
	hostIP, err := node.HostIP()
	if err != nil {
		fatal(t, err)
	}
	a := &approval{p: idp.Start(t, idp.Options{
		Addr:    net.JoinHostPort(hostIP, "0"),
		Clients: []idp.Client{{ID: approvalClient, Secret: approvalSecret, RedirectURIs: []string{approvalURL + "/callback"}}},
	})}
	dir := t.TempDir()
	a.authConfig = a.p.WriteAuthenticationConfig(t, dir, approvalClient)
	a.pki = testutil.NewPKI(t, dir, approvalHost)
	return a
}

// approvalValues creates what the README's values file names that only this node has (the
// provider's CA, the service's TLS certificate; the README made the client secret) and writes
// the README's values file with this node's provider, address and principals filled in. It
// returns the file's path.
func (s *suite) approvalValues(a *approval, readme string) string {
	t := s.t
	t.Helper()
	s.kubectl("-n", releaseNS, "create", "configmap", "approval-oidc-ca", "--from-file=ca.crt="+a.p.CAFile())
	s.kubectl("-n", releaseNS, "create", "secret", "tls", "approval-tls", "--cert="+a.pki.CertFile, "--key="+a.pki.KeyFile)
	var v struct {
		RBAC struct {
			Principals []map[string]any `json:"principals"`
		} `json:"rbac"`
		Approval      map[string]any `json:"approval"`
		Notifications map[string]any `json:"notifications"`
	}
	if err := yaml.UnmarshalStrict([]byte(readme), &v); err != nil {
		fatalf(t, "the README's approval-values.yaml: %v", err)
	}
	oidc, _ := v.Approval["oidc"].(map[string]any)
	if oidc == nil || oidc["clientID"] != approvalClient || oidc["existingSecret"] != "approval-oidc" ||
		len(v.RBAC.Principals) == 0 || v.RBAC.Principals[0]["user"] != oidcAlice {
		fatalf(t, "the README's approval-values.yaml no longer names client %s, Secret approval-oidc and principal %s: %+v", approvalClient, oidcAlice, v)
	}
	// This node's provider, and the service reached at its pod with a certificate of its own
	// (no ingress controller runs here); no Slack, Teams or SMTP to notify (test/e2e and
	// controllers test notifications against real receivers).
	oidc["issuer"], oidc["caConfigMap"] = a.p.Issuer(), "approval-oidc-ca"
	v.Approval["externalURL"] = approvalURL
	v.Approval["tls"] = map[string]any{"existingSecret": "approval-tls"}
	v.Approval["ingress"] = map[string]any{"enabled": false}
	v.Notifications = map[string]any{"enabled": false}
	// alice also resolves from a terminal, with a kubeconfig that names her alice@example.com.
	v.RBAC.Principals = append(v.RBAC.Principals, map[string]any{"user": alice, "namespaces": []string{agentNS}})
	out, err := yaml.Marshal(v)
	if err != nil {
		fatal(t, err)
	}
	return testutil.WriteFile(t, s.work, "approval-values.yaml", out)
}

// editedSample is the sample ToolPolicy edited as the README asks ("edit first"): its server URL
// is where this node's upstream listens, and its reconciliation endpoint, which this node's
// upstream does not have, is removed. It returns the edited copy's path.
func (s *suite) editedSample(upstreamURL string) string {
	t := s.t
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.root, samplePolicy))
	if err != nil {
		fatal(t, err)
	}
	var p map[string]any
	if err := yaml.Unmarshal(raw, &p); err != nil {
		fatal(t, err)
	}
	spec, _ := p["spec"].(map[string]any)
	servers, _ := spec["servers"].([]any)
	if len(servers) != 1 {
		fatalf(t, "the sample policy has %d servers, want 1", len(servers))
	}
	server, _ := servers[0].(map[string]any)
	server["url"] = upstreamURL
	delete(server, "reconciliation")
	out, err := yaml.Marshal(p)
	if err != nil {
		fatal(t, err)
	}
	return testutil.WriteFile(t, s.work, "toolpolicy.yaml", out)
}

// approvalClientFor returns a browser-like client (cookie jar, redirects followed) that trusts
// the provider and the service and reaches approvalHost at the approval pod.
func (s *suite) approvalClientFor(a *approval) *http.Client {
	s.t.Helper()
	pod := strings.TrimSpace(s.kubectl("-n", releaseNS, "get", "pods", "-l", "app.kubernetes.io/component=approval",
		"-o", "jsonpath={.items[0].status.podIP}"))
	if pod == "" {
		fatal(s.t, "the approval pod has no IP")
	}
	pool := a.pki.Pool.Clone()
	pool.AppendCertsFromPEM(a.p.CAPEM())
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); host == approvalHost {
				addr = net.JoinHostPort(pod, "8080")
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}
}

var approvalTokenRE = regexp.MustCompile(`name="token" value="([A-Za-z0-9_-]+)"`)

// resolveThroughApproval makes the policy name oidcAlice as its principal, escalates a payment
// in session, signs alice in at the provider through the approval service the chart installed,
// and resolves the moment there with the option that authorises exactly that call. The API
// server records alice's OIDC identity as the resolver and the approval service as the
// surface; the retry of the call then runs once.
func (s *suite) resolveThroughApproval(a *approval, session string) {
	t := s.t
	t.Helper()
	began := time.Now()
	s.kubectl("-n", agentNS, "patch", "toolpolicy", "payments", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/rules/1/evidence/principals","value":["`+oidcAlice+`"]}]`)
	const args = `{"amount":120,"to":"ACME"}`
	before := s.counts().Counts["send_payment"]
	bm := &v1alpha1.BindingMoment{}
	s.escalationAddressedTo(session, args, oidcAlice, bm)
	option := optionFor(t, bm, "send_payment", args)

	c := s.approvalClientFor(a)
	var page string
	testutil.Eventually(t, 90*time.Second, "alice signed in at the approval service", func() error {
		resp := a.p.SignIn(t, c, approvalURL+"/login", idp.Alice.Login, idp.Alice.Password)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("sign-in ended with %d at %s", resp.StatusCode, resp.Request.URL)
		}
		got, err := c.Get(approvalURL + "/")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(got.Body)
		_ = got.Body.Close()
		page = string(b)
		if !strings.Contains(page, agentNS+"/"+bm.Name) {
			return fmt.Errorf("the page (%d) does not show %s/%s", got.StatusCode, agentNS, bm.Name)
		}
		return nil
	})
	m := approvalTokenRE.FindStringSubmatch(page)
	if m == nil {
		fatalf(t, "the approval page has no anti-CSRF token")
	}
	form := url.Values{"token": {m[1]}, "moment": {agentNS + "/" + bm.Name}, "envelope": {string(bm.Spec.EnvelopeDigest)},
		"choice": {fmt.Sprintf("option:%d", option)}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, approvalURL+"/resolve", strings.NewReader(form.Encode()))
	if err != nil {
		fatal(t, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", approvalURL)
	resp, err := c.Do(req)
	if err != nil {
		fatal(t, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fatalf(t, "resolving through the approval service: %d %s", resp.StatusCode, body)
	}
	testutil.Eventually(t, 60*time.Second, "the BindingMoment recorded Resolved by alice's OIDC identity", func() error {
		if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(bm), bm); err != nil {
			return err
		}
		v := bm.Status.ResolvedVia
		if bm.Status.State == v1alpha1.BindingMomentResolved && bm.Status.ResolvedBy == oidcAlice &&
			v != nil && v.Surface == v1alpha1.SurfaceApprovalService && v.Issuer == a.p.Issuer() && v.AuthTime != nil {
			return nil
		}
		return fmt.Errorf("%+v", bm.Status)
	})
	res := s.call(session, "send_payment", args)
	if c := s.counts(); res.IsError || c.Counts["send_payment"] != before+1 {
		fatalf(t, "the payment alice approved: isError=%v code %q upstream %v: %s", res.IsError, res.code(), c.Counts, res.Text)
	}
	if res := s.call(session, "send_payment", args); s.counts().Counts["send_payment"] != before+1 {
		fatalf(t, "the approved payment ran twice: code %q: %s", res.code(), res.Text)
	}
	t.Logf("approval service: %s resolved by %s via %s (auth_time %s) in %s; the call ran once",
		bm.Name, bm.Status.ResolvedBy, bm.Status.ResolvedVia.Surface, bm.Status.ResolvedVia.AuthTime.UTC().Format(time.RFC3339),
		time.Since(began).Round(time.Millisecond))

	// The later steps resolve as alice's kubeconfig user again: the policy names her once
	// more, and the authority addresses a new escalation to her before they start.
	s.kubectl("-n", agentNS, "patch", "toolpolicy", "payments", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/rules/1/evidence/principals","value":["`+alice+`"]}]`)
	s.escalationAddressedTo(session, `{"amount":7,"to":"ACME"}`, alice, &v1alpha1.BindingMoment{})
}

// escalationAddressedTo calls send_payment with args in session until it escalates to a
// BindingMoment for principal (a policy change reaches the authority shortly after it is
// accepted), which it reads into bm. The upstream is never called.
func (s *suite) escalationAddressedTo(session, args, principal string, bm *v1alpha1.BindingMoment) {
	t := s.t
	t.Helper()
	before := s.counts().Counts["send_payment"]
	testutil.Eventually(t, 60*time.Second, "an escalation addressed to "+principal, func() error {
		res := s.call(session, "send_payment", args)
		name, _ := res.Meta[mcpproxy.MetaMomentID].(string)
		if res.code() != string(ef.EFEscalationRequired) || name == "" {
			return fmt.Errorf("code %q moment %q: %s", res.code(), name, res.Text)
		}
		if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: agentNS, Name: name}, bm); err != nil {
			return err
		}
		if bm.Spec.Principal != principal {
			return fmt.Errorf("moment %s is for %s", name, bm.Spec.Principal)
		}
		return nil
	})
	if c := s.counts(); c.Counts["send_payment"] != before {
		fatalf(t, "an escalated payment reached the upstream: %v", c.Counts)
	}
}
