package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

// optOutNamespace is the one namespace of the test configuration where a pod's opt-out is
// honoured.
const optOutNamespace = "sandbox-optout"

// TestMain gives controller-runtime (the manager, envtest) a logger that writes under -v only.
func TestMain(m *testing.M) {
	flag.Parse()
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		if testing.Verbose() {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{Verbosity: 1}))
	os.Exit(m.Run())
}

// webhookEnv is an API server with actgate's webhook configurations installed from
// `kubectl kustomize config/webhook` (the manifests `make manifests` generates plus the
// selector patch) and a manager serving them.
type webhookEnv struct {
	*envtest.Env
	Config webhook.Config
}

func startWebhookEnv(t *testing.T) *webhookEnv {
	t.Helper()
	envtest.SkipIfShort(t)
	ctx := t.Context()
	bin, err := envtest.BinDir(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "kustomize", "config/webhook")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	manifests, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/webhook: %v\n%s", err, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "webhooks.yaml")
	if err := os.WriteFile(path, manifests, 0o600); err != nil {
		t.Fatal(err)
	}

	env := envtest.Start(t, envtest.WithEnvironment(func(e *crenvtest.Environment) {
		e.WebhookInstallOptions = crenvtest.WebhookInstallOptions{Paths: []string{path}}
	}))
	wio := &env.Environment.WebhookInstallOptions
	if len(wio.MutatingWebhooks) != 1 || len(wio.ValidatingWebhooks) != 1 {
		t.Fatalf("config/webhook has %d mutating and %d validating configurations, want 1 and 1", len(wio.MutatingWebhooks), len(wio.ValidatingWebhooks))
	}

	cfg := webhook.Config{
		Injection: inject.Config{
			Image:            "ghcr.io/actgate/actgate:v0.0.0-test",
			AuthorityURL:     "https://actgate-authority.actgate-system.svc:443",
			ExemptNamespaces: []string{"kube-system", "kube-public", "kube-node-lease", "actgate-system"},
			OptOutNamespaces: []string{optOutNamespace},
		},
		Authority: webhook.AuthorityTrust{
			CAFile:        filepath.Join(root, "webhook/testdata/authority-ca.pem"),
			PublicKeyFile: filepath.Join(root, "webhook/testdata/authority-ca.pem"), // a certificate: its key is taken
		},
		Server: webhook.ServerConfig{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir},
		Certs:  webhook.CertConfig{Mode: webhook.CertModeExternal},
	}.Default()

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.SetupWithManager(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	// Registered after envtest.Start's cleanup, so it runs first: stop the manager, then the
	// API server.
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

	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			_ = conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook server on %s not serving: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &webhookEnv{Env: env, Config: cfg}
}

// run runs a tool (kubectl or helm) and returns stdout, stderr and the error.
func run(t *testing.T, env *envtest.Env, tool string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := env.Command(ctx, tool, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
