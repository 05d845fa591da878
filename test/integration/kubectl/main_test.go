package kubectl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/test/envtest"
)

// shared is the one API server and the one plugin build the tests of this package share. Both
// start on the first test that asks, so -short runs start neither; TestMain stops the server.
var shared struct {
	once      sync.Once
	env       *envtest.Env
	pluginDir string
	err       error
}

func TestMain(m *testing.M) {
	// The harness's clients log through controller-runtime; these tests read the API server's
	// answers instead, so its logs are discarded rather than warned about after 30 s.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	if shared.pluginDir != "" {
		_ = os.RemoveAll(shared.pluginDir)
	}
	os.Exit(code)
}

// setup returns the shared control plane and the folder holding the freshly built
// kubectl-actgate, skipping t under -short.
func setup(t *testing.T) (*envtest.Env, string) {
	t.Helper()
	envtest.SkipIfShort(t)
	shared.once.Do(func() {
		if shared.pluginDir, shared.err = buildPlugin(); shared.err != nil {
			return
		}
		shared.env, shared.err = envtest.New(context.Background())
	})
	if shared.err != nil {
		t.Fatalf("setup: %v", shared.err)
	}
	return shared.env, shared.pluginDir
}

// buildPlugin builds cmd/kubectl-actgate into a new temporary folder. It runs go in the test's
// own environment: never the tools' environment, whose XDG_CACHE_HOME would move Go's build
// cache.
func buildPlugin() (string, error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "kubectl-actgate-plugin-")
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build kubectl-actgate: no go on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", filepath.Join(dir, "kubectl-actgate"), "./cmd/kubectl-actgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kubectl-actgate: %w\n%s", err, out)
	}
	return dir, nil
}

// result is what one kubectl run left behind.
type result struct {
	stdout, stderr string
	status         int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.stdout, r.stderr)
}

// kubectl runs the real kubectl with args, with KUBECONFIG set to kubeconfig and the plugin
// first on PATH; stdin is empty (not a terminal).
func kubectl(t *testing.T, env *envtest.Env, pluginDir, kubeconfig string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := env.Command(ctx, "kubectl", args...)
	cmd.Env = env.PluginEnv(pluginDir, kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.status = exit.ExitCode()
	default:
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return r
}
