package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/standalone"
)

// demoPolicy is the policy the demo runs: the policy of testdata/gate/actgate.yaml (a test
// keeps the two equal), with the upstream's URL filled in.
const demoPolicy = `policy:
  podSelector: {}
  servers:
  - name: finance
    url: %q
  rules:
  - name: balances
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
  - name: payments
    tools: [send_payment]
    consequenceClass: FINANCIAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    arguments:
    - name: amount-cap
      expression: double(args.amount) <= 10000.0
      message: an agent may not pay more than 10000 at once
    alternatives:
    - label: Pay at most 100 now
      reasoning: Caps the amount while the rest is checked.
      args:
        amount: 100
  - name: email
    tools: [email_send]
    consequenceClass: COMMUNICATION
    evidence:
      role: PolicyPermit
    provenance:
    - sources: [retrieval, tool_output]
      action: Deny
`

// demoConfig is the whole configuration of the demo's gate.
func demoConfig(upstreamURL, dataDir, tokenFile string) []byte {
	return fmt.Appendf(nil, `listen: 127.0.0.1:0
dataDir: %q
sinkID: actgate-demo
agent:
  name: demo-agent
  trustDeclaredProvenance: true
principals:
- name: alice
upstreams:
- server: finance
  bearerTokenFile: %q
callTimeout: 30s
`+demoPolicy, dataDir, tokenFile, upstreamURL)
}

func newDemoCmd(s streams) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch the gate allow, deny and escalate a scripted agent's calls (loopback only, a few seconds)",
		Long: `Start a sample MCP server (get_balance, send_payment, email_send) and the gate on a
temporary data dir, then drive a scripted agent — a real MCP client — through them: an allowed
read, an injected email refused for its provenance, an over-the-cap payment refused by policy, a
payment escalated to a binding moment, the principal's resolution, the authorised call running
once, and replays that do not run it again. Each step prints what the agent saw and the
upstream's own invocation counter. Nothing leaves the loopback interface; everything is removed
on exit. Exit status 0 means every step behaved as described.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := logr.Discard()
			if verbose {
				log = newLogger(s.err, true)
			}
			if err := runDemo(cmd.Context(), s.out, log); err != nil {
				return fail(exitRejected, "DEMO_FAILED "+err.Error())
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the gate's log on stderr")
	return cmd
}

// demoUpstream is the sample MCP server: a tiny bank with a balance.
type demoUpstream struct {
	*mcptest.Server
	mu      sync.Mutex
	balance int64
}

const demoUpstreamToken = "demo-upstream-token"

func startDemoUpstream() (*demoUpstream, error) {
	d := &demoUpstream{balance: 1000}
	tools := []mcptest.Tool{
		{Name: "get_balance", Description: "Read the balance of an account.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"account":{"type":"string"}}}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
				d.mu.Lock()
				defer d.mu.Unlock()
				return mcptest.Text(fmt.Sprintf(`{"account":"main","balance":%d}`, d.balance)), nil
			}},
		{Name: "send_payment", Description: "Pay an amount to a payee.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`),
			Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
				var a struct {
					To     string `json:"to"`
					Amount int64  `json:"amount"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return mcptest.ErrorText("bad arguments"), nil
				}
				d.mu.Lock()
				defer d.mu.Unlock()
				if a.Amount > d.balance {
					return mcptest.ErrorText("insufficient funds"), nil
				}
				d.balance -= a.Amount
				return mcptest.Text(fmt.Sprintf(`{"paid":%d,"to":%q,"balance":%d}`, a.Amount, a.To, d.balance)), nil
			}},
		{Name: "email_send", Description: "Send an email.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"}},"required":["to"]}`),
			Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
				return mcptest.Text(`{"sent":true}`), nil
			}},
	}
	// The upstream only talks to the holder of its credential: the gate.
	auth := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+demoUpstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		}
		return false
	}
	s, err := mcptest.Start(tools, mcptest.Options{Name: "finance", Intercept: auth})
	if err != nil {
		return nil, err
	}
	d.Server = s
	return d, nil
}

// demoRun is the state of one demo: where to print and what to check.
type demoRun struct {
	out  io.Writer
	ctx  context.Context
	up   *demoUpstream
	step int
	errs []error
	// replays counts the answers the demo's agents got that the gate marked a journal replay
	// (its Actgate-Replayed header; the result is the one first given); lastReplayed says
	// whether the last call's answer was one.
	replays      atomic.Int64
	lastReplayed bool
}

func (d *demoRun) header(title string) {
	d.step++
	fmt.Fprintf(d.out, "\n[%d] %s\n", d.step, title)
}

func (d *demoRun) line(format string, args ...any) {
	fmt.Fprintf(d.out, "    %s\n", fmt.Sprintf(format, args...))
}

// expectCountSince checks and prints how many times the upstream ran tool since it had run it
// base times.
func (d *demoRun) expectCountSince(tool string, base, want int) {
	got := d.up.Count(tool) - base
	d.line("upstream's own invocation count for %s in this act: %d", tool, got)
	if got != want {
		d.errs = append(d.errs, fmt.Errorf("step %d: upstream ran %s %d times in the act, want %d", d.step, tool, got, want))
	}
}

// expectCount checks and prints the upstream's own invocation counter for tool.
func (d *demoRun) expectCount(tool string, want int) {
	got := d.up.Count(tool)
	d.line("upstream's own invocation count for %s: %d", tool, got)
	if got != want {
		d.errs = append(d.errs, fmt.Errorf("step %d: upstream ran %s %d times, want %d", d.step, tool, got, want))
	}
}

func (d *demoRun) check(ok bool, format string, args ...any) {
	if !ok {
		d.errs = append(d.errs, fmt.Errorf("step %d: %s", d.step, fmt.Sprintf(format, args...)))
	}
}

// call makes one tools/call as the agent and prints what the agent got.
func (d *demoRun) call(cs *mcp.ClientSession, tool, args, provenance string) *mcp.CallToolResult {
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
	if provenance != "" {
		p.Meta = mcp.Meta{mcpproxy.MetaProvenance: provenance}
	}
	d.line("agent → tools/call %s %s", tool, args)
	marked := d.replays.Load()
	res, err := cs.CallTool(d.ctx, p)
	d.lastReplayed = d.replays.Load() > marked
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("step %d: tools/call %s: %w", d.step, tool, err))
		return &mcp.CallToolResult{IsError: true}
	}
	code, _ := res.Meta[mcpproxy.MetaEFCode].(string)
	switch {
	case code != "":
		var sc struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &sc)
		d.line("gate  ← refused, not invoked: %s: %s", code, sc.Error.Message)
	case res.IsError:
		d.line("gate  ← the upstream answered with an error: %s", firstText(res))
	default:
		if d.lastReplayed {
			d.line("gate  ← the recorded result of the call that already ran (replayed, not invoked; header %s: true): %s", mcpproxy.HeaderReplayed, firstText(res))
		} else {
			d.line("gate  ← ran: %s", firstText(res))
		}
	}
	return res
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

func efOf(r *mcp.CallToolResult) string {
	s, _ := r.Meta[mcpproxy.MetaEFCode].(string)
	return s
}

// runDemo runs the whole demo; it returns an error when a step did not behave as described.
func runDemo(ctx context.Context, out io.Writer, log logr.Logger) (err error) {
	dir, err := os.MkdirTemp("", "actgate-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	up, err := startDemoUpstream()
	if err != nil {
		return err
	}
	defer up.Close()
	tokenFile := filepath.Join(dir, "finance.token")
	if err := os.WriteFile(tokenFile, []byte(demoUpstreamToken+"\n"), 0o600); err != nil {
		return err
	}
	dataDir := filepath.Join(dir, "data")
	cfg, err := gateconfig.Parse(demoConfig(up.URL, dataDir, tokenFile), dir)
	if err != nil {
		return fmt.Errorf("demo configuration: %w", err)
	}
	rt, err := standalone.Open(ctx, cfg, log, standalone.Hooks{})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = rt.Close()
		return err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- rt.Serve(sctx, ln, io.Discard) }()
	defer func() {
		stop()
		if serr := <-served; serr != nil && err == nil {
			err = serr
		}
	}()
	base := "http://" + ln.Addr().String()
	endpoint := base + mcpproxy.Path("finance")

	fmt.Fprintln(out, "actgate demo: a scripted agent, a sample MCP server and the gate, all on loopback.")
	fmt.Fprintf(out, "  upstream  %s  (tools get_balance, send_payment, email_send; it requires the gate's credential)\n", up.URL)
	fmt.Fprintf(out, "  gate      %s  (the agent's MCP endpoint; policy: testdata/gate/actgate.yaml)\n", endpoint)

	d := &demoRun{out: out, ctx: ctx, up: up}
	agent, err := demoAgent(ctx, endpoint, cfg, &d.replays)
	if err != nil {
		return err
	}
	defer agent.Close()

	d.header("DISCOVER  tools/list through the gate")
	tl, err := agent.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range tl.Tools {
		n := t.Name
		if flag, _ := t.Meta[mcpproxy.AnnotationEmitsBindingMoment].(bool); flag {
			n += " (emits_binding_moment)"
		}
		names = append(names, n)
	}
	d.line("%s", strings.Join(names, ", "))
	d.check(len(tl.Tools) == 4 && tl.Tools[3].Name == sink.RequestBindingMomentTool, "tools/list: want the 3 upstream tools and the virtual tool")

	d.header("ALLOW     an informational read runs at once")
	r := d.call(agent, "get_balance", `{"account":"main"}`, "user")
	d.check(!r.IsError, "get_balance refused")
	d.expectCount("get_balance", 1)

	d.header("DENY      an email whose recipient came from a retrieved web page (tool-use-binding §12 INJECTED_EMAIL_SEND)")
	r = d.call(agent, "email_send", `{"to":"attacker@evil.example","subject":"statement"}`, "retrieval")
	d.check(efOf(r) == string(ef.EFInstructionProvenanceFailure), "email_send: want %s, got %q", ef.EFInstructionProvenanceFailure, efOf(r))
	d.expectCount("email_send", 0)

	d.header("DENY      a payment over the policy's cap (a CEL argument constraint)")
	r = d.call(agent, "send_payment", `{"to":"bob","amount":50000}`, "user")
	d.check(efOf(r) == string(ef.EFPolicyDenied), "send_payment 50000: want %s, got %q", ef.EFPolicyDenied, efOf(r))
	d.expectCount("send_payment", 0)

	d.header("ESCALATE  a payment needs alice: the gate answers with a binding moment")
	r = d.call(agent, "send_payment", `{"to":"bob","amount":250}`, "user")
	d.check(efOf(r) == string(ef.EFEscalationRequired), "send_payment 250: want %s, got %q", ef.EFEscalationRequired, efOf(r))
	momentID, _ := r.Meta[mcpproxy.MetaMomentID].(string)
	digest, _ := r.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	d.line("the result carries binding moment %s (envelope %s) for alice, as its top-level", momentID, digest)
	d.line("binding_moment member and as plain text for clients that do not render envelopes")
	d.check(momentID != "" && digest != "", "no binding moment in the escalation")
	d.expectCount("send_payment", 0)

	d.header("RESOLVE   alice lists her binding moments and chooses option 1 (the local API, as `actgate moments` / `actgate resolve`)")
	tok, err := standalone.ReadPrivate(cfg.PrincipalTokenPath("alice"))
	if err != nil {
		return err
	}
	api := &apiClient{Server: base, Principal: "alice", Token: strings.TrimSpace(string(tok)), HTTP: &http.Client{}}
	ms, err := api.Moments(ctx, false)
	if err != nil {
		return err
	}
	d.check(len(ms) == 1 && ms[0].ID == momentID, "alice sees %d moments, want the escalated one", len(ms))
	if len(ms) == 0 {
		return errors.Join(d.errs...)
	}
	var rendered strings.Builder
	if err := printMoment(&rendered, ms[0]); err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimRight(rendered.String(), "\n"), "\n") {
		d.line("│ %s", l)
	}
	res, err := api.Resolve(ctx, momentID, []byte(fmt.Sprintf(`{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, ms[0].EnvelopeDigest)))
	if err != nil {
		return err
	}
	d.line("alice → option 1: authority %s issued for exactly send_payment {\"amount\":250,\"to\":\"bob\"}", res.AuthorityID)
	d.check(res.AuthorityID != "" && !res.Pending, "resolution did not issue authority: %+v", res)

	d.header("ALLOW     the agent makes exactly the authorised call: it runs once")
	ran := d.call(agent, "send_payment", `{"to":"bob","amount":250}`, "user")
	d.check(!ran.IsError && !d.lastReplayed, "the authorised payment was refused")
	d.expectCount("send_payment", 1)

	d.header("REPLAY    the agent sends the same call again in its session")
	r = d.call(agent, "send_payment", `{"to":"bob","amount":250}`, "user")
	d.check(d.lastReplayed, "the retry was not answered from the journal")
	d.check(firstText(r) == firstText(ran) && r.IsError == ran.IsError, "the retry's result is not the one the agent first read")
	d.expectCount("send_payment", 1)

	d.header("REPLAY    the same call from another agent session")
	other, err := demoAgent(ctx, endpoint, cfg, &d.replays)
	if err != nil {
		return err
	}
	defer other.Close()
	r = d.call(other, "send_payment", `{"to":"bob","amount":250}`, "user")
	d.check(efOf(r) == string(ef.EFEscalationRequired), "replay from another session: want %s, got %q", ef.EFEscalationRequired, efOf(r))
	d.line("the authority was single-use: a new payment needs a new binding moment")
	d.expectCount("send_payment", 1)

	if err := d.hostLoopAct(base, cfg, api); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nUpstream invocation counts: get_balance %d, send_payment %d, email_send %d.\n",
		up.Count("get_balance"), up.Count("send_payment"), up.Count("email_send"))
	noCred := true
	for _, a := range up.Authorizations() {
		if a != "Bearer "+demoUpstreamToken {
			noCred = false
		}
	}
	d.check(noCred, "the upstream saw a request without the gate's credential")
	if len(d.errs) > 0 {
		return errors.Join(d.errs...)
	}
	fmt.Fprintln(out, "Every consequential call ran only as authorised, and only once; the MCP agent never held the upstream's credential.")
	return nil
}

// demoAgent is the scripted agent's MCP client. It presents the token the gate created for it
// (agent.tokenFile's default, DATA_DIR/agents/demo-agent.token), as an agent's MCP client
// configured for the gate does, and counts in replays the answers the gate marked a journal
// replay: the MCP SDK's session shows no response headers, its HTTP client does.
func demoAgent(ctx context.Context, endpoint string, cfg *gateconfig.Config, replays *atomic.Int64) (*mcp.ClientSession, error) {
	ac, err := agentClient(cfg, cfg.Agent.Name)
	if err != nil {
		return nil, err
	}
	hc := *ac
	hc.Transport = wire.ReplayCounter{Base: ac.Transport, N: replays}
	c := mcp.NewClient(&mcp.Implementation{Name: "demo-agent", Version: "v1"}, nil)
	// The demo shows sessions (a resolution does not authorise another session's call): it
	// speaks the stateful revision.
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &hc, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// agentClient is an HTTP client presenting agent's token (Authorization: Bearer) on every
// request; http.DefaultClient with agent.authentication "none".
func agentClient(cfg *gateconfig.Config, agent string) (*http.Client, error) {
	if cfg.Agent.Authentication == gateconfig.AuthNone {
		return http.DefaultClient, nil
	}
	tok, err := fileutil.ReadToken(cfg.AgentTokenPath(agent))
	if err != nil {
		return nil, fmt.Errorf("the agent's token: %w", err)
	}
	return &http.Client{Transport: bearerTransport{token: tok, base: http.DefaultTransport}}, nil
}

// bearerTransport sets Authorization: Bearer on every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}
