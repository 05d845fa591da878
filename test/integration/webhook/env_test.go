package webhook_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/webhookenv"
	"github.com/actgate/actgate/webhook"
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

// startWebhookEnv starts an API server with actgate's webhook configurations installed from
// `kubectl kustomize config/webhook` (the manifests `make manifests` generates plus the
// selector patch) and a manager serving them, with optOutNamespace as the opt-out namespace.
func startWebhookEnv(t *testing.T) *webhookenv.Env {
	t.Helper()
	return webhookenv.Start(t, func(c *webhook.Config) { c.Injection.OptOutNamespaces = []string{optOutNamespace} })
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
