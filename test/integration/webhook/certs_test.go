package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

// TestOperatorCertificates runs the manager as the chart does (CertModeOperator,
// CertSourceSecret) against a real API server: the rotator fills the (empty) Secret, the
// manager copies it into its (empty) certificate folder through the API, with no kubelet, and
// is ready at once; the rotator injects its CA into both webhook configurations, and the API
// server then reaches the webhook over TLS it verifies with that CA.
func TestOperatorCertificates(t *testing.T) {
	e := envtest.Start(t)
	ctx := t.Context()
	const ns = "actgate-system"
	namespace(t, e, ns, nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webhook.DefaultCertSecretName}}
	if err := e.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	// The webhook configurations of config/webhook, pointed at this process by URL. The
	// certificate names localhost (certs.extraDNSNames) so the API server can verify it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	bin, err := envtest.BinDir(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "kustomize", "config/webhook")
	cmd.Dir = e.Root
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs(t, string(out)) {
		point := func(cc *admissionregistrationv1.WebhookClientConfig) {
			u := "https://localhost:" + itoa(port) + *cc.Service.Path
			cc.URL, cc.Service = &u, nil
		}
		switch kindOf(t, d) {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(d, c); err != nil {
				t.Fatal(err)
			}
			for i := range c.Webhooks {
				point(&c.Webhooks[i].ClientConfig)
			}
			if err := e.Client.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(d, c); err != nil {
				t.Fatal(err)
			}
			for i := range c.Webhooks {
				point(&c.Webhooks[i].ClientConfig)
			}
			if err := e.Client.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Before the manager runs, the webhooks fail closed.
	bad := paymentsPolicy(namespace(t, e, "", nil))
	bad.Spec.Rules[0].Arguments = []v1alpha1.ArgumentConstraint{{Name: "cap", Expression: "args.amount <="}}
	if err := e.Client.Create(ctx, bad.DeepCopy()); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("with no webhook server, create = %v, want a webhook failure (fail closed)", err)
	}

	certDir := t.TempDir()
	cfg := webhook.Config{
		Injection: inject.Config{Image: "ghcr.io/actgate/actgate:test", AuthorityURL: "https://actgate-authority.actgate-system.svc:443"},
		Server:    webhook.ServerConfig{Host: "127.0.0.1", Port: port, CertDir: certDir},
		Certs: webhook.CertConfig{Mode: webhook.CertModeOperator, Source: webhook.CertSourceSecret, Namespace: ns,
			ExtraDNSNames: []string{"localhost"}},
	}.Default()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	health := hl.Addr().String()
	_ = hl.Close()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: health})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.SetupWithManager(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop")
		}
	})

	waitFor(t, func() bool {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if e.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultMutatingName}, m) != nil ||
			e.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultValidatingName}, v) != nil {
			return false
		}
		for _, w := range m.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return false
			}
		}
		for _, w := range v.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return false
			}
		}
		return true
	}, "the rotator to inject its CA into both webhook configurations")

	// Ready (the webhook server has its certificate) without any kubelet: the manager read the
	// Secret through the API. On a node the Secret volume would have waited for the kubelet's
	// next sync, 12-90 s.
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the manager's /readyz")
	ready := time.Since(started)
	t.Logf("manager ready %v after start", ready.Round(time.Millisecond))
	if ready > 20*time.Second {
		t.Errorf("manager ready only after %v; the Secret watch should make it ready within seconds", ready)
	}

	s := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("the rotator did not write %s", k)
		}
	}
	// The folder holds the Secret's serving pair and CA certificate, and never the CA's key.
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		got, err := os.ReadFile(filepath.Join(certDir, k))
		if err != nil || !bytes.Equal(got, s.Data[k]) {
			t.Errorf("%s in the certificate folder: %v; want the Secret's", k, err)
		}
	}
	if _, err := os.Stat(filepath.Join(certDir, "ca.key")); !os.IsNotExist(err) {
		t.Errorf("ca.key reached the certificate folder (stat: %v)", err)
	}

	// The API server now reaches the webhook and verifies it with the injected CA: the bad
	// policy is refused by the webhook's own reason, not by a call failure.
	waitFor(t, func() bool {
		err := e.Client.Create(ctx, bad.DeepCopy())
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "InvalidCEL")
	}, "the webhook to answer over TLS signed by the rotator's CA")
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestCertManagerModeReadsItsSecret runs the manager as the chart's cert-manager mode does
// (CertModeExternal, CertSourceSecret) under the chart's own Role for that mode, as the
// manager's service account: it may read the one certificate Secret by name and nothing else in
// the release namespace, and with that alone it copies the Secret cert-manager issued into its
// folder, is ready, and serves that certificate.
func TestCertManagerModeReadsItsSecret(t *testing.T) {
	e := envtest.Start(t)
	ctx := t.Context()
	const ns = "actgate-system"
	namespace(t, e, ns, nil)
	for _, d := range docs(t, renderChart(t, "--set", "certManager.enabled=true")) {
		var obj client.Object
		switch kindOf(t, d) {
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(d, obj); err != nil {
			t.Fatal(err)
		}
		if obj.GetName() != "actgate-manager-role" && obj.GetName() != "actgate-manager-rolebinding" {
			continue
		}
		if err := e.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	// The Secret as cert-manager writes it, and another one the manager must not read.
	pki := testutil.NewPKI(t, t.TempDir())
	key, err := os.ReadFile(pki.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	certSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webhook.DefaultCertSecretName}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": pemOf(pki.Cert.Certificate[0]), "tls.key": key, "ca.crt": pki.CAPEM}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, Data: map[string][]byte{"k": []byte("v")}}
	for _, s := range []*corev1.Secret{certSecret, other} {
		if err := e.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	mgrUser, err := e.AddUser("system:serviceaccount:"+ns+":actgate-manager",
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { // RBAC is enforced from the informer's view of the Role
		return mgrUser.Client.Get(ctx, client.ObjectKeyFromObject(certSecret), &corev1.Secret{}) == nil
	}, "the chart's Role to let the manager read its certificate Secret")
	if err := mgrUser.Client.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the manager read another Secret of the release namespace: %v", err)
	}
	if err := mgrUser.Client.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("the manager listed every Secret of the release namespace: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	certDir := t.TempDir()
	cfg := webhook.Config{
		Injection: inject.Config{Image: "ghcr.io/actgate/actgate:test", AuthorityURL: "https://actgate-authority.actgate-system.svc:443"},
		Server:    webhook.ServerConfig{Host: "127.0.0.1", Port: port, CertDir: certDir},
		Certs:     webhook.CertConfig{Mode: webhook.CertModeExternal, Source: webhook.CertSourceSecret, Namespace: ns},
	}.Default()
	mgr, err := ctrl.NewManager(mgrUser.Config, ctrl.Options{Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.SetupWithManager(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop")
		}
	})

	// The webhook server presents the Secret's certificate, verified with its CA.
	waitFor(t, func() bool {
		c, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(port)), &tls.Config{RootCAs: pki.Pool, ServerName: "localhost"})
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, "the webhook server to serve cert-manager's certificate")
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		got, err := os.ReadFile(filepath.Join(certDir, k))
		if err != nil || !bytes.Equal(got, certSecret.Data[k]) {
			t.Errorf("%s in the certificate folder: %v; want the Secret's", k, err)
		}
	}
}

func pemOf(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
