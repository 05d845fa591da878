package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

func TestManagerUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative retention", []string{"--act-retention", "-1h"}, "USAGE --act-retention must be positive"},
		{"zero freshness", []string{"--reconcile-freshness", "0s"}, "USAGE --reconcile-freshness must be positive"},
		{"max below base", []string{"--reconcile-backoff", "1h", "--reconcile-max-backoff", "1m"}, "USAGE --reconcile-max-backoff"},
		{"missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig"}, "USAGE kubeconfig:"},
		{"extra argument", []string{"now"}, "USAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"manager"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			if code != exitUsage || !strings.HasPrefix(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}

// TestManagerRuns starts `actgate-controlplane manager` against a real API server: it serves health and
// metrics, its ToolPolicy controller reconciles, and it stops cleanly when its context ends.
func TestManagerRuns(t *testing.T) {
	env := envtest.Start(t)
	ns := env.Namespace(t)
	probe, metrics := testutil.FreeAddr(t), testutil.FreeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		root := newRootCmd(streams{in: strings.NewReader(""), out: io.Discard, err: &stderr})
		root.SetArgs([]string{"manager", "--kubeconfig", env.Kubeconfig, "--health-probe-bind-address", probe,
			"--metrics-bind-address", metrics, "--act-retention", "1h"})
		done <- root.ExecuteContext(ctx)
	}()

	waitHTTP(t, done, "http://"+probe+"/readyz", "ok")

	tp := &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: v1alpha1.ToolPolicySpec{
			Servers: []v1alpha1.ToolServer{{Name: "payments", URL: "https://payments.example/mcp"}},
			Rules:   []v1alpha1.ToolRule{{Name: "reads", Tools: []string{"get_*"}}},
		},
	}
	if err := env.Client.Create(context.Background(), tp); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := &v1alpha1.ToolPolicy{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "payments"}, got); err == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ToolPolicyReadyCondition) && got.Status.PolicyEpoch == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager did not reconcile the ToolPolicy; stderr:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitHTTP(t, done, "http://"+metrics+"/metrics", `controller_runtime_reconcile_total{controller="toolpolicy"`)
	// actgate's own series are on the same endpoint (internal/metrics).
	waitHTTP(t, done, "http://"+metrics+"/metrics", `actgate_indeterminate_outstanding{source="acts"} 0`)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop")
	}
}

// waitHTTP polls url until it answers 200 with a body containing want.
func waitHTTP(t *testing.T, done <-chan error, url, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the manager stopped: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return
			}
			last = fmt.Sprintf("%d %.200s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never answered with %q; last: %s", url, want, last)
}

// The tests of this package start the manager more than once in one process.
func init() { managerSkipNameValidation = true }
