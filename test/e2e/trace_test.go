package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/internal/tracing"
	"github.com/actgate/actgate/internal/tracing/tracingtest"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// The traced upstream: this test binary run again with envTracedUpstream set is an MCP server
// (send_payment) in a process of its own, exporting its spans over OTLP/HTTP to
// envTracedUpstreamOTLP. Each tools/call is a server span continuing the W3C context the gate
// put in params._meta. GET /calls answers the count of calls it ran.
const (
	envTracedUpstream     = "ACTGATE_E2E_TRACED_UPSTREAM"
	envTracedUpstreamOTLP = "ACTGATE_E2E_TRACED_UPSTREAM_OTLP"
	upstreamService       = "payments-mcp"
	upstreamSpan          = "payments-mcp.tools_call"
)

func init() {
	if addr := os.Getenv(envTracedUpstream); addr != "" {
		os.Exit(runTracedUpstream(addr, os.Getenv(envTracedUpstreamOTLP)))
	}
}

func runTracedUpstream(addr, otlp string) int {
	tp, shutdown, err := tracing.Setup(tracing.Config{Endpoint: otlp, SampleRatio: 1, ServiceName: upstreamService})
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream tracing:", err)
		return 1
	}
	tr := tracing.TracerOf(tp)
	var mu sync.Mutex
	calls := 0
	up, err := mcptest.Start(nil, mcptest.Options{Name: upstreamService, Addr: addr, Intercept: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/calls" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprint(w, calls)
		return true
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	up.MCP().AddTool(&mcp.Tool{Name: "send_payment", Description: "Sends money.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_, span := tracing.Start(tracing.ExtractMeta(ctx, req.Params.Meta), tr, upstreamSpan, trace.SpanKindServer)
			span.SetAttributes(tracing.AttrTool.String(req.Params.Name))
			defer span.End()
			mu.Lock()
			calls++
			mu.Unlock()
			return mcptest.Text(`{"paid":true}`), nil
		})
	fmt.Println("upstream serving on", up.URL)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	_ = up.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "upstream tracing flush:", err)
		return 1
	}
	return 0
}

// TestTraceAcrossProcesses: one escalated call, with the agent's W3C context in params._meta,
// through `actgate sidecar`, `actgate-controlplane authority` and an upstream MCP server, three
// processes exporting OTLP/HTTP to a real tracing back end, Jaeger v2 (the agent, this test,
// exports its own spans there too), and the trace read back from Jaeger's query API. The call escalates, the principal resolves the BindingMoment (recorded by
// `actgate-controlplane manager`), the retry runs once upstream. Each agent call is the link of
// one trace of the sidecar's own (docs/operations.md "Tracing": the agent's context is linked,
// never continued), and the spans of the call form one tree across the processes: agent ~>
// sidecar (the link) > authority (Review, then the Review that consumes the grant) and
// sidecar > upstream; the spans carry act id, tool, server, class, decision, EF code and
// digests, and no argument value anywhere. The span tree is printed in the log.
//
// The admission webhooks and the chart are TestEndToEnd's; here the principal's resolution is
// written with the admin's client.
func TestTraceAcrossProcesses(t *testing.T) {
	envtest.SkipIfShort(t)
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	buildBinaries(t, root, bin)
	env := envtest.Start(t)
	ctx := t.Context()
	c := env.Client
	work := t.TempDir()
	const (
		ns     = "traced"
		sinkID = "traced-sink"
		secret = "iban-DE89-3704-0044-0532-0130-00"
	)
	args := `{"amount":250,"to":"` + secret + `"}`

	// The tracing back end: Jaeger v2, a real OpenTelemetry Collector with storage and a query
	// API; every process exports to its OTLP/HTTP receiver.
	began := time.Now()
	backend := startJaeger(t, root)
	otlp := backend.otlp

	// The upstream, a process of its own.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	upAddr := freeAddr(t)
	upstream := start(t, "upstream", self, append(os.Environ(), envTracedUpstream+"="+upAddr, envTracedUpstreamOTLP+"="+otlp))
	waitTCP(t, upstream, upAddr)
	upURL := "http://" + upAddr + "/mcp"
	upCalls := func() string {
		resp, err := http.Get("http://" + upAddr + "/calls")
		if err != nil {
			t.Fatalf("upstream /calls: %v", err)
		}
		defer resp.Body.Close()
		var n int
		_ = json.NewDecoder(resp.Body).Decode(&n)
		return fmt.Sprint(n)
	}

	// The agent's namespace, service account, pod (an API object: nothing runs) and policy;
	// the manager accepts it.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentSA, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: agentPod, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "billing-agent"}},
		Spec:       corev1.PodSpec{ServiceAccountName: agentSA, Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/billing-agent:1"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	policy := &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "billing-agent"}},
			Mode:        v1alpha1.PolicyModeEnforce,
			Sink:        &v1alpha1.SinkIdentity{ID: sinkID},
			Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: upURL, Protocol: v1alpha1.ServerProtocolMCP}},
			Rules: []v1alpha1.ToolRule{{
				Name: "money-movement", Tools: []string{"send_payment"}, ConsequenceClass: v1alpha1.ConsequenceFinancial,
				Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleHumanAuthorization, Principals: []string{alice}, MinPrincipals: 1},
				Alternatives: []v1alpha1.Alternative{{Label: "Dry-run the payment", Reasoning: "Shows the effect without moving money.",
					Args: runtime.RawExtension{Raw: []byte(`{"dry_run":true}`)}}},
			}},
		},
	}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	controlPlane := filepath.Join(bin, "actgate-controlplane")
	manager := start(t, "manager", controlPlane, os.Environ(), "manager", "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	testutil.Eventually(t, 60*time.Second, "the ToolPolicy to be Accepted with a policy epoch", func() error {
		if manager.exited() {
			t.Fatalf("the manager exited: %v\n%s", manager.err, manager.output())
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(policy.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition)
		if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == policy.Generation && policy.Status.PolicyEpoch > 0 {
			return nil
		}
		return fmt.Errorf("%+v", policy.Status)
	})

	// The authority service and the sidecar, both tracing to the receiver.
	pki := testutil.NewPKI(t, work)
	signKey, signPub := testutil.SigningKey(t, work)
	authAddr := freeAddr(t)
	authorityProc := start(t, "authority", controlPlane, os.Environ(), "authority", "--kubeconfig", env.Kubeconfig,
		"--bind-address", authAddr, "--metrics-bind-address", "0", "--tls-cert-file", pki.CertFile,
		"--tls-private-key-file", pki.KeyFile, "--signing-key-file", signKey, "--shutdown-grace", "0s",
		"--tracing-endpoint", otlp, "--tracing-sample-ratio", "1")
	waitTLS(t, authorityProc, authAddr, pki.Pool)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, agentSA, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{service.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := testutil.WriteFile(t, work, "token", []byte(tr.Status.Token))
	sideAddr := freeAddr(t)
	sidecarProc := start(t, "sidecar", filepath.Join(bin, "actgate"), []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work}, "sidecar",
		"--listen", sideAddr, "--authority-url", "https://"+authAddr, "--authority-ca-file", pki.CAFile,
		"--token-file", token, "--authority-public-key-file", signPub, "--namespace", ns,
		"--service-account", agentSA, "--sink-id", sinkID, "--servers", "payments", "--server", "payments="+upURL,
		"--journal-dir", filepath.Join(work, "journal"), "--tracing-endpoint", otlp, "--tracing-sample-ratio", "1")
	waitTCP(t, sidecarProc, sideAddr)

	// The agent: its own spans, exported to the same receiver; its context travels in _meta.
	agentTP, agentShutdown, err := tracing.Setup(tracing.Config{Endpoint: otlp, SampleRatio: 1, ServiceName: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	agentTr := tracing.TracerOf(agentTP)
	session, err := mcp.NewClient(&mcp.Implementation{Name: "billing-agent", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + sideAddr + mcpproxy.Path("payments")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("MCP client through the sidecar: %v\n%s", err, sidecarProc.output())
	}
	defer session.Close()
	taskCtx, task := tracing.Start(ctx, agentTr, "agent.task", trace.SpanKindInternal)
	call := func() *mcp.CallToolResult {
		cctx, span := tracing.Start(taskCtx, agentTr, "agent.tools_call", trace.SpanKindClient)
		defer span.End()
		m := mcp.Meta{}
		tracing.InjectMeta(cctx, m)
		cctx, cancel := context.WithTimeout(cctx, 30*time.Second)
		defer cancel()
		res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: "send_payment", Arguments: json.RawMessage(args), Meta: m})
		if err != nil {
			t.Fatalf("tools/call send_payment: %v", err)
		}
		return res
	}

	res := call()
	momentName, _ := res.Meta[mcpproxy.MetaMomentID].(string)
	if efCode(res) != string(ef.EFEscalationRequired) || momentName == "" || upCalls() != "0" {
		t.Fatalf("first call: code %q moment %q upstream %s: %s", efCode(res), momentName, upCalls(), text(res))
	}
	bm := &v1alpha1.BindingMoment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: momentName}, bm); err != nil {
		t.Fatalf("BindingMoment %s: %v", momentName, err)
	}
	option := optionFor(t, bm, "send_payment", args)
	bm.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To(int32(option)), EnvelopeDigest: bm.Spec.EnvelopeDigest}
	if err := c.Update(ctx, bm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the manager to record the BindingMoment Resolved", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bm), bm); err != nil {
			return err
		}
		if bm.Status.State == v1alpha1.BindingMomentResolved {
			return nil
		}
		return fmt.Errorf("%+v", bm.Status)
	})
	res = call()
	if res.IsError || upCalls() != "1" {
		t.Fatalf("granted retry: isError=%v upstream %s: %s\n%s", res.IsError, upCalls(), text(res), authorityProc.output())
	}
	task.End()

	// Every process flushes its spans on SIGTERM.
	for _, p := range []*proc{sidecarProc, authorityProc, upstream} {
		p.stop(t)
	}
	if err := agentShutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The call's trace as Jaeger's query API gives it back, once the collector's batch has
	// reached its storage.
	services := []string{"agent", "actgate-sidecar", "actgate-authority", upstreamService}
	var spans []sdktrace.ReadOnlySpan
	testutil.Eventually(t, 30*time.Second, "Jaeger to hold the spans of every process", func() error {
		var err error
		if spans, err = backend.spans(ctx, began, services...); err != nil {
			return err
		}
		have := map[string]bool{}
		for _, s := range spans {
			have[tracingtest.ServiceName(s)] = true
		}
		for _, svc := range services {
			if !have[svc] {
				return fmt.Errorf("no span of %s yet (%d spans)", svc, len(spans))
			}
		}
		return nil
	})
	checkCallTrace(t, spans, task.SpanContext().TraceID(), secret)
}

// checkCallTrace asserts the spans of TestTraceAcrossProcesses and logs the span tree: the
// agent's trace traceID and the traces whose root links one of its spans.
func checkCallTrace(t *testing.T, spans []sdktrace.ReadOnlySpan, traceID trace.TraceID, secret string) {
	t.Helper()
	callTraces := map[trace.TraceID]bool{traceID: true}
	// linked is the agent's span a root of another trace links, by the root's span id.
	linked := map[trace.SpanID]trace.SpanID{}
	for _, s := range spans {
		if s.SpanContext().TraceID() == traceID || s.Parent().IsValid() {
			continue
		}
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() == traceID {
				callTraces[s.SpanContext().TraceID()] = true
				linked[s.SpanContext().SpanID()] = l.SpanContext.SpanID()
			}
		}
	}
	var inTrace, other []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if callTraces[s.SpanContext().TraceID()] {
			inTrace = append(inTrace, s)
		} else {
			other = append(other, s)
		}
		for _, kv := range append(s.Attributes(), s.Resource().Attributes()...) {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %s (%s) attribute %s carries the argument value", s.Name(), tracingtest.ServiceName(s), kv.Key)
			}
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s event %s attribute %s carries the argument value", s.Name(), ev.Name, kv.Key)
				}
			}
		}
		if strings.Contains(s.Name(), secret) || strings.Contains(s.Status().Description, secret) {
			t.Errorf("span %s carries the argument value in its name or status", s.Name())
		}
	}
	t.Logf("span tree of the call (trace %s, %d spans):\n%s", traceID, len(inTrace), tracingtest.SpanTree(inTrace))
	if len(other) > 0 {
		t.Logf("spans in other traces (%d):\n%s", len(other), tracingtest.SpanTree(other))
	}

	// One tree: every span of the call has its parent among them, but the agent's root; the
	// parent of a sidecar trace's root is the agent's span it links.
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range inTrace {
		byID[s.SpanContext().SpanID()] = s
	}
	parentOf := func(s sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, bool) {
		if !s.Parent().IsValid() {
			p, ok := byID[linked[s.SpanContext().SpanID()]]
			return p, ok
		}
		p, ok := byID[s.Parent().SpanID()]
		return p, ok
	}
	services := map[string]int{}
	for _, s := range inTrace {
		services[tracingtest.ServiceName(s)]++
		if s.Name() == "agent.task" {
			if s.Parent().IsValid() {
				t.Errorf("the agent's root span has a parent")
			}
			continue
		}
		p, ok := parentOf(s)
		if !ok {
			t.Errorf("span %s (%s) has parent %s, which is not in the call's traces", s.Name(), tracingtest.ServiceName(s), s.Parent().SpanID())
			continue
		}
		// A process boundary is a remote parent, or for the sidecar's root the link to the
		// agent's span: client span in one process, server span in the next.
		if ps, ss := tracingtest.ServiceName(p), tracingtest.ServiceName(s); ps != ss {
			viaLink := !s.Parent().IsValid() && ss == "actgate-sidecar"
			if (!viaLink && !s.Parent().IsRemote()) || p.SpanKind() != trace.SpanKindClient || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("%s (%s) under %s (%s): a process boundary must be a client span's remote server child (remote %v, kinds %s > %s)",
					s.Name(), ss, p.Name(), ps, s.Parent().IsRemote(), p.SpanKind(), s.SpanKind())
			}
		}
	}
	for _, svc := range []string{"agent", "actgate-sidecar", "actgate-authority", upstreamService} {
		if services[svc] == 0 {
			t.Errorf("no span of %s in the call's trace (services %v)", svc, services)
		}
	}
	// Spans outside the call's trace may only be the outcome's Report, which the sidecar sends
	// after answering the agent, in a trace of its own.
	for _, s := range other {
		if op := tracingtest.Attr(s, "actgate.review.operation"); op != "Report" {
			t.Errorf("span %s (%s, operation %q) is outside the call's trace", s.Name(), tracingtest.ServiceName(s), op)
		}
	}

	// The hops, by process.
	of := func(svc, name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range inTrace {
			if tracingtest.ServiceName(s) == svc && s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	agentCalls := of("agent", "agent.tools_call")
	if len(agentCalls) != 2 {
		t.Fatalf("%d agent.tools_call spans, want 2", len(agentCalls))
	}
	if agentCalls[1].StartTime().Before(agentCalls[0].StartTime()) {
		agentCalls[0], agentCalls[1] = agentCalls[1], agentCalls[0]
	}
	// Under each agent call, the sidecar's server span; under the authority's reviews, what
	// they decided.
	var sidecarRoots []sdktrace.ReadOnlySpan
	for _, s := range inTrace {
		if tracingtest.ServiceName(s) == "actgate-sidecar" && s.SpanKind() == trace.SpanKindServer {
			sidecarRoots = append(sidecarRoots, s)
			if p, _ := parentOf(s); s.Parent().IsValid() || p == nil || p.Name() != "agent.tools_call" {
				t.Errorf("sidecar server span %s is not a root linking an agent.tools_call", s.Name())
			}
		}
	}
	if len(sidecarRoots) != 2 {
		t.Errorf("%d sidecar server spans, want one per agent call", len(sidecarRoots))
	}
	attrs := func(svc string) map[string][]string {
		m := map[string][]string{}
		for _, s := range inTrace {
			if tracingtest.ServiceName(s) != svc {
				continue
			}
			for _, kv := range s.Attributes() {
				m[string(kv.Key)] = append(m[string(kv.Key)], kv.Value.String())
			}
		}
		return m
	}
	side := attrs("actgate-sidecar")
	has := func(m map[string][]string, key, want string) bool {
		for _, v := range m[key] {
			if v == want || (want == "*" && v != "") {
				return true
			}
		}
		return false
	}
	for _, kv := range [][2]string{
		{"actgate.tool", "send_payment"}, {"actgate.server", "payments"}, {"actgate.consequence_class", "FINANCIAL"},
		{"actgate.ef_code", string(ef.EFEscalationRequired)}, {"actgate.act.id", "*"}, {"actgate.action_digest", "*"},
		{"actgate.arguments_digest", "*"}, {"actgate.allowed", "true"}, {"actgate.allowed", "false"}, {"actgate.invoked", "true"},
		{"actgate.decision", "*"}, {"actgate.operation_id", "*"},
	} {
		if !has(side, kv[0], kv[1]) {
			t.Errorf("no sidecar span has %s=%s: %v", kv[0], kv[1], side[kv[0]])
		}
	}
	auth := attrs("actgate-authority")
	for _, kv := range [][2]string{
		{"actgate.review.operation", "Review"}, {"actgate.decision", "Escalated"},
		{"actgate.ef_code", string(ef.EFEscalationRequired)}, {"actgate.allowed", "true"}, {"actgate.act.id", "*"},
		{"actgate.authority.id", "*"}, {"actgate.action_digest", "*"},
	} {
		if !has(auth, kv[0], kv[1]) {
			t.Errorf("no authority span has %s=%s: %v", kv[0], kv[1], auth[kv[0]])
		}
	}
	ups := of(upstreamService, upstreamSpan)
	if len(ups) != 1 {
		t.Fatalf("%d upstream spans in the trace, want 1 (the retry's)", len(ups))
	}
	p, _ := parentOf(ups[0])
	if p == nil || tracingtest.ServiceName(p) != "actgate-sidecar" {
		t.Fatalf("the upstream's span is not a child of a sidecar span")
	}
	// The upstream's call descends from the second agent call, the retry.
	a := p
	for a != nil && a.Name() != "agent.tools_call" {
		a, _ = parentOf(a)
	}
	if a == nil || a.SpanContext().SpanID() != agentCalls[1].SpanContext().SpanID() {
		t.Errorf("the upstream's span does not descend from the retry's agent.tools_call")
	}
}
