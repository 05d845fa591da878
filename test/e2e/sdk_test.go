package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

const (
	// hostLoopNS is the namespace of the host-loop pods; hostLoopPrincipal the principal the
	// shared policy names (testdata/hostloop/policy.yaml), a user of the API server here.
	hostLoopNS        = "hostloop"
	hostLoopPrincipal = "alice"
	hostLoopPolicy    = "testdata/hostloop/policy.yaml"
	// sdkSuiteTimeout bounds each wrapper's suite.
	sdkSuiteTimeout = 15 * time.Minute
)

// hostLoopGate is one injected pod's sidecar: the ToolPolicy selecting it fronts servers.
type hostLoopGate struct {
	name    string   // the pod's gate label, the policy's and the pod's name
	servers []string // finance, or finance and finance-eu
	addr    string   // the sidecar's listen address
}

// TestSDKSuitesAgainstSidecar runs each host-loop wrapper's own suite (sdk/go, sdk/typescript,
// sdk/python) against the pod's sidecar, stood up as TestEndToEnd stands it up: the chart, the
// manager and the authority service (startControlPlane); ToolPolicies of
// testdata/hostloop/policy.yaml's rules applied with kubectl; agent Pods injected by the real
// webhook; and `actgate sidecar` run with exactly the injected container's args and
// environment. Two pods, because a host loop may omit the server only when its gate fronts one:
// "hostloop" fronts finance, "hostloop-eu" finance and finance-eu (the origin-change test).
// Each suite runs in sidecar mode (ACTGATE_TEST_GATE=sidecar, see sdk/go/sidecar_test.go), its
// upstreams listening where the policies name them, alice resolving with the real kubectl and
// `kubectl actgate resolve`; each asserts its upstream's own invocation counts. The suites run
// one after another against the same sidecars; one that fails fails this test with its output,
// and each must leave binding moments alice resolved in the API server.
func TestSDKSuitesAgainstSidecar(t *testing.T) {
	envtest.SkipIfShort(t)
	cp := startControlPlane(t, hostLoopNS, hostLoopPrincipal)
	env, c, ctx := cp.env, cp.env.Client, t.Context()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(root, hostLoopPolicy))
	if err != nil {
		t.Fatal(err)
	}

	// The upstreams' addresses: the policies' server URLs; each suite's upstream listens there.
	upstreams := map[string]string{"finance": freeAddr(t), "finance-eu": freeAddr(t)}
	gates := []*hostLoopGate{{name: "hostloop", servers: []string{"finance"}}, {name: "hostloop-eu", servers: []string{"finance", "finance-eu"}}}

	env.Kubectl(t, "label", "namespace", hostLoopNS, "actgate.io/inject=true")
	env.Kubectl(t, "-n", hostLoopNS, "create", "serviceaccount", "host-agent")
	for _, g := range gates {
		manifest := toolPolicyManifest(g, upstreams, rules)
		env.Kubectl(t, "-n", hostLoopNS, "apply", "-f", testutil.WriteFile(t, cp.work, g.name+"-policy.yaml", []byte(manifest)))
	}
	epochs := map[string]int64{}
	for _, g := range gates {
		policy := &v1alpha1.ToolPolicy{}
		testutil.Eventually(t, 30*time.Second, "ToolPolicy "+g.name+" to be Accepted with a policy epoch", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: hostLoopNS, Name: g.name}, policy); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(policy.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition)
			if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == policy.Generation && policy.Status.PolicyEpoch > 0 {
				return nil
			}
			return fmt.Errorf("%+v", policy.Status)
		})
		epochs[g.name] = policy.Status.PolicyEpoch
	}

	// One injected pod per gate, and its sidecar run as the kubelet would run the container.
	for _, g := range gates {
		pod := injectedHostPod(t, cp, g)
		var side *corev1.Container
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == "actgate-sidecar" {
				side = &pod.Spec.InitContainers[i]
			}
		}
		if side == nil {
			t.Fatalf("no actgate-sidecar init container in Pod %s: %+v", pod.Name, pod.Spec)
		}
		g.addr = freeAddr(t)
		dir := filepath.Join(cp.work, g.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		urls := make([]string, 0, len(g.servers))
		for _, s := range g.servers {
			urls = append(urls, s+"=http://"+upstreams[s]+"/mcp")
		}
		sideEnv, _ := sidecarEnv(t, env, c, pod, *side, dir, injectedWant{servers: strings.Join(g.servers, ",")}, map[string]string{
			"ACTGATE_LISTEN":               g.addr,
			"ACTGATE_AUTHORITY_URL":        "https://" + cp.authAddr,
			"ACTGATE_METRICS_BIND_ADDRESS": freeAddr(t),
		}, map[string]string{
			"ACTGATE_SINK_ID":              g.name,
			"ACTGATE_SERVER_URLS":          strings.Join(urls, ","),
			"ACTGATE_AUTHORITY_TOKEN_FILE": fallbackToken(t, env, hostLoopNS, "host-agent", pod.Name),
			"ACTGATE_JOURNAL_DIR":          filepath.Join(dir, "journal"),
		})
		p := start(t, "sidecar-"+g.name, cp.actgate, sideEnv, side.Args...)
		waitTCP(t, p, g.addr)
		testutil.Eventually(t, 30*time.Second, "sidecar "+g.name+" to hold its policy", func() error {
			if got := readyEpoch(t, g.addr); got < epochs[g.name] {
				return fmt.Errorf("epoch %d, the policy is at %d", got, epochs[g.name])
			}
			return nil
		})
	}

	// alice resolves with the real kubectl and the plugin, as her own user.
	aliceUser, err := env.AddUser(hostLoopPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	resolve, moments := principalCommands(t, env, cp.bin, aliceUser.Kubeconfig, cp.work)
	suiteEnv := append(os.Environ(),
		"ACTGATE_TEST_GATE=sidecar",
		"ACTGATE_TEST_GATE_URL=http://"+gates[0].addr,
		"ACTGATE_TEST_GATE_EU_URL=http://"+gates[1].addr,
		"ACTGATE_TEST_UPSTREAM_ADDR="+upstreams["finance"],
		"ACTGATE_TEST_UPSTREAM_EU_ADDR="+upstreams["finance-eu"],
		"ACTGATE_TEST_RESOLVE="+jsonArgv(t, resolve),
		"ACTGATE_TEST_MOMENTS="+jsonArgv(t, moments),
	)

	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	suites := []struct {
		name, dir string
		prepare   [][]string // run first when node_modules is missing
		argv      []string
	}{
		{name: "go", dir: "sdk/go", argv: []string{"go", "test", "-count=1", "-timeout", "10m", "./..."}},
		{name: "typescript", dir: "sdk/typescript", prepare: [][]string{{"npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"}},
			argv: []string{"npm", "test"}},
		{name: "python", dir: "sdk/python", argv: []string{python, "-m", "unittest", "discover", "-v"}},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			dir := filepath.Join(root, s.dir)
			before := resolvedBy(t, c, hostLoopPrincipal)
			if _, err := os.Stat(filepath.Join(dir, "node_modules")); len(s.prepare) > 0 && os.IsNotExist(err) {
				for _, argv := range s.prepare {
					runSuite(t, dir, suiteEnv, argv)
				}
			}
			started := time.Now()
			out, ok := runSuite(t, dir, suiteEnv, s.argv)
			if !ok {
				return
			}
			t.Logf("%s suite against the sidecar passed in %v; its T-F lines (overhead through the sidecar) and last lines:\n%s\n%s",
				s.name, time.Since(started).Round(time.Second), grepLines(out, "T-F"), tail(out, 12))
			if after := resolvedBy(t, c, hostLoopPrincipal); after <= before {
				t.Errorf("the %s suite passed, yet no BindingMoment in %s was resolved by %s (%d before, %d after): it did not run against the sidecar",
					s.name, hostLoopNS, hostLoopPrincipal, before, after)
			}
		})
	}
}

// toolPolicyManifest is the ToolPolicy of gate g: its pod selected by the gate label, its
// servers at the upstreams' addresses, and the shared rules file as spec.rules.
func toolPolicyManifest(g *hostLoopGate, upstreams map[string]string, rules []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: actgate.io/v1alpha1
kind: ToolPolicy
metadata:
  name: %s
spec:
  podSelector:
    matchLabels:
      actgate-test/gate: %s
  sink:
    id: %s
  servers:
`, g.name, g.name, g.name)
	for _, s := range g.servers {
		fmt.Fprintf(&b, "  - name: %s\n    url: %q\n", s, "http://"+upstreams[s]+"/mcp")
	}
	for line := range strings.Lines(string(rules)) {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			b.WriteString("  " + line)
		}
	}
	return b.String()
}

// injectedHostPod creates the host-loop agent Pod of gate g with kubectl and returns it as the
// API server stored it, after the injection webhook.
func injectedHostPod(t *testing.T, cp *controlPlane, g *hostLoopGate) *corev1.Pod {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s-0
  namespace: %s
  labels: {actgate-test/gate: %s}
spec:
  serviceAccountName: host-agent
  containers:
  - name: agent
    image: example.invalid/host-loop-agent:1
`, g.name, hostLoopNS, g.name)
	cp.env.Kubectl(t, "apply", "-f", testutil.WriteFile(t, cp.work, g.name+"-pod.yaml", []byte(manifest)))
	pod := &corev1.Pod{}
	if err := cp.env.Client.Get(t.Context(), client.ObjectKey{Namespace: hostLoopNS, Name: g.name + "-0"}, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// principalCommands writes the two commands the suites run for alice, each a script
// running the real kubectl (the plugin on its PATH, the tools' own cache folders of
// Env.ToolEnv): resolve, `kubectl actgate resolve -n NS ARGS…` as alice, which returns once the
// BindingMoment controller recorded the resolution (as TestEndToEnd waits before its retry; the
// wait reads as admin), and moments, alice's pending moments as JSON.
func principalCommands(t *testing.T, env *envtest.Env, pluginDir, kubeconfig, dir string) (resolve, moments string) {
	t.Helper()
	var exports strings.Builder
	for _, kv := range env.ToolEnv() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG":
			v = kubeconfig
		case "PATH":
			v = pluginDir + string(os.PathListSeparator) + v
		case "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "KUBECACHEDIR":
		default:
			continue
		}
		fmt.Fprintf(&exports, "export %s=%s\n", k, shQuote(v))
	}
	kubectl := shQuote(filepath.Join(env.BinDir, "kubectl"))
	ns := shQuote(hostLoopNS)
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\nset -e\n"+exports.String()+body), 0o700); err != nil {
			t.Fatal(err)
		}
		return path
	}
	resolve = write("resolve.sh", fmt.Sprintf(`%[1]s actgate resolve -n %[2]s "$@"
KUBECONFIG=%[3]s %[1]s wait -n %[2]s --for=jsonpath='{.status.state}'=Resolved --timeout=60s "bindingmoment/$1" >/dev/null
`, kubectl, ns, shQuote(env.Kubeconfig)))
	moments = write("moments.sh", fmt.Sprintf("exec %s actgate moments -n %s -o json\n", kubectl, ns))
	return resolve, moments
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func jsonArgv(t *testing.T, argv ...string) string {
	t.Helper()
	b, err := json.Marshal(argv)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runSuite runs argv in dir with env; a failure fails t with the whole output.
func runSuite(t *testing.T, dir string, env, argv []string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sdkSuiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("%s (in %s) against the sidecar: %v\n%s", strings.Join(argv, " "), dir, err, out.String())
		return out.String(), false
	}
	return out.String(), true
}

// resolvedBy counts the BindingMoments of the host-loop namespace that principal resolved.
func resolvedBy(t *testing.T, c client.Client, principal string) int {
	t.Helper()
	var list v1alpha1.BindingMomentList
	if err := c.List(t.Context(), &list, client.InNamespace(hostLoopNS)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, bm := range list.Items {
		if bm.Status.State == v1alpha1.BindingMomentResolved && bm.Status.ResolvedBy == principal {
			n++
		}
	}
	return n
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
