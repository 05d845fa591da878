package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/node"
)

const (
	releaseNS     = "actgate-system"
	agentNS       = "billing"
	upstreamNS    = "payments"
	agentSA       = "billing-agent"
	agentPod      = "agent-0"
	alice         = "alice@example.com"
	upstreamToken = "payments-mcp-credential-7f2a"
	samplePolicy  = "config/samples/actgate_v1alpha1_toolpolicy.yaml"
	paymentArgs   = `{"amount":250,"to":"ACME"}`
	// actgateRef is the name of the image built here when ACTGATE_IMAGE_TAR is not set.
	actgateRef  = "actgate.test/actgate:node"
	fixturesRef = "actgate.test/node-fixtures:1"
	// upstreamHost is the upstream's Service name, as the policy names it.
	upstreamHost = "payments-mcp.payments.svc"
	authorityDNS = "actgate-authority.actgate-system.svc"
	// dispatcherGoneGrace is the manager's --dispatcher-gone-grace here (the chart's default is
	// 30s): how long the Act of a dispatch whose pod is gone waits for a late outcome report.
	dispatcherGoneGrace = 10 * time.Second
)

// suite is what the steps share.
type suite struct {
	t     *testing.T
	n     *node.Node
	c     client.Client
	root  string
	work  string
	agent string // http://<agent pod IP>:8081
	up    string // http://<upstream pod IP>:8080
	// boundToken is the sidecar's projected token, read from the node's disk.
	boundToken string
	// plugin is the folder of kubectl-actgate; aliceConfig the principal's kubeconfig.
	plugin, aliceConfig string
	// q is the README's Kubernetes quickstart, whose commands the suite follows.
	q *quickstart
	// Where the upstream and the authority service are, for agent pods' hostAliases.
	upstreamURL, upstreamIP, authorityIP string
	// installedRef is the image the README's install ran.
	installedRef string
}

// escalateAndResolve makes the call in session, which must escalate without reaching the
// upstream and raise a BindingMoment for alice; alice resolves it with `kubectl actgate
// resolve`, choosing the option that authorises exactly this call. It returns the moment's
// name once the manager records it Resolved.
func (s *suite) escalateAndResolve(session, tool, args string) string {
	t := s.t
	t.Helper()
	before := s.counts().Counts[tool]
	res := s.call(session, tool, args)
	momentName, _ := res.Meta[mcpproxy.MetaMomentID].(string)
	if res.code() != string(ef.EFEscalationRequired) || momentName == "" {
		fatalf(t, "%s: code %q moment %q: %s", tool, res.code(), momentName, res.Text)
	}
	if c := s.counts(); c.Counts[tool] != before {
		fatalf(t, "an escalated %s reached the upstream", tool)
	}
	bm := &v1alpha1.BindingMoment{}
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: agentNS, Name: momentName}, bm); err != nil {
		fatalf(t, "BindingMoment %s: %v", momentName, err)
	}
	if bm.Spec.Principal != alice {
		fatalf(t, "BindingMoment %s is for %q, want %s", momentName, bm.Spec.Principal, alice)
	}
	option := optionFor(t, bm, tool, args)
	resolve := []string{"kubectl", "actgate", "resolve", momentName, "-n", agentNS, "--option", fmt.Sprint(option + 1)}
	if s.q.has("kubectl actgate moments") {
		// The first time, as the README says: alice lists her moments, shows this one, and
		// resolves it.
		if out, err := s.pluginCmd(s.plugin, s.aliceConfig, s.q.take("kubectl actgate moments -n " + agentNS)[1:]...); err != nil || !strings.Contains(out, momentName) {
			fatalf(t, "alice's kubectl actgate moments does not list %s: %v\n%s", momentName, err, out)
		}
		if out, err := s.pluginCmd(s.plugin, s.aliceConfig, s.q.take("kubectl actgate show bm-", strings.TrimPrefix(momentName, "bm-"))[1:]...); err != nil ||
			!containsAll(out, tool, momentName) {
			fatalf(t, "alice's kubectl actgate show %s: %v\n%s", momentName, err, out)
		}
		resolve = s.q.take("kubectl actgate resolve bm-", strings.TrimPrefix(momentName, "bm-"))
		if i := slices.Index(resolve, "--option"); i < 0 || i+1 >= len(resolve) {
			fatalf(t, "the README's resolve has no --option: %q", resolve)
		} else {
			resolve[i+1] = fmt.Sprint(option + 1) // the option that authorises exactly this call
		}
	}
	s.resolveWith(bm, resolve)
	return momentName
}

func TestNode(t *testing.T) {
	envtest.SkipIfShort(t)
	root, err := envtest.RepoRoot()
	if err != nil {
		fatal(t, err)
	}
	began := time.Now()
	approval := startApprovalProvider(t)
	n := node.Start(t, node.Options{Log: tlog{t}, AuthenticationConfig: approval.authConfig})
	t.Logf("node up in %s", time.Since(began).Round(time.Millisecond))
	s := &suite{t: t, n: n, root: root, work: t.TempDir()}
	s.c = s.client(n.Kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpState()
			t.Logf("TestNode failed; the failures, as reported above:\n%s", failureSummary())
		}
	})

	// ---- 1. Images and the chart, as README.md's Kubernetes quickstart says ---------------------
	q := readQuickstart(t, root)
	s.q = q
	q.take("make image") // ACTGATE_IMAGE_TAR is make image's tarball (make test builds it); else one is built here
	if imp := q.take("ctr -n k8s.io images import"); imp[len(imp)-1] != "bin/image/actgate.tar" {
		fatalf(t, "the README imports %s; make image writes bin/image/actgate.tar", imp[len(imp)-1])
	}
	ref := s.importImages()
	s.installedRef = ref
	repo, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	s.run(q.take("kubectl create namespace " + releaseNS))
	// The principals' RoleBindings go into the agent's namespace, so it exists first.
	s.run(q.take("kubectl create namespace " + agentNS))
	s.run(q.take("kubectl create secret generic approval-oidc", approvalSecret))
	values := s.approvalValues(approval, q.values)
	install := q.take("helm install actgate charts/actgate")
	if i := slices.Index(install, "approval-values.yaml"); i < 0 {
		fatalf(t, "the README's helm install does not use approval-values.yaml: %q", install)
	} else {
		install[i] = values
	}
	installStart := time.Now()
	// What only this node differs in: the image is imported, not pulled, and Acts of a
	// vanished pod are held sooner.
	s.run(append(install, "--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "image.pullPolicy=Never",
		"--set", "manager.dispatcherGoneGrace="+dispatcherGoneGrace.String(), "--timeout", "3m"))
	t.Logf("helm install --wait took %s", time.Since(installStart).Round(time.Millisecond))
	t.Logf("kubectl get pods -n %s:\n%s", releaseNS, s.kubectl("get", "pods", "-n", releaseNS, "-o", "wide"))
	// The suite's upstream is plain http on the node; the CA steps are for an https upstream
	// signed by a private CA (test/integration/webhook renders sidecar.upstreamCA, and
	// internal/sidecar.TestSidecarUpstreamCA verifies with it).
	q.skip("kubectl create configmap upstream-ca", "the suite's upstream is http")
	q.skip("helm upgrade actgate charts/actgate -n actgate-system --reuse-values --set sidecar.upstreamCA", "the suite's upstream is http")

	// ---- 2. The upstream, the policy, the agent ------------------------------------------------
	s.kubectl("create", "namespace", upstreamNS)
	s.kubectl("-n", upstreamNS, "create", "secret", "generic", "payments-upstream", "--from-literal=token="+upstreamToken)
	s.apply("upstream.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: payments-mcp
  namespace: %[1]s
  labels: {app: payments-mcp}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: upstream
    image: %[2]s
    imagePullPolicy: Never
    command: [/upstream]
    env:
    - name: UPSTREAM_TOKEN
      valueFrom: {secretKeyRef: {name: payments-upstream, key: token}}
    ports: [{containerPort: 8080, name: mcp}]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
    securityContext: {runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}
---
apiVersion: v1
kind: Service
metadata: {name: payments-mcp, namespace: %[1]s}
spec:
  selector: {app: payments-mcp}
  ports: [{port: 8080, targetPort: 8080}]
`, upstreamNS, fixturesRef))
	s.kubectl("-n", upstreamNS, "wait", "--for=condition=Ready", "pod/payments-mcp", "--timeout=120s")
	s.up = "http://" + s.podIP(upstreamNS, "payments-mcp") + ":8080"
	upstreamIP := s.serviceIP(upstreamNS, "payments-mcp")
	authorityIP := s.serviceIP(releaseNS, "actgate-authority")

	s.run(q.take("kubectl label namespace " + agentNS + " actgate.io/inject=true"))
	s.run(q.take("kubectl create secret generic payments-mcp", upstreamToken, "response-mac-key-of-at-least-32-bytes-4b1d"))
	// "edit first": the server URL is where the suite's upstream listens; the suite's upstream
	// has no reconciliation endpoint.
	upstreamURL := "http://" + upstreamHost + ":8080/mcp"
	apply := q.take("kubectl apply -n " + agentNS + " -f " + samplePolicy)
	apply[len(apply)-1] = s.editedSample(upstreamURL)
	s.run(apply)
	policy := &v1alpha1.ToolPolicy{}
	testutil.Eventually(t, 60*time.Second, "the ToolPolicy to be Accepted with a policy epoch", func() error {
		if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: agentNS, Name: "payments"}, policy); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(policy.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition)
		if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == policy.Generation && policy.Status.PolicyEpoch > 0 {
			return nil
		}
		return fmt.Errorf("%+v", policy.Status)
	})
	get := q.take("kubectl get toolpolicies -n " + agentNS)
	testutil.Eventually(t, 30*time.Second, "kubectl get toolpolicies to say Enforcing, as the README says", func() error {
		if out := s.run(get); !containsAll(out, "True", "Enforcing") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})

	// The agent, as the README describes it (labelled for the sample's podSelector, its MCP URL
	// in MCP_SERVER_URL), under a service account of its own.
	s.kubectl("-n", agentNS, "create", "serviceaccount", agentSA)
	s.upstreamURL, s.upstreamIP, s.authorityIP = upstreamURL, upstreamIP, authorityIP
	s.apply("agent.yaml", s.agentManifest(agentPod))
	s.kubectl("-n", agentNS, "wait", "--for=condition=Ready", "pod/"+agentPod, "--timeout=180s")
	pod := &corev1.Pod{}
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: agentNS, Name: agentPod}, pod); err != nil {
		fatal(t, err)
	}
	s.checkInjectedAndOrdered(pod)
	s.agent = "http://" + pod.Status.PodIP + ":8081"

	// ---- 3. Through the injected sidecar -------------------------------------------------------
	// The kubelet starts the agent only once the sidecar's startup probe passed: the agent's
	// first connection, at its start, reached the sidecar, and its first call is answered (no
	// retry).
	if at := s.probe("no-such-needle").AtStart; !at.SidecarListened {
		errorf(t, "the sidecar was not listening when the agent started: %s", at.DialErr)
	}
	// The hot-path read, with the credential only the sidecar holds.
	res := s.call("a", "get_balance", `{"account":"ACME"}`)
	if res.Err != "" {
		fatalf(t, "the agent's first call through the sidecar: %s", res.Err)
	}
	counts := s.counts()
	if res.IsError || counts.Counts["get_balance"] != 1 {
		fatalf(t, "get_balance: isError=%v upstream counts %v: %s", res.IsError, counts.Counts, res.Text)
	}
	if want := digest("Bearer " + upstreamToken); !slices.Contains(counts.Accepted, want) {
		fatalf(t, "the upstream accepted no request with the moved credential: %+v", counts)
	}

	// A call the policy denies (over the amount cap) never reaches the upstream.
	res = s.call("a", "send_payment", `{"amount":50000,"to":"ACME"}`)
	if !res.IsError || res.code() == "" || res.code() == string(ef.EFEscalationRequired) {
		fatalf(t, "send_payment over the cap: isError=%v code %q: %s", res.IsError, res.code(), res.Text)
	}
	if c := s.counts(); c.Counts["send_payment"] != 0 || len(c.Operations) != 1 {
		fatalf(t, "a denied call reached the upstream: %+v", c)
	}
	t.Logf("denied over the cap: %s", res.code())

	// An escalated call raises a BindingMoment for alice, nothing runs, and alice resolves it
	// with the plugin, as a user with her own kubeconfig.
	s.plugin = s.buildPlugin()
	if s.aliceConfig, err = n.UserKubeconfig(alice); err != nil {
		fatal(t, err)
	}
	// kubectl actgate doctor on the healthy pod, as the cluster admin: no check fails (the
	// authority Service has ready endpoints, the policy is Enforcing, the sidecar is ready with
	// its upstream).
	if out, err := s.pluginCmd(s.plugin, n.Kubeconfig, q.take("kubectl actgate doctor -n " + agentNS)[1:]...); err != nil ||
		!containsAll(out, "OK    authority service", "OK    sidecar ", "OK    upstream payments", "OK    toolpolicy payments") || strings.Contains(out, "FAIL") {
		errorf(t, "kubectl actgate doctor on the healthy pod: %v\n%s", err, out)
	} else {
		t.Logf("kubectl actgate doctor:\n%s", out)
	}
	momentName := s.escalateAndResolve("a", "send_payment", paymentArgs)

	// The retry of exactly that call runs once.
	res = s.call("a", "send_payment", paymentArgs)
	if c := s.counts(); res.IsError || res.Replayed || c.Counts["send_payment"] != 1 || !strings.Contains(res.Text, "paid: ") {
		fatalf(t, "granted retry: isError=%v replayed=%v code %q upstream %v: %s", res.IsError, res.Replayed, res.code(), c.Counts, res.Text)
	}
	granted := res
	// A replay never runs again: in the same session it is answered from the journal (the
	// upstream's recorded result, the agent's model reading what it read the first time, the
	// gate's Actgate-Replayed header saying so), from a new session it needs a new binding
	// moment. The first answer may end with the resolution's delivery, which is not repeated.
	res = s.call("a", "send_payment", paymentArgs)
	if res.IsError || !res.Replayed || !strings.HasPrefix(granted.Text, res.Text) || res.code() != "" || s.counts().Counts["send_payment"] != 1 {
		fatalf(t, "same-session replay: isError=%v replayed=%v upstream %v: %q (first %q)", res.IsError, res.Replayed, s.counts().Counts, res.Text, granted.Text)
	}
	res = s.call("b", "send_payment", paymentArgs)
	if again, _ := res.Meta[mcpproxy.MetaMomentID].(string); !res.IsError || res.code() != string(ef.EFEscalationRequired) || again == momentName || s.counts().Counts["send_payment"] != 1 {
		fatalf(t, "replay from another session: isError=%v code %q moment %q (first %q) upstream %v", res.IsError, res.code(), again, momentName, s.counts().Counts)
	}

	// An agent-authored binding moment in the pod: tools/list carries the virtual tool, the
	// agent proposes two payments, alice chooses the second with kubectl actgate resolve, and
	// exactly that call runs, once.
	s.agentAuthoredMoment("a")

	// A policy change reaches the running sidecar: once the reads rule no longer covers get_*,
	// the read the pod decided alone a moment ago is refused there and never reaches the
	// upstream; put back, it is allowed again.
	s.policyChangeReachesSidecar("a")

	// The approval service the chart installed: alice signs in at the OpenID provider the API
	// server trusts and resolves a payment's moment there, as herself; the call runs once.
	s.resolveThroughApproval(approval, "c")

	// The agent container holds the credential nowhere, and the upstream refuses it without.
	pr := s.probe(upstreamToken)
	if len(pr.InEnv) > 0 || len(pr.InFiles) > 0 {
		errorf(t, "the agent container can read the credential: env %v files %v", pr.InEnv, pr.InFiles)
	}
	if slices.Contains(pr.EnvNames, "PAYMENTS_TOKEN") {
		errorf(t, "the agent container still has PAYMENTS_TOKEN")
	}
	for _, m := range pr.Mounts {
		if strings.HasPrefix(m, "/var/run/actgate") || strings.HasPrefix(m, "/var/run/secrets/actgate.io") {
			errorf(t, "the agent container mounts %s", m)
		}
	}
	for _, p := range pr.Processes {
		if strings.Contains(p, "sidecar") {
			errorf(t, "the agent container sees the sidecar's process: %s", p)
		}
	}
	t.Logf("agent probe: %d env vars, %d unreadable paths, processes %v", len(pr.EnvNames), pr.Unreadable, pr.Processes)
	// Nor can a pod's author get the credential or the sidecar's volumes into a container of
	// its own by naming things like the injector: the API server refuses such pods.
	s.authorAttacks(upstreamURL, upstreamIP, authorityIP)
	refusedBefore, paidBefore := len(s.counts().Refused), s.counts().Counts["send_payment"]
	direct := s.direct(upstreamURL, "send_payment", paymentArgs)
	if direct.Err == "" || s.counts().Counts["send_payment"] != paidBefore || len(s.counts().Refused) <= refusedBefore {
		errorf(t, "the agent reached the upstream directly: %+v, upstream %+v", direct, s.counts())
	}

	// kubectl shows it all.
	if out := s.run(q.take("kubectl get acts -n " + agentNS)); !containsAll(strings.SplitN(out, "\n", 2)[0], "TOOL", "CLASS", "DECISION", "OUTCOME", "CODE") {
		errorf(t, "kubectl get acts has not the columns the README names:\n%s", out)
	}
	q.skip("kubectl actgate console", "it serves until interrupted; test/e2e drives the console in Chromium")
	acts := s.kubectl("-n", agentNS, "get", "acts", "-o", "wide")
	t.Logf("kubectl get acts -o wide:\n%s", acts)
	// The hot-path reads were decided in the pod and recorded no Act; the protected calls did,
	// and so did the reads the changed policy refused.
	if slices.ContainsFunc(strings.Split(acts, "\n"), func(line string) bool { return containsAll(line, "get_balance", "Allowed") }) {
		errorf(t, "a hot-path read created an Act:\n%s", acts)
	}
	for _, want := range [][]string{
		{"get_balance", "Denied", "EF_UNKNOWN_TOOL"},
		{"send_payment", "FINANCIAL", "Denied", "EF_POLICY_DENIED"},
		{"send_payment", "FINANCIAL", "Escalated", "EF_ESCALATION_REQUIRED"},
		{"send_payment", "FINANCIAL", "Allowed", "EXECUTED"},
	} {
		if !slices.ContainsFunc(strings.Split(acts, "\n"), func(line string) bool { return containsAll(line, want...) }) {
			errorf(t, "kubectl get acts has no line with %q", want)
		}
	}
	t.Logf("kubectl get bindingmoments:\n%s", s.kubectl("-n", agentNS, "get", "bindingmoments"))

	procs, shims, pods := n.Memory()
	t.Logf("memory: node processes %d MiB, containerd shims %d MiB, pods %d MiB", procs>>20, shims>>20, pods>>20)

	// ---- 4. What only a real pod shows -------------------------------------------------------
	s.checkBoundToken(pod)
	s.killSidecarMidDispatch(pod)
	s.deletePodStopsSidecarLast(pod)

	// ---- 5. Upgrade and uninstall, as docs/operations.md says ---------------------------------
	q.done()
	s.upgrade()
	s.uninstall()
	t.Logf("suite took %s", time.Since(began).Round(time.Millisecond))
}

// agentManifest is the agent pod named name: the fixture's agent program, labelled for the
// sample policy, reading its MCP URL from MCP_SERVER_URL and its credential from the Secret the
// policy names (the injector moves both to the sidecar).
func (s *suite) agentManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app.kubernetes.io/name: billing-agent}
spec:
  serviceAccountName: %[3]s
  terminationGracePeriodSeconds: 5
  hostAliases:
  - {ip: %[4]q, hostnames: [%[5]q]}
  - {ip: %[6]q, hostnames: [%[7]q]}
  containers:
  - name: agent
    image: %[8]s
    imagePullPolicy: Never
    command: [/agent]
    env:
    - {name: MCP_SERVER_URL, value: %[9]q}
    - name: PAYMENTS_TOKEN
      valueFrom: {secretKeyRef: {name: payments-mcp, key: token}}
    ports: [{containerPort: 8081, name: control}]
    readinessProbe: {tcpSocket: {port: 8081}, periodSeconds: 1}
    securityContext: {runAsNonRoot: true, runAsUser: 1000, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}
`, name, agentNS, agentSA, s.upstreamIP, upstreamHost, s.authorityIP, authorityDNS, fixturesRef, s.upstreamURL)
}

// agentAuthoredMoment proposes a moment of two payments in session, has alice choose the
// second with the plugin, and checks that only the chosen call runs, once.
func (s *suite) agentAuthoredMoment(session string) {
	t := s.t
	t.Helper()
	proposal := `{"synopsis":"Two invoices from ACME are due; the agent asks which payment may run.",` +
		`"stem":"Which payment may run?","recommended":1,"options":[` +
		`{"label":"Pay both invoices","tool":"send_payment","server":"payments","args":{"amount":60,"to":"ACME"},"reasoning":"Settles both."},` +
		`{"label":"Pay the first invoice","tool":"send_payment","server":"payments","args":{"amount":30,"to":"ACME"},"reasoning":"Settles the older one."}]}`
	before := s.counts().Counts["send_payment"]
	res := s.call(session, sink.RequestBindingMomentTool, proposal)
	proposed, _ := res.Meta[mcpproxy.MetaMomentID].(string)
	if res.Err != "" || res.IsError || proposed == "" {
		fatalf(t, "request_binding_moment in the pod: %s code %q: %s", res.Err, res.code(), res.Text)
	}
	bm := &v1alpha1.BindingMoment{}
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: agentNS, Name: proposed}, bm); err != nil || bm.Spec.Principal != alice {
		fatalf(t, "the proposed BindingMoment %s: %+v %v", proposed, bm.Spec, err)
	}
	s.resolveWith(bm, []string{"kubectl", "actgate", "resolve", proposed, "-n", agentNS, "--option", "2"})
	if res := s.call(session, "send_payment", `{"amount":60,"to":"ACME"}`); !res.IsError || s.counts().Counts["send_payment"] != before {
		fatalf(t, "the option alice did not choose ran: code %q upstream %v: %s", res.code(), s.counts().Counts, res.Text)
	}
	if res := s.call(session, "send_payment", `{"amount":30,"to":"ACME"}`); res.IsError || s.counts().Counts["send_payment"] != before+1 {
		fatalf(t, "the option alice chose: code %q upstream %v: %s", res.code(), s.counts().Counts, res.Text)
	}
	if res := s.call(session, "send_payment", `{"amount":30,"to":"ACME"}`); s.counts().Counts["send_payment"] != before+1 {
		fatalf(t, "the chosen option ran twice: code %q: %s", res.code(), res.Text)
	}
	t.Logf("agent-authored moment %s: option 2 ran once, option 1 never", proposed)
}

// policyChangeReachesSidecar patches the policy's reads rule so that get_* is no longer
// covered, measures how long the running sidecar takes to refuse get_balance as the new policy
// does (EF_UNKNOWN_TOOL; until the manager accepts the new generation the pod holds no current
// policy and refuses with EF_POLICY_UNAVAILABLE), checks the refused call never reached the
// upstream, and puts the rule back (measured the same way).
func (s *suite) policyChangeReachesSidecar(session string) {
	t := s.t
	t.Helper()
	change := func(tools string, enforced func(callResult) bool) {
		t.Helper()
		changed := time.Now()
		s.kubectl("-n", agentNS, "patch", "toolpolicy", "payments", "--type=json",
			"-p", `[{"op":"replace","path":"/spec/rules/0/tools","value":`+tools+`}]`)
		seen := map[string]int{}
		testutil.Eventually(t, 60*time.Second, "the running sidecar to enforce rules[0].tools="+tools, func() error {
			res := s.call(session, "get_balance", `{"account":"ACME"}`)
			seen[fmt.Sprintf("isError=%v code=%q", res.IsError, res.code())]++
			if res.Err != "" || !enforced(res) {
				return fmt.Errorf("get_balance: err %q isError=%v code %q", res.Err, res.IsError, res.code())
			}
			return nil
		})
		t.Logf("policy change (kubectl patch rules[0].tools=%s) to its enforcement by the running sidecar in the pod: %v (answers meanwhile: %v)",
			tools, time.Since(changed).Round(time.Millisecond), seen)
	}
	change(`["search*"]`, func(r callResult) bool { return r.IsError && r.code() == string(ef.EFUnknownTool) })
	before := s.counts().Counts["get_balance"]
	if res := s.call(session, "get_balance", `{"account":"ACME"}`); !res.IsError || s.counts().Counts["get_balance"] != before {
		fatalf(t, "get_balance under the changed policy: code %q (upstream %d → %d)", res.code(), before, s.counts().Counts["get_balance"])
	}
	change(`["get_*","search*"]`, func(r callResult) bool { return !r.IsError })
}

// importImages imports the actgate image (ACTGATE_IMAGE_TAR, or one built here) and the
// fixture image, and returns the actgate image's name.
func (s *suite) importImages() string {
	t := s.t
	ctx := t.Context()
	dir := filepath.Join(s.work, "images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fatal(t, err)
	}
	tarball, ref := os.Getenv("ACTGATE_IMAGE_TAR"), ""
	if tarball != "" {
		if !filepath.IsAbs(tarball) {
			tarball = filepath.Join(s.root, tarball)
		}
		var err error
		if ref, err = node.ImageRef(tarball); err != nil {
			fatal(t, err)
		}
	} else {
		tarball, ref = filepath.Join(dir, "actgate.tar"), actgateRef
		start := time.Now()
		if err := node.BuildGoImage(ctx, dir, tarball, ref, []node.GoBinary{
			{Package: "./cmd/actgate", Path: "/usr/local/bin/actgate"},
			{Package: "./cmd/actgate-controlplane", Path: "/usr/local/bin/actgate-controlplane"},
		}, node.ImageConfig{Entrypoint: []string{"/usr/local/bin/actgate"}}); err != nil {
			fatal(t, err)
		}
		t.Logf("built %s in %s (ACTGATE_IMAGE_TAR not set)", ref, time.Since(start).Round(time.Millisecond))
	}
	fixtures := filepath.Join(dir, "fixtures.tar")
	if err := node.BuildGoImage(ctx, dir, fixtures, fixturesRef, []node.GoBinary{
		{Package: "./test/node/agent", Path: "/agent"},
		{Package: "./test/node/upstream", Path: "/upstream"},
	}, node.ImageConfig{}); err != nil {
		fatal(t, err)
	}
	for _, tb := range []string{tarball, fixtures} {
		if out, err := s.n.ImportImage(ctx, tb); err != nil {
			fatalf(t, "import %s: %v\n%s", tb, err, out)
		}
	}
	t.Logf("imported %s and %s", ref, fixturesRef)
	return ref
}

// checkInjectedAndOrdered: the sidecar is injected as a native sidecar, the credential left the
// agent container, and the kubelet started the sidecar before the agent.
func (s *suite) checkInjectedAndOrdered(pod *corev1.Pod) {
	t := s.t
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "actgate-sidecar" })
	if i < 0 {
		fatalf(t, "no actgate-sidecar init container: %+v", pod.Spec.InitContainers)
	}
	if rp := pod.Spec.InitContainers[i].RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
		errorf(t, "the sidecar is not a native sidecar: restartPolicy %v", rp)
	}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "payments-mcp" {
				errorf(t, "container %s still reads the credential Secret (%s)", c.Name, e.Name)
			}
		}
	}
	// The kubelet's status has second resolution; the runtime's record of each container has
	// nanoseconds.
	side, agent := s.container(pod, "actgate-sidecar"), s.container(pod, "agent")
	if side.StartedAt.IsZero() || agent.StartedAt.IsZero() || !agent.StartedAt.After(side.StartedAt) {
		errorf(t, "the sidecar started at %v, the agent at %v: the sidecar must start first", side.StartedAt, agent.StartedAt)
	}
	t.Logf("sidecar started %s, agent %s later", side.StartedAt.Format(time.RFC3339Nano), agent.StartedAt.Sub(side.StartedAt))
}

// runtimeContainer is what crictl inspect says of a container.
type runtimeContainer struct {
	ID                    string
	PID                   int
	State                 string
	StartedAt, FinishedAt time.Time
}

// containerID is the runtime id of the named (init or app) container of pod, from its status.
func containerID(pod *corev1.Pod, name string) string {
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if st.Name == name {
			return strings.TrimPrefix(st.ContainerID, "containerd://")
		}
	}
	return ""
}

func (s *suite) container(pod *corev1.Pod, name string) runtimeContainer {
	s.t.Helper()
	id := containerID(pod, name)
	if id == "" {
		fatalf(s.t, "pod %s has no container id for %s: %+v", pod.Name, name, pod.Status)
	}
	c, err := s.inspect(id)
	if err != nil {
		fatal(s.t, err)
	}
	return c
}

func (s *suite) inspect(id string) (runtimeContainer, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	out, err := s.n.Command(ctx, "crictl", "inspect", id).Output()
	if err != nil {
		return runtimeContainer{}, fmt.Errorf("crictl inspect %s: %w", id, err)
	}
	var v struct {
		Status struct {
			State      string `json:"state"`
			StartedAt  string `json:"startedAt"`
			FinishedAt string `json:"finishedAt"`
		} `json:"status"`
		Info struct {
			PID int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return runtimeContainer{}, fmt.Errorf("crictl inspect %s: %w", id, err)
	}
	c := runtimeContainer{ID: id, PID: v.Info.PID, State: v.Status.State}
	c.StartedAt, _ = time.Parse(time.RFC3339Nano, v.Status.StartedAt)
	c.FinishedAt, _ = time.Parse(time.RFC3339Nano, v.Status.FinishedAt)
	return c, nil
}

type callResult struct {
	IsError  bool           `json:"isError"`
	Text     string         `json:"text"`
	Meta     map[string]any `json:"meta"`
	Err      string         `json:"err"`
	Replayed bool           `json:"replayed"`
}

func (r callResult) code() string { s, _ := r.Meta[mcpproxy.MetaEFCode].(string); return s }

// call makes the agent call tool through the sidecar in its MCP session named session.
func (s *suite) call(session, tool, args string) callResult {
	var r callResult
	s.postJSON(s.agent+"/call", map[string]any{"session": session, "tool": tool, "args": json.RawMessage(args)}, &r)
	return r
}

// direct makes the agent call url itself, bypassing the sidecar.
func (s *suite) direct(url, tool, args string) callResult {
	var r callResult
	s.postJSON(s.agent+"/direct", map[string]any{"url": url, "tool": tool, "args": json.RawMessage(args)}, &r)
	return r
}

type probeResult struct {
	EnvNames   []string `json:"envNames"`
	InEnv      []string `json:"inEnv"`
	InFiles    []string `json:"inFiles"`
	Unreadable int      `json:"unreadable"`
	Processes  []string `json:"processes"`
	Mounts     []string `json:"mounts"`
	AtStart    struct {
		SidecarListened bool   `json:"sidecarListened"`
		DialErr         string `json:"dialErr"`
	} `json:"atStart"`
}

func (s *suite) probe(needle string) probeResult {
	var r probeResult
	s.postJSON(s.agent+"/probe", map[string]string{"needle": needle}, &r)
	return r
}

type upstreamCounts struct {
	Counts     map[string]int `json:"counts"`
	Operations []string       `json:"operations"`
	Accepted   []string       `json:"accepted"`
	Refused    []string       `json:"refused"`
}

// counts reads the upstream's own counters.
func (s *suite) counts() upstreamCounts {
	s.t.Helper()
	resp, err := http.Get(s.up + "/counts")
	if err != nil {
		fatal(s.t, err)
	}
	defer resp.Body.Close()
	var c upstreamCounts
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		fatal(s.t, err)
	}
	return c
}

func (s *suite) postJSON(url string, body, out any) {
	s.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		fatal(s.t, err)
	}
	hc := &http.Client{Timeout: 90 * time.Second}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		fatalf(s.t, "POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		fatalf(s.t, "POST %s: %s: %s", url, resp.Status, rb)
	}
	if err := json.Unmarshal(rb, out); err != nil {
		fatalf(s.t, "POST %s: %v: %s", url, err, rb)
	}
}

func (s *suite) client(kubeconfig string) client.Client {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fatal(s.t, err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			fatal(s.t, err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fatal(s.t, err)
	}
	return c
}

func (s *suite) tool(name string, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 6*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := s.n.Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		fatalf(s.t, "%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func (s *suite) kubectl(args ...string) string { s.t.Helper(); return s.tool("kubectl", args...) }
func (s *suite) helm(args ...string) string    { s.t.Helper(); return s.tool("helm", args...) }

func (s *suite) apply(name, manifest string) {
	s.t.Helper()
	s.kubectl("apply", "-f", testutil.WriteFile(s.t, s.work, name, []byte(manifest)))
}

func (s *suite) podIP(ns, name string) string {
	s.t.Helper()
	ip := strings.TrimSpace(s.kubectl("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.podIP}"))
	if ip == "" {
		fatalf(s.t, "pod %s/%s has no IP", ns, name)
	}
	return ip
}

func (s *suite) serviceIP(ns, name string) string {
	s.t.Helper()
	ip := strings.TrimSpace(s.kubectl("-n", ns, "get", "service", name, "-o", "jsonpath={.spec.clusterIP}"))
	if ip == "" {
		fatalf(s.t, "service %s/%s has no ClusterIP", ns, name)
	}
	return ip
}

// buildPlugin builds kubectl-actgate into a folder for PATH with the README's command, ~/bin
// being a folder of the suite's.
func (s *suite) buildPlugin() string {
	dir := filepath.Join(s.work, "plugin")
	build := s.q.take("go build -o ~/bin/kubectl-actgate")
	for i, f := range build {
		build[i] = strings.Replace(f, "~/bin", dir, 1)
	}
	cmd := exec.Command(build[0], build[1:]...)
	cmd.Dir = s.root
	if out, err := cmd.CombinedOutput(); err != nil {
		fatalf(s.t, "%s: %v\n%s", strings.Join(build, " "), err, out)
	}
	return dir
}

// run runs a command of the README (kubectl or helm, on the node) and returns its output.
func (s *suite) run(fields []string) string {
	s.t.Helper()
	return s.tool(fields[0], fields[1:]...)
}

// pluginCmd runs kubectl with the plugin folder first in PATH and kubeconfig as KUBECONFIG.
func (s *suite) pluginCmd(pluginDir, kubeconfig string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	cmd := s.n.Command(ctx, "kubectl", args...)
	for i, kv := range cmd.Env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			cmd.Env[i] = "PATH=" + pluginDir + ":" + strings.TrimPrefix(kv, "PATH=")
		case strings.HasPrefix(kv, "KUBECONFIG="):
			cmd.Env[i] = "KUBECONFIG=" + kubeconfig
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dumpState logs what a failure needs: pods, events, and the logs of actgate's containers.
func (s *suite) dumpState() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(args ...string) string {
		out, _ := s.n.Command(ctx, "kubectl", args...).CombinedOutput()
		return string(out)
	}
	s.t.Logf("pods:\n%s", run("get", "pods", "-A", "-o", "wide"))
	s.t.Logf("events:\n%s", run("get", "events", "-A", "--sort-by=.lastTimestamp"))
	for _, l := range [][]string{
		{"-n", releaseNS, "logs", "deploy/actgate-manager", "--tail=40"},
		{"-n", releaseNS, "logs", "deploy/actgate-authority", "--tail=40"},
		{"-n", agentNS, "logs", agentPod, "-c", "actgate-sidecar", "--tail=60"},
		{"-n", agentNS, "logs", agentPod, "-c", "agent", "--tail=20"},
	} {
		s.t.Logf("kubectl %s:\n%s", strings.Join(l, " "), run(l...))
	}
}

// optionFor returns the index of the moment's option whose action digest is exactly tool with
// args (envelope-04 §5.6).
func optionFor(t *testing.T, bm *v1alpha1.BindingMoment, tool, args string) int {
	t.Helper()
	env, err := envelope.Parse([]byte(bm.Spec.Envelope))
	if err != nil {
		fatalf(t, "BindingMoment envelope: %v", err)
	}
	want, err := action.Digest(tool, json.RawMessage(args), jcs.Strict)
	if err != nil {
		fatal(t, err)
	}
	for i := 0; i < env.NumOptions(); i++ {
		if o, _ := env.Option(i); o.ActionDigest == want {
			return i
		}
	}
	fatalf(t, "no option of %s authorises %s %s", bm.Name, tool, args)
	return -1
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
