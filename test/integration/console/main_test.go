package console_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/webhookenv"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// startWebhookEnv starts an API server with actgate's webhook configurations installed from
// `kubectl kustomize config/webhook` and a manager serving them (test/testutil/webhookenv, as
// test/integration/webhook runs them), so a BindingMoment resolution is admitted or denied by
// the real BindingMoment webhook.
func startWebhookEnv(t *testing.T) *envtest.Env {
	t.Helper()
	return webhookenv.Start(t, nil).Env
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

// startConsole runs `kubectl actgate console` through the real kubectl as the user of
// kubeconfig until the test ends, and returns the URL it prints.
func startConsole(t *testing.T, env *envtest.Env, pluginDir, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := env.Command(ctx, "kubectl", append([]string{"actgate", "console"}, args...)...)
	cmd.Env = env.PluginEnv(pluginDir, kubeconfig)
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
