package webhook_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

// TestOperatorCertificates runs the manager with CertModeOperator against a real API server:
// the rotator fills the (empty) Secret, injects its CA into both webhook configurations, and the
// API server then reaches the webhook over TLS it verifies with that CA. A goroutine plays the
// kubelet, copying the Secret into the certificate folder.
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
		Certs:     webhook.CertConfig{Mode: webhook.CertModeOperator, Namespace: ns, ExtraDNSNames: []string{"localhost"}},
	}.Default()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.SetupWithManager(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	kubelet := make(chan struct{})
	go func() { // the kubelet's Secret volume, roughly
		defer close(kubelet)
		for mctx.Err() == nil {
			s := &corev1.Secret{}
			if e.Client.Get(mctx, client.ObjectKeyFromObject(secret), s) == nil && len(s.Data["tls.crt"]) > 0 {
				_ = os.WriteFile(filepath.Join(certDir, "tls.key"), s.Data["tls.key"], 0o600)
				_ = os.WriteFile(filepath.Join(certDir, "tls.crt"), s.Data["tls.crt"], 0o600)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-kubelet
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

	s := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("the rotator did not write %s", k)
		}
	}

	// The API server now reaches the webhook and verifies it with the injected CA: the bad
	// policy is refused by the webhook's own reason, not by a call failure.
	waitFor(t, func() bool {
		err := e.Client.Create(ctx, bad.DeepCopy())
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "InvalidCEL")
	}, "the webhook to answer over TLS signed by the rotator's CA")
}

func itoa(i int) string { return strconv.Itoa(i) }
