// Package webhookenv starts the Kubernetes test rigs' control plane with actgate's admission
// webhooks: a real API server (test/envtest) with the webhook configurations of
// `kubectl kustomize config/webhook` (the manifests `make manifests` generates plus the selector
// patch) installed, and a manager serving them (webhook.SetupWithManager), so pods are injected
// and BindingMoment resolutions admitted or denied by the real webhooks. test/attacks,
// test/integration/webhook and test/integration/console run it.
package webhookenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

// Env is the API server and the manager serving the webhooks.
type Env struct {
	*envtest.Env
	// Config is the manager's webhook configuration.
	Config webhook.Config
	// Root is the repository's root.
	Root   string
	cancel context.CancelFunc
	done   chan error
}

// New starts the API server and the manager and waits until the webhook server answers;
// configure, when not nil, adjusts the webhook configuration first, and opts adjust the control
// plane (e.g. envtest.WithAPIServerFlag("authentication-config", path)). The caller must Stop it.
func New(ctx context.Context, configure func(*webhook.Config), opts ...envtest.Option) (*Env, error) {
	bin, err := envtest.BinDir(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "kustomize", "config/webhook")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	manifests, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize config/webhook: %w\n%s", err, stderr.String())
	}
	dir, err := os.MkdirTemp("", "actgate-webhooks-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // the API server has read the manifests once it started
	path := filepath.Join(dir, "webhooks.yaml")
	if err := os.WriteFile(path, manifests, 0o600); err != nil {
		return nil, err
	}
	env, err := envtest.New(ctx, append([]envtest.Option{envtest.WithEnvironment(func(e *crenvtest.Environment) {
		e.WebhookInstallOptions = crenvtest.WebhookInstallOptions{Paths: []string{path}}
	})}, opts...)...)
	if err != nil {
		return nil, err
	}
	wio := &env.Environment.WebhookInstallOptions
	if len(wio.MutatingWebhooks) != 1 || len(wio.ValidatingWebhooks) != 1 {
		_ = env.Stop()
		return nil, fmt.Errorf("config/webhook has %d mutating and %d validating configurations, want 1 and 1", len(wio.MutatingWebhooks), len(wio.ValidatingWebhooks))
	}
	cfg := webhook.Config{
		Injection: inject.Config{
			Image:            "ghcr.io/actgate/actgate:v0.0.0-test",
			AuthorityURL:     "https://actgate-authority.actgate-system.svc:443",
			ExemptNamespaces: []string{"kube-system", "kube-public", "kube-node-lease", "actgate-system"},
		},
		Authority: webhook.AuthorityTrust{
			CAFile:        filepath.Join(root, "webhook/testdata/authority-ca.pem"),
			PublicKeyFile: filepath.Join(root, "webhook/testdata/authority-ca.pem"), // a certificate: its key is taken
		},
		Server: webhook.ServerConfig{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir},
		Certs:  webhook.CertConfig{Mode: webhook.CertModeExternal},
	}
	if configure != nil {
		configure(&cfg)
	}
	cfg = cfg.Default()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err == nil {
		err = webhook.SetupWithManager(mgr, cfg)
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	mctx, cancel := context.WithCancel(context.Background())
	e := &Env{Env: env, Config: cfg, Root: root, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- mgr.Start(mctx) }()
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			_ = conn.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			_ = e.Stop()
			return nil, fmt.Errorf("webhook server on %s not serving: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the manager, then the API server, and reports how the manager ended.
func (e *Env) Stop() error {
	e.cancel()
	var err error
	select {
	case err = <-e.done:
		if err != nil {
			err = fmt.Errorf("manager: %w", err)
		}
	case <-time.After(30 * time.Second):
		err = errors.New("manager did not stop")
	}
	return errors.Join(err, e.Env.Stop())
}

// Start is New for one test: skipped under -short, failed if it cannot start, stopped when
// the test ends.
func Start(t testing.TB, configure func(*webhook.Config), opts ...envtest.Option) *Env {
	t.Helper()
	envtest.SkipIfShort(t)
	e, err := New(context.Background(), configure, opts...)
	if err != nil {
		t.Fatalf("webhookenv: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}
