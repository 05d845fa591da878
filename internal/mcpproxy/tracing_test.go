package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tracing"
	"github.com/actgate/actgate/internal/tracing/tracingtest"
	"github.com/actgate/actgate/test/testutil"
)

// The agent's W3C trace context.
const (
	agentTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpanID     = "00f067aa0ba902b7"
	agentParent     = "00-" + agentTraceID + "-" + agentSpanID + "-01"
	secretArgValue  = "argument-value-never-in-a-span-5c1d"
	upstreamCallKey = "tools/call"
)

// seenCall is what the upstream received with one tools/call.
type seenCall struct {
	header   string // traceparent header
	metaPart string // params._meta.traceparent
}

// tracedFixture is the proxy and the sink sharing tp, in front of a real upstream behind a
// recording front server (what the upstream receives on the wire).
type tracedFixture struct {
	endpoint string
	mu       sync.Mutex
	seen     []seenCall
}

func newTracedFixture(t *testing.T, tp trace.TracerProvider, sdkOnly bool) *tracedFixture {
	t.Helper()
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	target, _ := url.Parse(up.URL)
	f := &tracedFixture{}
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == upstreamCallKey {
			tp, _ := msg.Params.Meta[tracing.MetaTraceparent].(string)
			f.mu.Lock()
			f.seen = append(f.seen, seenCall{header: r.Header.Get("traceparent"), metaPart: tp})
			f.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	raw, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := policy.ParseSpec(bytes.ReplaceAll(raw, []byte("{{BANK}}"), []byte(front.URL)))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := policy.Compile("default/proxy-test", spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, signer := testutil.SeededStore(t, "mcpproxy tracing tests")
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sink.New(sink.Options{SinkID: "proxy-test", Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st,
		Signer: signer, IDs: ids, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	_, _, f.endpoint = serveProxy(t, Config{Server: "bank", URL: front.URL, Gate: g, Agent: agentName, CallTimeout: 5 * time.Second, TracerProvider: tp, sdkOnly: sdkOnly})
	return f
}

func (f *tracedFixture) calls() []seenCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenCall(nil), f.seen...)
}

// headerTransport sets traceparent on every request of the agent.
type headerTransport struct{ traceparent string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.traceparent != "" {
		r.Header.Set("traceparent", h.traceparent)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func tracedAgent(t *testing.T, endpoint, traceparent string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: headerTransport{traceparent}},
	}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callSpans are the gate's span of the agent's tools/call of tool (server) and of its upstream
// call (client), which the MCP semantic conventions name alike: "tools/call TOOL".
func callSpans(t *testing.T, spans []sdktrace.ReadOnlySpan, tool string) (agent, upstream sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		if s.Name() != tracing.ToolCallSpanName(tool) {
			continue
		}
		switch s.SpanKind() {
		case trace.SpanKindServer:
			agent = s
		case trace.SpanKindClient:
			upstream = s
		}
	}
	if agent == nil || upstream == nil {
		t.Fatalf("no server and client span named %q: %s", tracing.ToolCallSpanName(tool), tracingtest.SpanTree(spans))
	}
	return agent, upstream
}

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			if found != nil {
				t.Fatalf("two spans named %s", name)
			}
			found = s
		}
	}
	if found == nil {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("no span %s among %v", name, names)
	}
	return found
}

// TestTraceLinksAgentContextToUpstream: a machine-permitted call with the agent's traceparent
// header is one trace of the gate's own — the proxy's span its root, linked to the agent's
// span, the sink's steps children of the sink's span — and the upstream receives the trace
// context of the upstream call's span, in the traceparent header and in params._meta. No
// attribute carries the argument value.
func TestTraceLinksAgentContextToUpstream(t *testing.T) {
	for _, sdkOnly := range []bool{false, true} {
		name := "direct"
		if sdkOnly {
			name = "sdk"
		}
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			f := newTracedFixture(t, tp, sdkOnly)
			cs := tracedAgent(t, f.endpoint, agentParent)
			res := call(t, cs, "ticket_create", `{"title":"`+secretArgValue+`"}`, nil)
			if res.IsError || !strings.Contains(text(res), "ticket created") {
				t.Fatalf("call not allowed: %s %s", text(res), efCode(res))
			}
			spans := rec.Ended()
			proxy, upstream := callSpans(t, spans, "ticket_create")
			handle := spanNamed(t, spans, "actgate.sink.handle")
			gateTrace := proxy.SpanContext().TraceID().String()
			// The MCP semantic conventions' attributes, on both sides of the gate.
			for _, sp := range []sdktrace.ReadOnlySpan{proxy, upstream} {
				for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "ticket_create",
					"gen_ai.operation.name": "execute_tool", "network.transport": "tcp", "mcp.protocol.version": "2025-11-25"} {
					if got := tracingtest.Attr(sp, k); got != want {
						t.Errorf("%s span %s = %q, want %q", sp.SpanKind(), k, got, want)
					}
				}
				if tracingtest.Attr(sp, "error.type") != "" {
					t.Errorf("%s span of an executed call has error.type %q", sp.SpanKind(), tracingtest.Attr(sp, "error.type"))
				}
			}
			if tracingtest.Attr(upstream, "server.address") == "" || tracingtest.Attr(upstream, "server.port") == "" {
				t.Errorf("upstream span lacks server.address and server.port: %v", upstream.Attributes())
			}
			for _, s := range spans {
				if got := s.SpanContext().TraceID().String(); got != gateTrace || got == agentTraceID {
					t.Errorf("span %s has trace %s, want the gate's %s (not the agent's)", s.Name(), got, gateTrace)
				}
				for _, kv := range s.Attributes() {
					if strings.Contains(kv.Value.String(), secretArgValue) {
						t.Errorf("span %s attribute %s carries the argument value", s.Name(), kv.Key)
					}
				}
			}
			if p := proxy.Parent(); p.IsValid() {
				t.Errorf("proxy span's parent = %v, want none (a root linked to the agent's span)", p.SpanID())
			}
			expectAgentLink(t, proxy, agentTraceID, agentSpanID)
			if handle.Parent().SpanID() != proxy.SpanContext().SpanID() {
				t.Errorf("sink span is not a child of the proxy span")
			}
			for _, n := range []string{"actgate.policy.evaluate", "actgate.journal.commit", "actgate.journal.record"} {
				if s := spanNamed(t, spans, n); s.Parent().SpanID() != handle.SpanContext().SpanID() {
					t.Errorf("%s is not a child of the sink span", n)
				}
			}
			if upstream.Parent().SpanID() != handle.SpanContext().SpanID() {
				t.Errorf("the upstream call's span is not a child of the sink span")
			}
			actID := tracingtest.Attr(handle, "actgate.act.id")
			if actID == "" || tracingtest.Attr(handle, "actgate.tool") != "ticket_create" || tracingtest.Attr(handle, "actgate.server") != "bank" ||
				tracingtest.Attr(handle, "actgate.decision") != string(sink.PolicyPermit) || tracingtest.Attr(handle, "actgate.action_digest") == "" ||
				tracingtest.Attr(handle, "actgate.state") == "" {
				t.Errorf("sink span attributes: %v", handle.Attributes())
			}
			if tracingtest.Attr(proxy, "actgate.act.id") != actID || tracingtest.Attr(proxy, "actgate.arguments_digest") == "" {
				t.Errorf("proxy span attributes: %v", proxy.Attributes())
			}
			if tracingtest.Attr(upstream, "actgate.outcome") == "" || tracingtest.Attr(upstream, "actgate.operation_id") == "" {
				t.Errorf("upstream span attributes: %v", upstream.Attributes())
			}
			want := "00-" + gateTrace + "-" + upstream.SpanContext().SpanID().String() + "-01"
			calls := f.calls()
			if len(calls) != 1 {
				t.Fatalf("upstream received %d tools/calls, want 1", len(calls))
			}
			if calls[0].header != want || calls[0].metaPart != want {
				t.Errorf("upstream received traceparent header %q, _meta %q; want %q", calls[0].header, calls[0].metaPart, want)
			}
		})
	}
}

// TestTraceLinksMetaContext: a traceparent only in params._meta (the MCP convention) is
// linked too.
func TestTraceLinksMetaContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newTracedFixture(t, tp, false)
	cs := tracedAgent(t, f.endpoint, "")
	res := call(t, cs, "get_balance", `{}`, mcp.Meta{tracing.MetaTraceparent: agentParent})
	if res.IsError {
		t.Fatalf("call refused: %s", text(res))
	}
	proxy, _ := callSpans(t, rec.Ended(), "get_balance")
	if proxy.Parent().IsValid() {
		t.Errorf("proxy span %v continued the _meta context", proxy.SpanContext())
	}
	expectAgentLink(t, proxy, agentTraceID, agentSpanID)
	if c := f.calls(); len(c) != 1 || !strings.Contains(c[0].header, proxy.SpanContext().TraceID().String()) {
		t.Errorf("upstream received %+v", c)
	}
}

// expectAgentLink fails unless span has exactly one link, to the agent's span traceID/spanID.
func expectAgentLink(t *testing.T, span sdktrace.ReadOnlySpan, traceID, spanID string) {
	t.Helper()
	links := span.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID().String() != traceID || links[0].SpanContext.SpanID().String() != spanID {
		t.Errorf("span %s links %+v, want one link to the agent's span %s/%s", span.Name(), links, traceID, spanID)
		return
	}
	if got := links[0].Attributes; len(got) != 1 || got[0].Key != tracing.AttrLink || got[0].Value.AsString() != tracing.LinkAgent {
		t.Errorf("the link's attributes are %v", got)
	}
}

// TestTraceAgentCannotSwitchOffOrChooseTheTrace: with tracing on at ratio 1 (the sampler
// tracing.Setup installs), every call that dispatches is recorded in a trace of the gate's
// own, whatever traceparent the agent sends: one whose sampled flag is 0 (in the header or in
// params._meta) does not switch the recording off, and a trace id of the agent's choosing does
// not file the call under it. The agent's context is a link of the call's span; the upstream
// receives the gate's trace context.
func TestTraceAgentCannotSwitchOffOrChooseTheTrace(t *testing.T) {
	const (
		unsampled = "00-" + agentTraceID + "-" + agentSpanID + "-00"
		chosen    = "00-" + agentTraceID + "-" + agentSpanID + "-01"
	)
	for _, tc := range []struct {
		name    string
		header  string
		meta    mcp.Meta
		sdkOnly bool
	}{
		{"header unsampled", unsampled, nil, false},
		{"header unsampled sdk", unsampled, nil, true},
		{"meta unsampled", "", mcp.Meta{tracing.MetaTraceparent: unsampled}, false},
		{"meta unsampled sdk", "", mcp.Meta{tracing.MetaTraceparent: unsampled}, true},
		{"header sampled, meta unsampled", chosen, mcp.Meta{tracing.MetaTraceparent: unsampled}, false},
		{"chosen trace id", chosen, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(tracing.Sampler(1)))
			f := newTracedFixture(t, tp, tc.sdkOnly)
			cs := tracedAgent(t, f.endpoint, tc.header)
			res := call(t, cs, "ticket_create", `{"title":"traced"}`, tc.meta)
			if res.IsError || !strings.Contains(text(res), "ticket created") {
				t.Fatalf("call not allowed: %s %s", text(res), efCode(res))
			}
			spans := rec.Ended()
			proxy, upstream := callSpans(t, spans, "ticket_create")
			handle := spanNamed(t, spans, "actgate.sink.handle")
			spanNamed(t, spans, "actgate.journal.commit")
			gateTrace := proxy.SpanContext().TraceID().String()
			if gateTrace == agentTraceID || !proxy.SpanContext().IsSampled() || proxy.Parent().IsValid() {
				t.Fatalf("the call's span is in trace %s (sampled %v, parent %v); want a sampled root of the gate's own trace",
					gateTrace, proxy.SpanContext().IsSampled(), proxy.Parent())
			}
			for _, s := range spans {
				if s.SpanContext().TraceID().String() != gateTrace {
					t.Errorf("span %s is in trace %s, not the call's %s", s.Name(), s.SpanContext().TraceID(), gateTrace)
				}
			}
			if handle.Parent().SpanID() != proxy.SpanContext().SpanID() {
				t.Errorf("sink span is not a child of the proxy span")
			}
			expectAgentLink(t, proxy, agentTraceID, agentSpanID)
			want := "00-" + gateTrace + "-" + upstream.SpanContext().SpanID().String() + "-01"
			if c := f.calls(); len(c) != 1 || c[0].header != want || c[0].metaPart != want {
				t.Errorf("upstream received %+v, want traceparent %s", c, want)
			}
		})
	}
}

// TestTracingOffPropagatesNothing: with no TracerProvider nothing is recorded, and the agent's
// trace context is not forwarded to the upstream either.
func TestTracingOffPropagatesNothing(t *testing.T) {
	f := newTracedFixture(t, nil, false)
	cs := tracedAgent(t, f.endpoint, agentParent)
	res := call(t, cs, "ticket_create", `{"title":"x"}`, mcp.Meta{tracing.MetaTraceparent: agentParent})
	if res.IsError {
		t.Fatalf("call refused: %s", text(res))
	}
	c := f.calls()
	if len(c) != 1 {
		t.Fatalf("upstream received %d calls, want 1", len(c))
	}
	if c[0].header != "" || c[0].metaPart != "" {
		t.Errorf("tracing off, yet the upstream received traceparent %q, _meta %q", c[0].header, c[0].metaPart)
	}
}

// TestTraceBoundsToolNames: a tool name an agent makes long or unprintable reaches span
// attributes bounded (logfield.Bound), as it reaches logs.
func TestTraceBoundsToolNames(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newTracedFixture(t, tp, false)
	cs := tracedAgent(t, f.endpoint, agentParent)
	long := strings.Repeat("x", 4096) + "\x00"
	res := call(t, cs, long, `{}`, nil)
	if !res.IsError || efCode(res) == "" {
		t.Fatalf("an unknown tool was not refused: %s", text(res))
	}
	for _, s := range rec.Ended() {
		if v := tracingtest.Attr(s, "actgate.tool"); len(v) > 128 || strings.Contains(v, "\x00") {
			t.Errorf("span %s carries the tool name unbounded (%d bytes)", s.Name(), len(v))
		}
	}
	if len(f.calls()) != 0 {
		t.Fatal("the upstream was called")
	}
}

// TestTraceNamesOnlyKnownTools: a refused call's span carries error.type (its EF code), and a
// tool the policy does not know does not name the span (an agent could otherwise grow the set
// of span names without bound); no upstream span exists for either.
func TestTraceNamesOnlyKnownTools(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newTracedFixture(t, tp, false)
	cs := tracedAgent(t, f.endpoint, "")
	tool := "no_such_tool_" + strings.Repeat("x", 20)
	if res := call(t, cs, tool, `{}`, nil); !res.IsError || efCode(res) != "EF_UNKNOWN_TOOL" {
		t.Fatalf("unknown tool: %s %s", text(res), efCode(res))
	}
	var server []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.Contains(s.Name(), tool) {
			t.Errorf("span %q names the unknown tool", s.Name())
		}
		if s.SpanKind() == trace.SpanKindClient && strings.HasPrefix(s.Name(), "tools/call") {
			t.Errorf("a refused call has an upstream span %q", s.Name())
		}
		if s.Name() == tracing.MethodToolsCall && s.SpanKind() == trace.SpanKindServer {
			server = append(server, s)
		}
	}
	if len(server) != 1 || tracingtest.Attr(server[0], "error.type") != "EF_UNKNOWN_TOOL" || tracingtest.Attr(server[0], "mcp.method.name") != "tools/call" {
		t.Fatalf("want one server span %q with error.type EF_UNKNOWN_TOOL: %s", tracing.MethodToolsCall, tracingtest.SpanTree(rec.Ended()))
	}
}
