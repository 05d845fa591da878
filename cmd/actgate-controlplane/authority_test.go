package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// authorityFiles writes what `actgate-controlplane authority` needs: a TLS certificate and key from a CA
// made here, and an Ed25519 signing key. It returns the flags and a pool trusting the CA.
func authorityFiles(t *testing.T) ([]string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "authority"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	_, signing, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signingPEM, err := cryptoutils.MarshalPrivateKeyToPEM(signing)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certFile := write("tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	keyFile := write("tls.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	signingFile := write("signing.pem", signingPEM)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return []string{"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--signing-key-file", signingFile}, pool
}

func TestAuthorityUsage(t *testing.T) {
	files, _ := authorityFiles(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no flags", nil, exitUsage, "USAGE"},
		{"no signing key", files[:4], exitUsage, "USAGE"},
		{"zero review timeout", append(append([]string{}, files...), "--review-timeout", "0s"), exitUsage, "USAGE --review-timeout"},
		{"missing kubeconfig", append(append([]string{}, files...), "--kubeconfig", "/nonexistent/kubeconfig"), exitUsage, "USAGE kubeconfig:"},
		{"signing key is not a key", append(append([]string{}, files[:4]...), "--signing-key-file", files[1]), exitRejected, "AUTHORITY_CONFIG signing key"},
		{"missing certificate", []string{"--tls-cert-file", "/nonexistent.crt", "--tls-private-key-file", files[3], "--signing-key-file", files[5],
			"--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1")}, exitRejected, "AUTHORITY_CONFIG TLS certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"authority"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig for an API server at server (never reached in the tests
// that use it, or refusing connections).
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startAuthority runs `actgate-controlplane authority` until the test ends and returns its review URL and
// metrics address.
func startAuthority(t *testing.T, kubeconfig string, files []string, extra ...string) (string, string, *bytes.Buffer) {
	t.Helper()
	addr, metrics := testutil.FreeAddr(t), testutil.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		root := newRootCmd(streams{in: strings.NewReader(""), out: io.Discard, err: &stderr})
		root.SetArgs(append(append([]string{"authority", "--kubeconfig", kubeconfig, "--bind-address", addr, "--metrics-bind-address", metrics}, files...), extra...))
		done <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("authority: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("the authority service did not stop")
		}
	})
	waitHTTP(t, done, "http://"+metrics+"/readyz", "ok")
	return "https://" + addr, metrics, &stderr
}

func reviewClient(url string, pool *x509.CertPool, token string) *review.Client {
	return &review.Client{URL: url, Token: func() (string, error) { return token, nil },
		HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
}

// TestAuthorityUnreachableAPIServer: the command serves over TLS and, with no API server to
// ask, denies with the timeout code.
func TestAuthorityUnreachableAPIServer(t *testing.T) {
	files, pool := authorityFiles(t)
	url, metrics, stderr := startAuthority(t, writeKubeconfig(t, "https://"+testutil.FreeAddr(t)), files, "--review-timeout", "2s")
	req := review.Request{Operation: review.OperationConsume, Consume: &review.ConsumeRequest{
		AuthorityID: "authz-" + strings.Repeat("0", 64), OperationID: "op-1",
		Binding: review.Binding{ActID: "act-1", ArgumentsDigest: "sha256:" + strings.Repeat("1", 64), ActionDigest: "sha256:" + strings.Repeat("2", 64),
			Tool: "send_payment", Destination: "https://payments.example/mcp", SinkID: "sink", PolicyEpoch: "1"},
	}}
	resp, err := reviewClient(url, pool, "some-token").Do(context.Background(), req)
	if err != nil {
		t.Fatalf("review: %v\n%s", err, stderr)
	}
	if resp.Allowed || resp.Code != ef.EF060 || resp.Reason != review.ReasonTimeout {
		t.Fatalf("response %+v; want a deny with EF_060", resp)
	}
	// Only the CA's certificate is trusted: a client that trusts nothing is refused by TLS.
	if _, err := reviewClient(url, x509.NewCertPool(), "t").Do(context.Background(), req); err == nil {
		t.Fatal("TLS accepted a client that does not trust the service's CA")
	}
	waitHTTP(t, nil, "http://"+metrics+"/metrics", `actgate_authority_decisions_total{class="",code="EF_060",decision="Denied",operation="Consume",reason="Timeout"} 1`)
}

// TestAuthorityServes runs `actgate-controlplane authority` against a real API server: a sidecar's review
// with a real bound service-account token is allowed under the pod's ToolPolicy and recorded.
func TestAuthorityServes(t *testing.T) {
	env := envtest.Start(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	files, pool := authorityFiles(t)
	url, metrics, stderr := startAuthority(t, env.Kubeconfig, files)

	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-0", Namespace: ns, Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{ServiceAccountName: "agent", Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent"}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	tp := &v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns}, Spec: v1alpha1.ToolPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
		Sink:        &v1alpha1.SinkIdentity{ID: "agent-sink"},
		Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: "https://payments.example/mcp"}},
		Rules:       []v1alpha1.ToolRule{{Name: "reads", Tools: []string{"get_*"}, ConsequenceClass: v1alpha1.ConsequenceInformational}},
	}}
	if err := env.Client.Create(ctx, tp); err != nil {
		t.Fatal(err)
	}
	tp.Status.PolicyEpoch = 1
	meta.SetStatusCondition(&tp.Status.Conditions, metav1.Condition{Type: v1alpha1.ToolPolicyAcceptedCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ToolPolicyCompiledReason, ObservedGeneration: tp.Generation})
	if err := env.Client.Status().Update(ctx, tp); err != nil {
		t.Fatal(err)
	}
	// The service lists policies from the API server's watch cache; wait until it has this one.
	for i := 0; ; i++ {
		var list v1alpha1.ToolPolicyList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].ResourceVersion == tp.ResourceVersion {
			break
		}
		if i == 300 {
			t.Fatal("the watch cache never showed the accepted policy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"actgate-authority"}, ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := act.NewIDIssuer(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := act.NewCandidate(act.Input{Vendor: act.VendorMCP, VendorID: "1", ToolName: "get_balance", Arguments: json.RawMessage(`{"account":"a"}`)},
		act.MappingContext{SessionID: "s1", Principal: act.Principal{PrincipalID: "customer"}, Agent: act.Agent{AgentID: "agent"},
			Server: act.ServerIdentity{Name: "payments", URL: "https://payments.example/mcp"}, SinkID: "agent-sink", Provenance: act.SourceUser,
			Now: time.Now, TTL: time.Minute, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(cand.Act)
	resp, err := reviewClient(url, pool, tr.Status.Token).Do(ctx, review.Request{Operation: review.OperationReview, Server: "payments", Act: body, Arguments: cand.Arguments})
	if err != nil {
		t.Fatalf("review: %v\n%s", err, stderr)
	}
	if !resp.Allowed || resp.Act != cand.Act.CandidateActID {
		t.Fatalf("response %+v\n%s", resp, stderr)
	}
	got := &v1alpha1.Act{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: resp.Act}, got); err != nil || got.Status.Decision != v1alpha1.ActDecisionAllowed {
		t.Fatalf("act %+v, %v", got.Status, err)
	}
	waitHTTP(t, nil, "http://"+metrics+"/metrics", `actgate_authority_decisions_total{class="INFORMATIONAL",code="",decision="Allowed",operation="Review",reason="Policy"} 1`)
}
