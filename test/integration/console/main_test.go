package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// startWebhookEnv starts an API server with actgate's webhook configurations installed from
// `kubectl kustomize config/webhook` and a manager serving them (as test/integration/webhook
// does), so a BindingMoment resolution is admitted or denied by the real BindingMoment webhook.
func startWebhookEnv(t *testing.T) *envtest.Env {
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
	cfg := webhook.Config{
		Injection: inject.Config{
			Image:            "ghcr.io/actgate/actgate:v0.0.0-test",
			AuthorityURL:     "https://actgate-authority.actgate-system.svc:443",
			ExemptNamespaces: []string{"kube-system", "kube-public", "kube-node-lease", "actgate-system"},
		},
		Authority: webhook.AuthorityTrust{
			CAFile:        filepath.Join(root, "webhook/testdata/authority-ca.pem"),
			PublicKeyFile: filepath.Join(root, "webhook/testdata/authority-ca.pem"),
		},
		Server: webhook.ServerConfig{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir},
		Certs:  webhook.CertConfig{Mode: webhook.CertModeExternal},
	}.Default()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
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
	// Registered after envtest.Start's cleanup, so it runs first.
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
			return env
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook server on %s not serving: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildPlugin builds cmd/kubectl-actgate into a temporary folder (with the test's own
// environment, never the tools', whose XDG_CACHE_HOME would move Go's build cache).
func buildPlugin(t *testing.T) string {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "kubectl-actgate"), "./cmd/kubectl-actgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-actgate: %v\n%s", err, out)
	}
	return dir
}

// pluginEnv is the tools' environment with the plugin folder first on PATH and KUBECONFIG set
// to kubeconfig, the way a user with their own kubeconfig runs kubectl.
func pluginEnv(env *envtest.Env, pluginDir, kubeconfig string) []string {
	var out []string
	for _, kv := range env.ToolEnv() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH":
			kv = "PATH=" + pluginDir + string(os.PathListSeparator) + v
		case "KUBECONFIG":
			kv = "KUBECONFIG=" + kubeconfig
		}
		out = append(out, kv)
	}
	return out
}

// startConsole runs `kubectl actgate console` through the real kubectl as the user of
// kubeconfig until the test ends, and returns the URL it prints.
func startConsole(t *testing.T, env *envtest.Env, pluginDir, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := env.Command(ctx, "kubectl", append([]string{"actgate", "console"}, args...)...)
	cmd.Env = pluginEnv(env, pluginDir, kubeconfig)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kubectl actgate console %v stderr:\n%s", args, stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		i := strings.LastIndex(line, ": http://")
		if !strings.HasPrefix(line, "kubectl actgate console for ") || i < 0 {
			t.Fatalf("kubectl actgate console printed %q\n%s", line, stderr.String())
		}
		return strings.TrimSpace(line[i+2:])
	case <-time.After(2 * time.Minute):
		t.Fatalf("kubectl actgate console printed no URL\n%s", stderr.String())
	}
	return ""
}

// must fails t on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
