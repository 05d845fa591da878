package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/node"
)

// TestUpRunsAPodAndDownLeavesTheMachineAsItWas brings the node up, runs a pod on it (a real
// sandbox, network namespace, veth on the bridge, cgroups and volume mounts), tears the node
// down, and compares the machine with how it was before: links, routes, the netfilter ruleset,
// mounts, sysctls, cgroups, files outside the run's folder and processes.
func TestUpRunsAPodAndDownLeavesTheMachineAsItWas(t *testing.T) {
	envtest.SkipIfShort(t)
	dir := t.TempDir()
	n, err := node.Up(t.Context(), node.Options{Dir: dir, Log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	// The machine as Up found it under the machine lock: a node of another run that was up
	// while this one waited for the lock is not part of it.
	before := n.Before
	downed := false
	t.Cleanup(func() {
		if !downed {
			_ = n.Down()
		}
	})
	kubectl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		out, err := n.Command(ctx, "kubectl", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	pod := `apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: sleeper
    image: ` + node.PauseImage + `
    imagePullPolicy: Never
    securityContext: {runAsNonRoot: true, runAsUser: 65532, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}
`
	f := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(f, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", f)
	kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=90s")
	ip := strings.TrimSpace(kubectl("get", "pod", "sleeper", "-o", "jsonpath={.status.podIP}"))
	if !strings.HasPrefix(ip, "10.209.0.") {
		t.Errorf("pod IP %q is not on the node's bridge network %s", ip, node.PodCIDR)
	}
	if mid := node.TakeSnapshot().Diff(before); len(mid) == 0 {
		t.Fatal("a running node changed nothing on the machine: the snapshot cannot see it")
	} else {
		t.Logf("while up, the node changed %d things", len(mid))
	}

	downed = true
	start := time.Now()
	if err := n.Down(); err != nil {
		t.Errorf("down: %v", err)
	}
	t.Logf("down took %s", time.Since(start).Round(time.Millisecond))
	if d := node.TakeSnapshot().Diff(before); len(d) > 0 {
		t.Errorf("the machine differs from before the node came up:\n%s", strings.Join(d, "\n"))
	}
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
