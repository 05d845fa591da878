package authority

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// TestProposeMomentTwoServers: an agent-authored binding moment in a pod whose options call two
// servers, as standalone allows. The pod's sidecar (sidecar.New, following the real service)
// checks the proposal against its policy and the service checks every option's digest and
// call against its own, each on the option's server; the BindingMoment's calls carry each
// option's server and destination. Once the principal chose the option on the second server,
// exactly that call runs once, on that server: the same tool and arguments addressed to the
// first server (the same action digest) are not granted, the option not chosen is refused,
// a retry does not run it again, and the first server is never called.
func TestProposeMomentTwoServers(t *testing.T) {
	r := newRig(t, rigOptions{})
	cachedService(t, r, 0) // the service with its informer cache, which the policy endpoint needs
	aliceC := r.principal(t, alice)
	ctx := context.Background()
	upstreams := map[string]*mcptest.Server{}
	for _, name := range []string{"payments", "ledger"} {
		up, err := mcptest.Start([]mcptest.Tool{
			{Name: "send_payment", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return mcptest.Text("paid"), nil }},
			{Name: "hold_invoice", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return mcptest.Text("held"), nil }},
		}, mcptest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = up.Close() })
		upstreams[name] = up
	}
	calls := func(server string) int { return len(upstreams[server].Calls()) }

	// The policy governs both servers; holding an invoice needs alice too.
	p := &v1alpha1.ToolPolicy{}
	if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(r.policy), p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Servers = []v1alpha1.ToolServer{
		{Name: "payments", URL: upstreams["payments"].URL, Protocol: v1alpha1.ServerProtocolMCP},
		{Name: "ledger", URL: upstreams["ledger"].URL, Protocol: v1alpha1.ServerProtocolMCP},
	}
	p.Spec.Rules = append(p.Spec.Rules, v1alpha1.ToolRule{Name: "holds", Tools: []string{"hold_invoice"}, ConsequenceClass: v1alpha1.ConsequenceFinancial,
		Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleHumanAuthorization, Principals: []string{alice}},
		Alternatives: []v1alpha1.Alternative{{Label: "Flag the invoice", Reasoning: "Marks it without holding the money.",
			Args: runtime.RawExtension{Raw: []byte(`{"flag_only":true}`)}}}})
	if err := r.env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	envtest.AcceptPolicy(t, r.env.Client, p, 2)

	g := startSidecar(t, r, upstreams)
	const session = "s-two-servers"
	hold := `{"invoice":"inv-7","reason":"disputed"}`
	res, err := g.RequestMoment(ctx, session, r.agent, sink.Proposal{
		Synopsis: "Invoice 7 is disputed; pay it or hold it.", Findings: []string{"The payee disputes the amount."},
		Recommendations: []string{"Hold the invoice."}, Stem: "Which call may run?", Recommended: 1,
		Options: []sink.Option{
			{Label: "Pay invoice 7", Reasoning: "Settles it now.", Tool: "send_payment", Server: "payments", Args: json.RawMessage(paymentArgs)},
			{Label: "Hold invoice 7", Reasoning: "Keeps the money until the dispute ends.", Tool: "hold_invoice", Server: "ledger", Args: json.RawMessage(hold)},
		},
	})
	if err != nil || !res.Allowed || res.Moment == nil {
		t.Fatalf("a proposal on two servers: %+v %v", res, err)
	}
	name := res.Moment.ID
	r.waitMoment(t, name)
	m := &v1alpha1.BindingMoment{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Calls) != 2 || m.Spec.Calls[0].Server != "payments" || m.Spec.Calls[0].Destination != upstreams["payments"].URL ||
		m.Spec.Calls[1].Server != "ledger" || m.Spec.Calls[1].Destination != upstreams["ledger"].URL || m.Spec.Calls[1].Tool != "hold_invoice" {
		t.Fatalf("the moment's calls: %+v", m.Spec.Calls)
	}

	handle := func(server, tool, args string) sink.Result {
		t.Helper()
		c := sink.Call{Session: session, Agent: r.agent, Server: server, Destination: upstreams[server].URL, Tool: tool, Args: json.RawMessage(args)}
		res, err := g.Handle(ctx, c, invokeOn(t, upstreams[server], tool, args))
		if err != nil {
			t.Fatalf("%s %s: %v", server, tool, err)
		}
		return res
	}
	// Before the principal decides, the option's call awaits this moment.
	if res := handle("ledger", "hold_invoice", hold); res.Allowed || res.Code != "EF_ESCALATION_REQUIRED" || res.Moment == nil || res.Moment.ID != name {
		t.Fatalf("the option's call before the decision: %+v", res)
	}
	idx := int32(1)
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, &idx, "", true)

	// The chosen option's tool and arguments on the other server: the same action digest, not
	// the option's call.
	if res := handle("payments", "hold_invoice", hold); res.Allowed || calls("payments") != 0 {
		t.Fatalf("the chosen call on the other server: %+v (payments called %d times)", res, calls("payments"))
	}
	// The chosen option's call runs, on its server, once.
	if res := handle("ledger", "hold_invoice", hold); !res.Allowed || !res.Invoked || calls("ledger") != 1 {
		t.Fatalf("the chosen call: %+v (ledger called %d times)", res, calls("ledger"))
	}
	if res := handle("ledger", "hold_invoice", hold); res.Invoked || calls("ledger") != 1 {
		t.Fatalf("a retry of the chosen call: %+v (ledger called %d times)", res, calls("ledger"))
	}
	// The option alice did not choose is refused.
	if res := handle("payments", "send_payment", paymentArgs); res.Allowed || calls("payments") != 0 {
		t.Fatalf("the option not chosen: %+v (payments called %d times)", res, calls("payments"))
	}
	if got := upstreams["ledger"].Calls(); got[0].Tool != "hold_invoice" || string(got[0].Args) != hold {
		t.Fatalf("the ledger ran %+v", got)
	}
	// The grant was consumed in the sidecar's Review: recorded on the act, no Lease.
	if got := r.consumptions(t); len(got) != 1 {
		t.Fatalf("%d authorities consumed (%v), want 1", len(got), got)
	}
	if n := len(r.leases(t)); n != 0 {
		t.Fatalf("%d Leases stored, want none", n)
	}
}

// startSidecar runs a pod's sidecar in this process (sidecar.New and Serve, as `actgate
// sidecar` does) against the rig's service (reviews and the policy endpoint) served over its
// own TLS listener, with the rig's
// agent token and the upstreams as its servers, and returns its gate once it holds the pod's
// current policy.
func startSidecar(t *testing.T, r *rig, upstreams map[string]*mcptest.Server) *sidecar.Gate {
	t.Helper()
	pki := testutil.NewPKI(t, t.TempDir())
	mux := http.NewServeMux()
	mux.Handle(review.Path, r.svc)
	mux.Handle(review.PolicyPath, r.svc.PolicyHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pki.Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(r.agentTk), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := sidecar.EncodePublicKey(r.signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	cfg := sidecar.Config{
		Listen: "127.0.0.1:0", AuthorityURL: srv.URL, AuthorityCA: string(pki.CAPEM), TokenFile: tokenFile, PublicKey: string(pub),
		Namespace: r.ns, Agent: r.agent, SinkID: sinkID, JournalDir: filepath.Join(dir, "journal"), ReviewTimeout: 10 * time.Second,
	}
	for name, up := range upstreams {
		cfg.Upstreams = append(cfg.Upstreams, sidecar.Upstream{Name: name, URL: up.URL})
	}
	sc, err := sidecar.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "the sidecar to hold its pod's policy at epoch 2", func() error {
		if st := sc.Policy().Status(); !st.Ready || st.Epoch != 2 {
			return &statusError{st.Reason + ": " + st.Message}
		}
		return nil
	})
	return sc.Gate()
}

type statusError struct{ reason string }

func (e *statusError) Error() string { return "policy not held: " + e.reason }

// invokeOn calls tool with args on the upstream, as the sidecar's MCP proxy does once the gate
// invokes.
func invokeOn(t *testing.T, up *mcptest.Server, tool, args string) sink.Invoker {
	return func(ctx context.Context, _ string) (sink.InvokeResult, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "sidecar-invoker", Version: "v1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			return sink.InvokeResult{Outcome: sink.OutcomeNotSent}, err
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, err
		}
		b, _ := json.Marshal(res)
		return sink.InvokeResult{Result: b, Outcome: sink.OutcomeExecuted}, nil
	}
}
