package sidecar

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/tracing/tracingtest"
)

type traceparentRT string

func (tp traceparentRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", string(tp))
	return http.DefaultTransport.RoundTrip(r)
}

// TestSidecarTrace: a permitted call through the sidecar is one trace of the sidecar's own whose
// root, the proxy's span, links the agent's traceparent: the sink's span under it, under that the journal commit with the
// one review client span of the Permit (whose POST carries its span's traceparent to the
// service), and the upstream call. The outcome's Report, sent by the outbox with a context of
// its own, is not in the trace. No attribute carries the argument value.
func TestSidecarTrace(t *testing.T) {
	const (
		traceID = "5bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "10f067aa0ba902b7"
		secret  = "acct-argument-value-8e21"
	)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	f := &fixture{t: t, stub: newStub(t, bankModes), up: up}
	f.stub.spec, f.stub.epoch = testPolicy(t, up.URL), 1
	f.policy = compiled(t, f.stub.spec, 1)
	if f.store, err = boltstore.Open(filepath.Join(t.TempDir(), JournalFile), boltstore.Options{Verifier: f.stub.signer.Verifier()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.store.Close() })
	opts := f.options()
	opts.Receipts = nil
	opts.TracerProvider = tp
	opts.Review.TracerProvider = tp
	if f.gate, err = NewGate(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.gate.Close)
	p, err := mcpproxy.New(mcpproxy.Config{Server: "payments", URL: up.URL, Gate: f.gate, Agent: testAgent,
		Credential: func(context.Context) (string, error) { return upstreamTk, nil }, CallTimeout: 5 * time.Second, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: traceparentRT("00-" + traceID + "-" + parent + "-01")}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res := call(t, cs, "send_payment", `{"amount":"10.00","to":"`+secret+`"}`)
	if res.IsError || up.Count("send_payment") != 1 {
		t.Fatalf("call: %s %s", text(res), efCode(res))
	}
	f.waitReports(1)
	waitFor(t, func() bool { return f.gate.Outbox().Pending() == 0 })

	byName := map[string][]sdktrace.ReadOnlySpan{}
	reports := 0
	var gateTrace string
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call send_payment" && s.SpanKind() == trace.SpanKindServer {
			gateTrace = s.SpanContext().TraceID().String()
		}
	}
	if gateTrace == "" || gateTrace == traceID {
		t.Fatalf("the call's trace is %q, want the sidecar's own", gateTrace)
	}
	for _, s := range rec.Ended() {
		if s.Name() == "actgate.review.request" && tracingtest.Attr(s, "actgate.review.operation") == "Report" {
			reports++ // the outcome's report, sent after the call under its own deadline: a trace of its own
			continue
		}
		// The conventions name the agent's call (server) and the upstream call (client) alike.
		byName[s.Name()+" "+s.SpanKind().String()] = append(byName[s.Name()+" "+s.SpanKind().String()], s)
		if s.SpanContext().TraceID().String() != gateTrace {
			t.Errorf("span %s in another trace", s.Name())
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %s attribute %s carries the argument value", s.Name(), kv.Key)
			}
		}
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans %s, want 1", len(byName[name]), name)
		}
		return byName[name][0]
	}
	proxy, handle, upstream := one("tools/call send_payment server"), one("actgate.sink.handle internal"), one("tools/call send_payment client")
	commit := one("actgate.journal.commit internal")
	for _, sp := range []sdktrace.ReadOnlySpan{proxy, upstream} {
		if tracingtest.Attr(sp, "mcp.method.name") != "tools/call" || tracingtest.Attr(sp, "gen_ai.tool.name") != "send_payment" ||
			tracingtest.Attr(sp, "gen_ai.operation.name") != "execute_tool" || tracingtest.Attr(sp, "mcp.protocol.version") == "" {
			t.Errorf("span %s (%s) lacks the MCP semantic conventions' attributes: %v", sp.Name(), sp.SpanKind(), sp.Attributes())
		}
	}
	if proxy.Parent().IsValid() || handle.Parent().SpanID() != proxy.SpanContext().SpanID() ||
		upstream.Parent().SpanID() != handle.SpanContext().SpanID() {
		t.Errorf("spans are not nested proxy > sink > upstream under a root")
	}
	if l := proxy.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != traceID || l[0].SpanContext.SpanID().String() != parent {
		t.Errorf("proxy span links %v, want one to the agent's span", l)
	}
	if reports != 1 {
		t.Errorf("%d Report spans, want 1", reports)
	}
	reviews := byName["actgate.review.request client"]
	if len(reviews) != 1 {
		t.Fatalf("%d review client spans, want 1 (the Permit)", len(reviews))
	}
	f.stub.mu.Lock()
	sent := append([]string(nil), f.stub.traceparents...)
	f.stub.mu.Unlock()
	if len(sent) != 2 || strings.Contains(sent[1], gateTrace) {
		t.Fatalf("the service received traceparents %q, want the Permit's and the Report's own", sent)
	}
	if commit.Parent().SpanID() != handle.SpanContext().SpanID() {
		t.Errorf("the journal commit is not a child of the sink span")
	}
	for i, r := range reviews {
		if r.Parent().SpanID() != commit.SpanContext().SpanID() {
			t.Errorf("review span %d is not a child of the journal commit", i)
		}
		if want := "00-" + gateTrace + "-" + r.SpanContext().SpanID().String() + "-01"; sent[i] != want {
			t.Errorf("review %d sent traceparent %q, want %q", i, sent[i], want)
		}
	}
	t.Logf("span tree:\n%s", tracingtest.SpanTree(rec.Ended()))
	for k, want := range map[string]string{"actgate.tool": "send_payment", "actgate.server": "payments", "actgate.allowed": "true", "actgate.invoked": "true"} {
		if got := tracingtest.Attr(handle, k); got != want {
			t.Errorf("sink span %s = %q, want %q", k, got, want)
		}
	}
	if tracingtest.Attr(handle, "actgate.act.id") == "" || tracingtest.Attr(handle, "actgate.action_digest") == "" {
		t.Errorf("sink span attributes %v", handle.Attributes())
	}
}
