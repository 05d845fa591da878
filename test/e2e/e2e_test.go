package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
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

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/rig"
	"github.com/actgate/actgate/webhook/inject"
)

const (
	releaseNS     = "actgate-system"
	agentNS       = "billing"
	agentSA       = "billing-agent"
	agentPod      = "agent-0"
	alice         = "alice@example.com"
	bob           = "bob@example.com" // a principal of the namespace, but not the one the policy names
	upstreamToken = "payments-mcp-credential-3c1e"
	samplePolicy  = "config/samples/actgate_v1alpha1_toolpolicy.yaml"
	paymentArgs   = `{"amount":250,"to":"ACME"}`
)

// sa is the user name of a service account, and the groups the API server gives it.
func sa(ns, name string) (string, []string) {
	return "system:serviceaccount:" + ns + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

func TestMain(m *testing.M) {
	// envtest's controller-runtime logging is not this test's concern.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func TestEndToEnd(t *testing.T) {
	envtest.SkipIfShort(t)
	cp := startControlPlane(t, agentNS, alice, bob)
	env, c, ctx, pki, work := cp.env, cp.env.Client, t.Context(), cp.pki, cp.work
	bin, actgate, signPub, authAddr, authorityProc := cp.bin, cp.actgate, cp.signPub, cp.authAddr, cp.authority
	checkChartArgs(t, c, actgate, work)

	// ---- 2. The policy, and an agent Pod injected -----------------------------------------------
	t.Log("step 2: kubectl apply the sample ToolPolicy; an agent Pod gets the sidecar")
	up, err := mcptest.Start([]mcptest.Tool{
		{Name: "get_balance", Description: "Reads a balance.", Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text(`{"balance":"1200.00"}`), nil
		}},
		{Name: "send_payment", Description: "Sends money.", Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text("paid: " + string(args)), nil
		}},
	}, mcptest.Options{Name: "payments-mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })

	env.Kubectl(t, "label", "namespace", agentNS, "actgate.io/inject=true")
	env.Kubectl(t, "-n", agentNS, "create", "secret", "generic", "payments-mcp", "--from-literal=token="+upstreamToken)
	env.Kubectl(t, "-n", agentNS, "create", "serviceaccount", agentSA)
	env.Kubectl(t, "-n", agentNS, "apply", "-f", samplePolicy)
	// The sample names the in-cluster payments server; here the server is a local process, so
	// the policy's server URL is pointed at it (the URL every authority is bound to).
	env.Kubectl(t, "-n", agentNS, "patch", "toolpolicy", "payments", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/servers/0/url","value":"`+up.URL+`"}]`)
	policy := &v1alpha1.ToolPolicy{}
	testutil.Eventually(t, 30*time.Second, "the ToolPolicy to be Accepted with a policy epoch", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "payments"}, policy); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(policy.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition)
		if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == policy.Generation && policy.Status.PolicyEpoch > 0 {
			return nil
		}
		return fmt.Errorf("%+v", policy.Status)
	})
	sinkID := policy.Spec.Sink.ID

	podManifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels: {app.kubernetes.io/name: billing-agent}
spec:
  serviceAccountName: %s
  containers:
  - name: agent
    image: example.invalid/billing-agent:1
    env:
    - {name: MCP_SERVER_URL, value: %q}
    - name: PAYMENTS_TOKEN
      valueFrom: {secretKeyRef: {name: payments-mcp, key: token}}
`, agentPod, agentNS, agentSA, up.URL)
	env.Kubectl(t, "apply", "-f", testutil.WriteFile(t, work, "pod.yaml", []byte(podManifest)))
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: agentPod}, pod); err != nil {
		t.Fatal(err)
	}
	side := checkInjected(t, pod)

	// ---- 3. The sidecar, a real MCP server and client -------------------------------------------
	t.Log("step 3: the sidecar with the injected environment; a real MCP client through it")
	sideAddr, metricsAddr := freeAddr(t), freeAddr(t)
	// The injection makes the sidecar scrapeable (webhook/inject "Metrics"); the binary must accept
	// its setting, served here on a free loopback address instead of :9788.
	if i := slices.IndexFunc(side.Env, func(e corev1.EnvVar) bool { return e.Name == "ACTGATE_METRICS_BIND_ADDRESS" }); i < 0 || side.Env[i].Value != ":9788" ||
		!slices.ContainsFunc(side.Ports, func(p corev1.ContainerPort) bool { return p.Name == "actgate-metrics" && p.ContainerPort == 9788 }) ||
		pod.Annotations["prometheus.io/scrape"] != "true" || pod.Annotations["prometheus.io/port"] != "9788" {
		t.Errorf("the injected sidecar is not scrapeable on :9788: env %+v, ports %+v, annotations %v", side.Env, side.Ports, pod.Annotations)
	}
	sideEnv, sideVars := sidecarEnv(t, env, c, pod, side, work, injectedWant{servers: "payments", credentials: []string{"payments"}}, map[string]string{
		"ACTGATE_LISTEN":               sideAddr,
		"ACTGATE_AUTHORITY_URL":        "https://" + authAddr,
		"ACTGATE_METRICS_BIND_ADDRESS": metricsAddr,
	}, map[string]string{
		"ACTGATE_SINK_ID":              sinkID,
		"ACTGATE_SERVER_URLS":          "payments=" + up.URL,
		"ACTGATE_AUTHORITY_TOKEN_FILE": fallbackToken(t, env, agentNS, agentSA, agentPod),
		"ACTGATE_JOURNAL_DIR":          filepath.Join(work, "journal"),
	})
	journalDir := sideVars["ACTGATE_JOURNAL_DIR"]
	tokenBytes, err := os.ReadFile(sideVars["ACTGATE_AUTHORITY_TOKEN_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	sidecarProc := start(t, "sidecar", actgate, sideEnv, side.Args...)
	waitTCP(t, sidecarProc, sideAddr)

	replays := &rig.Replays{} // the answers marked a journal replay (mcpproxy.HeaderReplayed)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "billing-agent", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + sideAddr + mcpproxy.Path("payments"), HTTPClient: &http.Client{Transport: replays}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("MCP client through the sidecar: %v\n%s", err, sidecarProc.output())
	}
	defer cs.Close()

	// An INFORMATIONAL call passes, with the credential only the sidecar holds.
	res := callTool(t, cs, "get_balance", `{"account":"ACME"}`)
	if res.IsError || up.Count("get_balance") != 1 {
		t.Fatalf("get_balance: isError=%v upstream count %d: %s", res.IsError, up.Count("get_balance"), text(res))
	}
	if auth := up.Authorizations(); len(auth) == 0 || auth[len(auth)-1] != "Bearer "+upstreamToken {
		t.Fatalf("the upstream saw authorization %q, want the moved credential", auth)
	}
	if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err != nil {
		t.Errorf("the sidecar's metrics endpoint: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), metrics.NameDecisions) {
			t.Errorf("GET /metrics on the sidecar: %s, no %s in:\n%.2000s", resp.Status, metrics.NameDecisions, body)
		}
	}

	// The injected startup and readiness probes, run against this sidecar (the exec command of
	// the container spec, with the test's binary and listen address): both pass once it holds
	// the pod's policy. Then a ToolPolicy change reaches the running sidecar: its /readyz names
	// the new epoch.
	checkProbes(t, side, actgate, sideAddr, sideEnv)
	epoch := policy.Status.PolicyEpoch
	if got := readyEpoch(t, sideAddr); got != epoch {
		t.Fatalf("the sidecar holds epoch %d, the policy is at %d", got, epoch)
	}
	changed := time.Now()
	env.Kubectl(t, "-n", agentNS, "patch", "toolpolicy", "payments", "--type=merge", "-p", `{"spec":{"authorityTTL":"4m"}}`)
	testutil.Eventually(t, 30*time.Second, "the running sidecar to hold the changed policy", func() error {
		if got := readyEpoch(t, sideAddr); got <= epoch {
			return fmt.Errorf("epoch %d", got)
		}
		return nil
	})
	t.Logf("policy change (kubectl patch) to the running sidecar's new epoch, through the manager's acceptance: %v", time.Since(changed).Round(time.Millisecond))

	// A FINANCIAL call escalates; a BindingMoment for alice appears; nothing runs.
	res = callTool(t, cs, "send_payment", paymentArgs)
	momentName, _ := res.Meta[mcpproxy.MetaMomentID].(string)
	if efCode(res) != string(ef.EFEscalationRequired) || momentName == "" {
		t.Fatalf("send_payment: code %q moment %q: %s", efCode(res), momentName, text(res))
	}
	if up.Count("send_payment") != 0 {
		t.Fatal("an escalated call reached the upstream")
	}
	// The text the agent relays to its principal names the command of this deployment.
	if want := "kubectl actgate resolve " + momentName + " -n " + agentNS; !strings.Contains(text(res), want) || strings.Contains(text(res), "(actgate resolve") {
		t.Fatalf("the escalation text does not tell the principal %q:\n%s", want, text(res))
	}
	bm := &v1alpha1.BindingMoment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: momentName}, bm); err != nil {
		t.Fatalf("BindingMoment %s: %v", momentName, err)
	}
	if bm.Spec.Principal != alice {
		t.Fatalf("BindingMoment %s is for %q, want %s", momentName, bm.Spec.Principal, alice)
	}
	if out := env.Kubectl(t, "-n", agentNS, "get", "bindingmoments"); !strings.Contains(out, momentName) || !strings.Contains(out, alice) {
		t.Fatalf("kubectl get bindingmoments:\n%s", out)
	}
	option := optionFor(t, bm, "send_payment", paymentArgs)

	// The agent's own identity cannot resolve its escalation; nor can another principal.
	plugin := []string{bin}
	agentName, agentGroups := sa(agentNS, agentSA)
	agentUser, err := env.AddUser(agentName, agentGroups...)
	if err != nil {
		t.Fatal(err)
	}
	bobUser, err := env.AddUser(bob)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []*envtest.User{agentUser, bobUser} {
		stdout, stderr, err := tool(t, env, plugin, u.Kubeconfig, "kubectl", "actgate", "resolve", momentName, "-n", agentNS, "--option", fmt.Sprint(option+1))
		if err == nil {
			t.Fatalf("%s resolved %s:\n%s%s", u.Name, momentName, stdout, stderr)
		}
		t.Logf("%s refused, as it must be: %s", u.Name, strings.TrimSpace(stderr))
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bm), bm); err != nil || bm.Spec.Resolution != nil {
		t.Fatalf("the moment carries a resolution nobody entitled wrote: %+v %v", bm.Spec.Resolution, err)
	}
	// Before the principal decides, the same call is still pending and still does not run.
	if res := callTool(t, cs, "send_payment", paymentArgs); efCode(res) != string(ef.EFEscalationRequired) || up.Count("send_payment") != 0 {
		t.Fatalf("unresolved retry: code %q, upstream %d", efCode(res), up.Count("send_payment"))
	}

	// The principal resolves it with the plugin.
	aliceUser, err := env.AddUser(alice)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := tool(t, env, plugin, aliceUser.Kubeconfig, "kubectl", "actgate", "resolve", momentName, "-n", agentNS, "--option", fmt.Sprint(option+1))
	if err != nil {
		t.Fatalf("alice's kubectl actgate resolve: %v\n%s%s", err, stdout, stderr)
	}
	testutil.Eventually(t, 30*time.Second, "the BindingMoment to be recorded Resolved by alice", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bm), bm); err != nil {
			return err
		}
		if bm.Status.State == v1alpha1.BindingMomentResolved && bm.Status.ResolvedBy == alice {
			return nil
		}
		return fmt.Errorf("%+v", bm.Status)
	})

	// The retry of exactly that call runs once.
	res = callTool(t, cs, "send_payment", paymentArgs)
	if res.IsError || up.Count("send_payment") != 1 || !strings.Contains(text(res), "paid: ") {
		t.Fatalf("granted retry: isError=%v upstream count %d: %s\n%s", res.IsError, up.Count("send_payment"), text(res), authorityProc.output())
	}
	grantedRes, marked := res, replays.Count()
	calls := up.Calls()
	opID := calls[len(calls)-1].OperationID
	// The sidecar's outbox reports the outcome it journaled (operation Report) until the
	// service acknowledges it, so the Act moves from CONSUMED to EXECUTED.
	var granted *v1alpha1.Act
	testutil.Eventually(t, 30*time.Second, "the granted Act to record the journal's EXECUTED", func() error {
		granted = grantedAct(t, c, opID)
		if granted.Status.State != v1alpha1.ActStateExecuted || granted.Status.AuthorityRef == nil ||
			!meta.IsStatusConditionTrue(granted.Status.Conditions, v1alpha1.ActSettledCondition) {
			return fmt.Errorf("the granted Act %s: %+v", granted.Name, granted.Status)
		}
		return nil
	})
	// The grant was consumed in the sidecar's Review: the granted Act's permit record names the
	// authority and the operation the upstream received, and no Lease is stored.
	if auth, op := granted.Annotations[v1alpha1.AnnotationActPermitAuthority], granted.Annotations[v1alpha1.AnnotationActPermitOperation]; auth != granted.Status.AuthorityRef.Name || op != opID {
		t.Fatalf("the granted Act records authority %q consumed by %q, want %s by the operation %s the upstream received", auth, op, granted.Status.AuthorityRef.Name, opID)
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: granted.Status.AuthorityRef.Name}, lease); !apierrors.IsNotFound(err) {
		t.Fatalf("a Lease %s for a grant consumed in its Review (%v)", granted.Status.AuthorityRef.Name, err)
	}

	// A replay never runs again. In the same session, while the spent authority is unexpired,
	// it is the granted act's retry: the recorded result, upstream not called (tool-use-binding
	// §9; internal/sidecar retries.go, as the standalone gate). From another session it is a new
	// act that needs a new binding moment: the spent resolution does not authorise it. And the
	// spent authority cannot be consumed again, even by the agent's own token straight at the
	// service.
	// The recorded result is the upstream's as it first came (the resolution delivered with the
	// first answer is not delivered again), marked in the gate's Actgate-Replayed header.
	res = callTool(t, cs, "send_payment", paymentArgs)
	replayed := replays.Count() == marked+1
	if res.IsError || !replayed || up.Count("send_payment") != 1 || len(res.Content) == 0 || text(&mcp.CallToolResult{Content: res.Content[:1]}) != text(&mcp.CallToolResult{Content: grantedRes.Content[:1]}) {
		t.Fatalf("same-session replay: isError=%v replayed=%v upstream count %d: %s, first %s", res.IsError, replayed, up.Count("send_payment"), text(res), text(grantedRes))
	}
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "billing-agent", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + sideAddr + mcpproxy.Path("payments")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("second MCP session through the sidecar: %v", err)
	}
	defer cs2.Close()
	res = callTool(t, cs2, "send_payment", paymentArgs)
	if !res.IsError || up.Count("send_payment") != 1 {
		t.Fatalf("replay from another session: isError=%v upstream count %d: %s", res.IsError, up.Count("send_payment"), text(res))
	}
	if again, _ := res.Meta[mcpproxy.MetaMomentID].(string); efCode(res) != string(ef.EFEscalationRequired) || again == momentName {
		t.Fatalf("replay from another session: code %q moment %q; the spent resolution must not authorise it again", efCode(res), again)
	}
	replayConsume(t, authAddr, pki, token, granted)

	// An agent-authored binding moment in the pod: tools/list offers the virtual tool, the agent
	// proposes two payments, alice chooses the second with kubectl actgate resolve, and exactly
	// that call runs once.
	tools, err := cs2.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == sink.RequestBindingMomentTool }) {
		t.Fatalf("tools/list in the pod has no %s: %v", sink.RequestBindingMomentTool, err)
	}
	proposal := `{"synopsis":"Two invoices from ACME are due; the agent asks which payment may run.",` +
		`"stem":"Which payment may run?","recommended":1,"options":[` +
		`{"label":"Pay both invoices","tool":"send_payment","server":"payments","args":{"amount":60,"to":"ACME"},"reasoning":"Settles both."},` +
		`{"label":"Pay the first invoice","tool":"send_payment","server":"payments","args":{"amount":30,"to":"ACME"},"reasoning":"Settles the older one."}]}`
	res = callTool(t, cs2, sink.RequestBindingMomentTool, proposal)
	proposed, _ := res.Meta[mcpproxy.MetaMomentID].(string)
	if res.IsError || proposed == "" {
		t.Fatalf("request_binding_moment in the pod: %s %s", efCode(res), text(res))
	}
	pbm := &v1alpha1.BindingMoment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: proposed}, pbm); err != nil || pbm.Spec.Principal != alice {
		t.Fatalf("the proposed BindingMoment %s: %+v %v", proposed, pbm.Spec, err)
	}
	if stdout, stderr, err := tool(t, env, plugin, aliceUser.Kubeconfig, "kubectl", "actgate", "resolve", proposed, "-n", agentNS, "--option", "2"); err != nil {
		t.Fatalf("alice resolving the proposed moment: %v\n%s%s", err, stdout, stderr)
	}
	testutil.Eventually(t, 30*time.Second, "the proposed BindingMoment to be recorded Resolved", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pbm), pbm); err != nil {
			return err
		}
		if pbm.Status.State != v1alpha1.BindingMomentResolved {
			return fmt.Errorf("%+v", pbm.Status)
		}
		return nil
	})
	before := up.Count("send_payment")
	if res := callTool(t, cs2, "send_payment", `{"amount":60,"to":"ACME"}`); !res.IsError || up.Count("send_payment") != before {
		t.Fatalf("the option alice did not choose ran: %s", text(res))
	}
	if res := callTool(t, cs2, "send_payment", `{"amount":30,"to":"ACME"}`); res.IsError || up.Count("send_payment") != before+1 {
		t.Fatalf("the option alice chose: %s %s (upstream %d → %d)", efCode(res), text(res), before, up.Count("send_payment"))
	}

	// A host loop running tools in-process asks /v1/enforce: a policy-permit call is allowed only
	// after its authority was consumed, and reports its outcome to /v1/complete; the same call
	// from retrieved text is refused (the sample's prompt-injection rule).
	hostBlock := `{"type":"tool_use","id":"toolu_01","name":"email_send","input":{"to":"ap@acme.example","subject":"Receipt"}}`
	dec := enforce(t, sideAddr, `{"vendor":"anthropic","block":`+hostBlock+`,"session":"conv-1","provenance":"retrieval"}`)
	if dec.Allow || dec.Code == "" || !strings.Contains(string(dec.Deny), `"is_error":true`) {
		t.Fatalf("email_send from retrieved text: %+v", dec)
	}
	dec = enforce(t, sideAddr, `{"vendor":"anthropic","block":`+hostBlock+`,"session":"conv-1","provenance":"user"}`)
	if !dec.Allow || dec.AuthorityID == "" || dec.OperationID == "" {
		t.Fatalf("email_send from the user: %+v", dec)
	}
	// A machine Permit's consumption is the create of its Act, which records the authority and
	// the operation (no Lease is stored).
	var permitted v1alpha1.ActList
	if err := c.List(ctx, &permitted, client.InNamespace(agentNS)); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(permitted.Items, func(a v1alpha1.Act) bool {
		return a.Annotations[v1alpha1.AnnotationActPermitAuthority] == dec.AuthorityID && a.Annotations[v1alpha1.AnnotationActPermitOperation] == dec.OperationID
	}) {
		t.Fatalf("allow returned before an Act recorded authority %s consumed for %s", dec.AuthorityID, dec.OperationID)
	}
	if status, body := post(t, "http://"+sideAddr+hostloop.CompletePath, `{"operation_id":"`+dec.OperationID+`","outcome":"executed","result":{"sent":true}}`); status != 200 || !strings.Contains(body, "EXECUTED") {
		t.Fatalf("/v1/complete: HTTP %d %s", status, body)
	}

	// kubectl shows it all: the escalation, both dispatches with the outcomes the outbox
	// reported, the refusal the sidecar recorded off the call path — and no Act for the hot
	// path, which never reached the control plane.
	var acts string
	testutil.Eventually(t, 30*time.Second, "kubectl get acts to show every act the pod decided", func() error {
		acts = env.Kubectl(t, "-n", agentNS, "get", "acts", "-o", "wide")
		for _, want := range [][]string{
			{"send_payment", "FINANCIAL", "Escalated", "EF_ESCALATION_REQUIRED"},
			{granted.Name, "send_payment", "FINANCIAL", "Allowed", "EXECUTED"},
			{"email_send", "COMMUNICATION", "Allowed", "EXECUTED"},
			{"email_send", "COMMUNICATION", "Denied"},
		} {
			if !slices.ContainsFunc(strings.Split(acts, "\n"), func(line string) bool { return containsAll(line, want...) }) {
				return fmt.Errorf("kubectl get acts has no line with %q", want)
			}
		}
		return nil
	})
	t.Logf("kubectl get acts -o wide:\n%s", acts)
	if strings.Contains(acts, "get_balance") {
		t.Errorf("the hot path created an Act:\n%s", acts)
	}
	if out, stderr, err := tool(t, env, plugin, "", "kubectl", "actgate", "acts", "-n", agentNS); err != nil || !strings.Contains(out, "send_payment") {
		t.Errorf("kubectl actgate acts: %v\n%s%s", err, out, stderr)
	} else {
		t.Logf("kubectl actgate acts:\n%s", out)
	}

	// A policy change is enforced by the running sidecar: once the reads rule no longer covers
	// get_*, the hot-path read the pod decided alone a moment ago is refused there, and never
	// reaches the upstream.
	reads := up.Count("get_balance")
	changed = time.Now()
	env.Kubectl(t, "-n", agentNS, "patch", "toolpolicy", "payments", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/rules/0/tools","value":["search*"]}]`)
	testutil.Eventually(t, 30*time.Second, "the running sidecar to refuse get_balance under the changed policy", func() error {
		if res := callTool(t, cs2, "get_balance", `{"account":"A-1"}`); !res.IsError {
			return errors.New("get_balance still allowed")
		}
		return nil
	})
	t.Logf("policy change (kubectl patch) to its enforcement by the running sidecar: %v (%d reads allowed meanwhile)",
		time.Since(changed).Round(time.Millisecond), up.Count("get_balance")-reads)
	before = up.Count("get_balance")
	if res := callTool(t, cs2, "get_balance", `{"account":"A-1"}`); !res.IsError || up.Count("get_balance") != before {
		t.Fatalf("get_balance under the changed policy: %s (upstream %d → %d)", text(res), before, up.Count("get_balance"))
	}

	// The sidecar journaled the dispatch and recorded its outcome.
	sidecarProc.stop(t)
	checkJournal(t, journalDir, signPub, opID, granted)
}

// checkChartArgs runs the binary with the arguments of each container the chart deploys: a
// flag the binary does not know (or a required one missing) would crash the pod at start,
// which no kubelet here would show. Anything else (a missing file, no cluster) is expected.
func checkChartArgs(t *testing.T, c client.Client, bin, dir string) {
	t.Helper()
	var deps appsv1.DeploymentList
	if err := c.List(t.Context(), &deps, client.InNamespace(releaseNS)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) == 0 {
		t.Fatal("the chart deployed nothing")
	}
	for _, d := range deps.Items {
		for _, ct := range d.Spec.Template.Spec.Containers {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			// The chart names the control-plane binary in command; the image's entrypoint is actgate.
			exe := bin
			if len(ct.Command) > 0 {
				exe = filepath.Join(filepath.Dir(bin), filepath.Base(ct.Command[0]))
			}
			cmd := exec.CommandContext(ctx, exe, ct.Args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "KUBECONFIG=" + filepath.Join(dir, "no-such-kubeconfig")}
			cmd.Dir = dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			_ = cmd.Run()
			cancel()
			for _, bad := range []string{"unknown flag", "unknown shorthand flag", "required flag", "invalid argument", "unknown command"} {
				if strings.Contains(stderr.String(), bad) {
					t.Errorf("Deployment %s container %s: `%s %s` is refused by the binary: %s",
						d.Name, ct.Name, filepath.Base(exe), strings.Join(ct.Args, " "), firstLine(stderr.String()))
					break
				}
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// fallbackToken is a pod-bound token for the authority's audience, for when the injection
// projects none.
func fallbackToken(t *testing.T, env *envtest.Env, ns, serviceAccount, pod string) string {
	t.Helper()
	token, stderr, err := tool(t, env, nil, "", "kubectl", "-n", ns, "create", "token", serviceAccount,
		"--audience", service.DefaultAudience, "--bound-object-kind", "Pod", "--bound-object-name", pod, "--duration", "1h")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, stderr)
	}
	return testutil.WriteFile(t, t.TempDir(), "token", []byte(strings.TrimSpace(token)))
}

// pointWebhooksAt rewrites the chart's webhook configurations to call the local manager at
// base (path kept) with the test CA: the API server cannot reach a Service here.
func pointWebhooksAt(t *testing.T, c client.Client, base string, caPEM []byte) {
	t.Helper()
	ctx := t.Context()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: "actgate-mutating-webhook-configuration"}, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = localClientConfig(t, m.Webhooks[i].ClientConfig, base, caPEM)
	}
	if err := c.Update(ctx, &m); err != nil {
		t.Fatal(err)
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: "actgate-validating-webhook-configuration"}, &v); err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = localClientConfig(t, v.Webhooks[i].ClientConfig, base, caPEM)
	}
	if err := c.Update(ctx, &v); err != nil {
		t.Fatal(err)
	}
	if len(m.Webhooks) == 0 || len(v.Webhooks) == 0 {
		t.Fatalf("the chart installed %d mutating and %d validating webhooks", len(m.Webhooks), len(v.Webhooks))
	}
}

func localClientConfig(t *testing.T, cc admissionregistrationv1.WebhookClientConfig, base string, caPEM []byte) admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	if cc.Service == nil || cc.Service.Path == nil {
		t.Fatalf("a chart webhook has no service path: %+v", cc)
	}
	u := base + *cc.Service.Path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caPEM}
}

// missingRules returns the rules user (with groups) is not allowed in namespace, asked of the
// API server's authorizer with SubjectAccessReviews (what `kubectl auth can-i --as` does).
func missingRules(t *testing.T, c client.Client, user string, groups []string, namespace string, rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	t.Helper()
	var missing []rbacv1.PolicyRule
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range r.Verbs {
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User: user, Groups: groups,
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: g, Resource: resource, Subresource: sub},
					}}
					if err := c.Create(t.Context(), sar); err != nil {
						t.Fatal(err)
					}
					if !sar.Status.Allowed {
						missing = append(missing, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{verb}})
					}
				}
			}
		}
	}
	return missing
}

func describe(rules []rbacv1.PolicyRule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		g := r.APIGroups[0]
		if g == "" {
			g = "core"
		}
		out[i] = fmt.Sprintf("%s %s/%s", r.Verbs[0], g, r.Resources[0])
	}
	return out
}

// grant binds user to a ClusterRole of rules.
func grant(t *testing.T, c client.Client, name, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	if err := c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}); err != nil {
		t.Fatal(err)
	}
}

// checkInjected asserts the webhook's work on the agent Pod: the native sidecar is there, the
// credential left the agent container for the sidecar, the agent's MCP URL points at the
// sidecar, and the status annotation records it. It returns the sidecar container.
func checkInjected(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	var side *corev1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == "actgate-sidecar" {
			side = &pod.Spec.InitContainers[i]
		}
	}
	if side == nil {
		t.Fatalf("no actgate-sidecar init container in the Pod: %+v", pod.Spec)
	}
	if side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the sidecar is not a native sidecar (restartPolicy Always): %v", side.RestartPolicy)
	}
	if len(side.Args) == 0 || side.Args[0] != "sidecar" {
		t.Errorf("the sidecar runs %v, want `actgate sidecar`", side.Args)
	}
	if _, ok := pod.Annotations["actgate.io/status"]; !ok {
		t.Errorf("no actgate.io/status annotation")
	}
	var agent *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "agent" {
			agent = &pod.Spec.Containers[i]
		}
	}
	if agent == nil {
		t.Fatal("the agent container is gone")
	}
	for _, e := range agent.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "payments-mcp" {
			t.Errorf("the agent container still reads the credential Secret (%s)", e.Name)
		}
		if e.Name == "MCP_SERVER_URL" && !strings.HasPrefix(e.Value, "http://127.0.0.1:") {
			t.Errorf("the agent's MCP_SERVER_URL is %q, not the sidecar", e.Value)
		}
	}
	moved := slices.ContainsFunc(side.Env, func(e corev1.EnvVar) bool {
		return e.Name == "PAYMENTS_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "payments-mcp"
	})
	if !moved {
		t.Errorf("the credential reference did not move to the sidecar: %+v", side.Env)
	}
	return *side
}

// injectedWant is what the injection must give a pod's sidecar beyond what every sidecar gets:
// its servers' names (ACTGATE_SERVERS) and the servers whose credential it moved.
type injectedWant struct {
	servers     string
	credentials []string
}

// sidecarEnv is what the kubelet would give the injected sidecar, made locally: its env
// values with the downward API fields and Secret references resolved, and every volume it
// mounts written to a local folder (Secrets, the downward API's annotations, the projected
// service-account token — requested with the real kubectl for the projection's audience —
// and emptyDirs), each variable pointing into a mount rewritten to the local folder. What
// `actgate sidecar` needs in a pod and the injection does not provide is a failure, and
// fallbacks fill it in so the story goes on; overrides replace what only exists in this test
// (the listener, the authority's address). want is what the injection must have given this
// pod. It returns the environment and the variables.
func sidecarEnv(t *testing.T, env *envtest.Env, c client.Client, pod *corev1.Pod, side corev1.Container, dir string, want injectedWant,
	overrides, fallbacks map[string]string) ([]string, map[string]string) {
	t.Helper()
	ctx := t.Context()
	secret := func(name string) *corev1.Secret {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &s); err != nil {
			t.Fatalf("Secret %s: %v", name, err)
		}
		return &s
	}
	field := func(path string) string {
		switch {
		case path == "metadata.name":
			return pod.Name
		case path == "metadata.namespace":
			return pod.Namespace
		case path == "metadata.uid":
			return string(pod.UID)
		case path == "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName
		case strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']"):
			return pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")]
		case strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']"):
			return pod.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")]
		}
		t.Fatalf("unsupported downward API field %s", path)
		return ""
	}
	vars := map[string]string{}
	for _, e := range side.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			vars[e.Name] = field(e.ValueFrom.FieldRef.FieldPath)
		case e.ValueFrom.SecretKeyRef != nil:
			vars[e.Name] = string(secret(e.ValueFrom.SecretKeyRef.Name).Data[e.ValueFrom.SecretKeyRef.Key])
		default:
			t.Fatalf("sidecar env %s: unsupported source", e.Name)
		}
	}

	// The volumes, as the kubelet would mount them.
	mounts := map[string]string{} // mount path in the pod → local folder
	for _, m := range side.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("the sidecar mounts volume %s, which the pod does not have", m.Name)
		}
		v := pod.Spec.Volumes[i]
		local := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			t.Fatal(err)
		}
		secretItems := func(name string, items []corev1.KeyToPath) {
			s := secret(name)
			if len(items) == 0 {
				for k := range s.Data {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				testutil.WriteFile(t, local, it.Path, s.Data[it.Key])
			}
		}
		downward := func(items []corev1.DownwardAPIVolumeFile) {
			for _, it := range items {
				if it.FieldRef == nil {
					t.Fatalf("volume %s: unsupported downward API item %s", v.Name, it.Path)
				}
				testutil.WriteFile(t, local, it.Path, []byte(field(it.FieldRef.FieldPath)))
			}
		}
		switch {
		case v.EmptyDir != nil:
		case v.Secret != nil:
			secretItems(v.Secret.SecretName, v.Secret.Items)
		case v.DownwardAPI != nil:
			downward(v.DownwardAPI.Items)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.Secret != nil:
					secretItems(src.Secret.Name, src.Secret.Items)
				case src.DownwardAPI != nil:
					downward(src.DownwardAPI.Items)
				case src.ServiceAccountToken != nil:
					token, stderr, err := tool(t, env, nil, "", "kubectl", "-n", pod.Namespace, "create", "token", pod.Spec.ServiceAccountName,
						"--audience", src.ServiceAccountToken.Audience, "--bound-object-kind", "Pod", "--bound-object-name", pod.Name, "--duration", "1h")
					if err != nil {
						t.Fatalf("kubectl create token: %v\n%s", err, stderr)
					}
					testutil.WriteFile(t, local, src.ServiceAccountToken.Path, []byte(strings.TrimSpace(token)))
				default:
					t.Fatalf("volume %s: unsupported projection %+v", v.Name, src)
				}
			}
		default:
			t.Fatalf("volume %s: unsupported kind", v.Name)
		}
		mounts[m.MountPath] = local
	}
	inMount := func(v string) (string, bool) {
		for mp, local := range mounts {
			if v == mp || strings.HasPrefix(v, strings.TrimSuffix(mp, "/")+"/") {
				return local + strings.TrimPrefix(v, mp), true
			}
		}
		return v, false
	}

	var missing []string
	required := []string{"ACTGATE_SINK_ID", "ACTGATE_SERVER_URLS", "ACTGATE_AUTHORITY_URL",
		"ACTGATE_AUTHORITY_TOKEN_FILE", "ACTGATE_AUTHORITY_CA", "ACTGATE_AUTHORITY_PUBLIC_KEY", "ACTGATE_JOURNAL_DIR"}
	if len(want.credentials) > 0 {
		required = append(required, "ACTGATE_CREDENTIALS_DIR")
	}
	for _, name := range required {
		v := vars[name]
		if v == "" {
			missing = append(missing, name)
			continue
		}
		if !strings.HasSuffix(name, "_FILE") && !strings.HasSuffix(name, "_DIR") {
			continue
		}
		local, ok := inMount(v)
		if !ok {
			missing = append(missing, fmt.Sprintf("a volume mounted for %s=%s", name, v))
			continue
		}
		if _, err := os.Stat(local); err != nil {
			missing = append(missing, fmt.Sprintf("%s=%s (nothing there in the mounted volume)", name, v))
			continue
		}
		vars[name] = local
	}
	if len(missing) > 0 {
		t.Errorf("the injected sidecar could not start in a pod: it lacks %s (webhook/inject/sidecar.yaml.tmpl); the test supplies them to continue",
			strings.Join(missing, ", "))
	}
	for name, want := range map[string]string{"ACTGATE_SERVERS": want.servers, "ACTGATE_POD_NAMESPACE": pod.Namespace, "ACTGATE_SERVICE_ACCOUNT": pod.Spec.ServiceAccountName} {
		if vars[name] != want {
			t.Errorf("injected %s = %q, want %q", name, vars[name], want)
		}
	}
	if got, want := vars["ACTGATE_SERVER_URLS"], fallbacks["ACTGATE_SERVER_URLS"]; got != "" && got != want {
		t.Errorf("injected ACTGATE_SERVER_URLS = %q, want %q (the policy's server URL)", got, want)
	}
	if got, want := vars["ACTGATE_SINK_ID"], fallbacks["ACTGATE_SINK_ID"]; got != "" && got != want {
		t.Errorf("injected ACTGATE_SINK_ID = %q, want the policy's %q", got, want)
	}
	for _, server := range want.credentials {
		if _, err := os.Stat(filepath.Join(vars["ACTGATE_CREDENTIALS_DIR"], server, "credential")); err != nil {
			t.Errorf("the injected credentials volume does not give the sidecar %s/credential: %v", server, err)
		}
	}
	for k, v := range fallbacks {
		if vars[k] == "" || slices.ContainsFunc(missing, func(m string) bool { return strings.Contains(m, k) }) {
			vars[k] = v
		}
	}
	for k, v := range overrides {
		vars[k] = v
	}
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out, vars
}

// optionFor returns the index of the moment's option whose action digest is exactly tool with
// args (envelope-04 §5.6, docs/architecture.md "The action an option authorises").
func optionFor(t *testing.T, bm *v1alpha1.BindingMoment, tool, args string) int {
	t.Helper()
	env, err := envelope.Parse([]byte(bm.Spec.Envelope))
	if err != nil {
		t.Fatalf("BindingMoment envelope: %v", err)
	}
	want, err := action.Digest(tool, json.RawMessage(args), jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < env.NumOptions(); i++ {
		if o, _ := env.Option(i); o.ActionDigest == want {
			return i
		}
	}
	t.Fatalf("no option of %s authorises %s %s", bm.Name, tool, args)
	return -1
}

// grantedAct finds the Act whose dispatch is operation opID.
func grantedAct(t *testing.T, c client.Client, opID string) *v1alpha1.Act {
	t.Helper()
	var list v1alpha1.ActList
	if err := c.List(t.Context(), &list, client.InNamespace(agentNS)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if a := &list.Items[i]; a.Status.OperationID == opID || a.Annotations[v1alpha1.AnnotationActPermitOperation] == opID {
			return a
		}
	}
	t.Fatalf("no Act records operation %s", opID)
	return nil
}

// replayConsume presents the spent authority again, straight to the service, as the agent.
func replayConsume(t *testing.T, authAddr string, p *testutil.PKI, token string, granted *v1alpha1.Act) {
	t.Helper()
	rc := &review.Client{
		URL:   "https://" + authAddr,
		HTTP:  &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}}},
		Token: func() (string, error) { return token, nil },
	}
	s := granted.Spec
	resp, err := rc.Do(t.Context(), review.Request{Operation: review.OperationConsume, Consume: &review.ConsumeRequest{
		AuthorityID: granted.Status.AuthorityRef.Name, OperationID: journal.NewOperationID(),
		Binding: review.Binding{ActID: s.ActID, ArgumentsDigest: string(s.ArgumentsDigest), ActionDigest: string(s.ActionDigest),
			Tool: s.Tool, Destination: s.Destination, SinkID: s.SinkID, PolicyEpoch: fmt.Sprint(s.PolicyEpoch)},
	}})
	if err != nil {
		t.Fatalf("replayed consume: %v", err)
	}
	if resp.Allowed || resp.Code != ef.EF005 {
		t.Fatalf("a spent authority was consumed again: %+v", resp)
	}
}

// checkJournal opens the stopped sidecar's journal: the granted dispatch went through
// DISPATCH_PENDING to EXECUTED, for the authority the Act names.
func checkJournal(t *testing.T, dir, pubFile, opID string, granted *v1alpha1.Act) {
	t.Helper()
	verifier, err := sidecar.LoadVerifier(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(dir, sidecar.JournalFile), boltstore.Options{Verifier: verifier})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Record(t.Context(), opID)
	if err != nil {
		t.Fatalf("journal record of %s: %v", opID, err)
	}
	if rec.State != journal.StateExecuted || rec.AuthorityID != granted.Status.AuthorityRef.Name || rec.ActionDigest != string(granted.Spec.ActionDigest) ||
		len(rec.History) == 0 || rec.History[0].To != journal.StateDispatchPending {
		t.Fatalf("journal record %+v", rec)
	}
	// The sidecar's receipt log beside the journal verifies with the key it wrote there, and
	// holds, under the same authority, the dispatch's allow, its EXECUTED outcome and the
	// same-session replay answered from the journal (step 3), which invoked nothing.
	pemBytes, err := os.ReadFile(filepath.Join(dir, sidecar.ReceiptPubFile))
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.NewVerifierPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	var decisions []string
	for _, r := range testutil.VerifiedReceipts(t, filepath.Join(dir, sidecar.ReceiptsFile), v) {
		if r.OperationID != opID {
			continue
		}
		if r.AuthorityID != rec.AuthorityID {
			t.Errorf("receipt %s names authority %s, the journal %s", r.Decision, r.AuthorityID, rec.AuthorityID)
		}
		decisions = append(decisions, strings.TrimSpace(r.Decision+" "+r.State+" "+r.Code))
	}
	executed := receipt.DecisionOutcome + " " + string(journal.StateExecuted)
	dispatch := receipt.DecisionAllow + " " + string(journal.StateDispatchPending) + " " + sink.ReceiptCodeDispatch
	if want := []string{dispatch, executed, executed + " " + sink.ReceiptCodeReplayed}; !slices.Equal(decisions, want) {
		t.Errorf("receipts of operation %s: %q, want %q", opID, decisions, want)
	}
}

// enforce posts a host-loop block to the sidecar's /v1/enforce.
func enforce(t *testing.T, addr, body string) hostloop.Decision {
	t.Helper()
	status, b := post(t, "http://"+addr+hostloop.EnforcePath, body)
	var d hostloop.Decision
	if err := json.Unmarshal([]byte(b), &d); err != nil || status != http.StatusOK {
		t.Fatalf("/v1/enforce: HTTP %d %v: %s", status, err, b)
	}
	return d
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func callTool(t *testing.T, cs *mcp.ClientSession, name, args string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func efCode(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

func text(r *mcp.CallToolResult) string { return testutil.Text(r) }

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// readyEpoch is the policy epoch the sidecar at addr reports on /readyz?check=policy (0: none).
func readyEpoch(t *testing.T, addr string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + sidecar.ReadyPath + "?check=policy")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct {
		Epoch int64 `json:"epoch"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Epoch
}

// checkProbes runs the injected container's startup and readiness probe commands against the
// running sidecar, as the kubelet would in its container: the image's binary replaced by the
// test's, the listen address by the one the test gave the sidecar.
func checkProbes(t *testing.T, side corev1.Container, bin, addr string, env []string) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"startupProbe": side.StartupProbe, "readinessProbe": side.ReadinessProbe} {
		if p == nil || p.Exec == nil || len(p.Exec.Command) < 3 || p.Exec.Command[0] != inject.SidecarBinary || p.Exec.Command[1] != "sidecar" || p.Exec.Command[2] != "probe" {
			t.Errorf("the injected sidecar's %s is not `%s sidecar probe …`: %+v", name, inject.SidecarBinary, p)
			continue
		}
		args := slices.Clone(p.Exec.Command[1:])
		if i := slices.Index(args, "--listen"); i >= 0 && i+1 < len(args) {
			args[i+1] = addr
		}
		testutil.Eventually(t, 10*time.Second, "the sidecar's "+name+" to pass", func() error {
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
}
