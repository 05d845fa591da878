package tracing

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"off", Config{}, true},
		{"http", Config{Endpoint: "http://127.0.0.1:4318/v1/traces", SampleRatio: 1}, true},
		{"https zero ratio", Config{Endpoint: "https://collector.example/v1/traces"}, true},
		{"relative", Config{Endpoint: "/v1/traces", SampleRatio: 1}, false},
		{"grpc scheme", Config{Endpoint: "grpc://collector:4317", SampleRatio: 1}, false},
		{"user info", Config{Endpoint: "http://user:pw@collector:4318/v1/traces", SampleRatio: 1}, false},
		{"fragment", Config{Endpoint: "http://collector:4318/v1/traces#x", SampleRatio: 1}, false},
		{"query", Config{Endpoint: "http://collector:4318/v1/traces?x=1", SampleRatio: 1}, false},
		{"empty query", Config{Endpoint: "http://collector:4318/v1/traces?", SampleRatio: 1}, false},
		{"opaque", Config{Endpoint: "http:collector", SampleRatio: 1}, false},
		{"no host", Config{Endpoint: "http:///v1/traces", SampleRatio: 1}, false},
		{"ratio above 1", Config{Endpoint: "http://c:4318/v1/traces", SampleRatio: 1.5}, false},
		{"negative ratio", Config{Endpoint: "http://c:4318/v1/traces", SampleRatio: -0.1}, false},
		{"NaN ratio", Config{Endpoint: "http://c:4318/v1/traces", SampleRatio: math.NaN()}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
	if tp, shutdown, err := Setup(Config{}); tp != nil || err != nil || shutdown(context.Background()) != nil {
		t.Errorf("Setup(off) = %v, %v", tp, err)
	}
	if _, _, err := Setup(Config{Endpoint: "ftp://x"}); err == nil {
		t.Error("Setup accepted an ftp endpoint")
	}
}

// TestExtractRefusesMalformedContext: a malformed or all-zero traceparent, in a header or in
// _meta, or one of the wrong type, continues nothing.
func TestExtractRefusesMalformedContext(t *testing.T) {
	for _, v := range []string{
		"", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // no flags
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff is invalid
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",   // short trace id
	} {
		h := http.Header{}
		h.Set("traceparent", v)
		if sc := trace.SpanContextFromContext(Extract(context.Background(), h)); sc.IsValid() {
			t.Errorf("header %q continued %v", v, sc)
		}
		if sc := trace.SpanContextFromContext(ExtractMeta(context.Background(), map[string]any{MetaTraceparent: v})); sc.IsValid() {
			t.Errorf("_meta %q continued %v", v, sc)
		}
	}
	for _, v := range []any{42, true, []any{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, map[string]any{}} {
		if sc := trace.SpanContextFromContext(ExtractMeta(context.Background(), map[string]any{MetaTraceparent: v})); sc.IsValid() {
			t.Errorf("_meta of type %T continued %v", v, sc)
		}
	}
	good := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := trace.SpanContextFromContext(ExtractMeta(context.Background(), map[string]any{MetaTraceparent: good, MetaTracestate: "k=v"}))
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceState().Get("k") != "v" {
		t.Errorf("a valid _meta context was not continued: %v", sc)
	}
	meta := map[string]any{}
	InjectMeta(context.Background(), meta) // no span: nothing
	if len(meta) != 0 {
		t.Errorf("InjectMeta without a span set %v", meta)
	}
	InjectMeta(trace.ContextWithSpanContext(context.Background(), sc), meta)
	if meta[MetaTraceparent] != good || meta[MetaTracestate] != "k=v" {
		t.Errorf("InjectMeta set %v", meta)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v")
	f.Add("", "")
	f.Add("00-", ",,,=")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		h := http.Header{}
		h.Set("traceparent", tp)
		h.Set("tracestate", ts)
		sc := trace.SpanContextFromContext(Extract(context.Background(), h))
		mc := trace.SpanContextFromContext(ExtractMeta(context.Background(), map[string]any{MetaTraceparent: tp, MetaTracestate: ts}))
		if sc.IsValid() != mc.IsValid() || (sc.IsValid() && sc.TraceID() != mc.TraceID()) {
			t.Fatalf("header and _meta disagree on %q: %v / %v", tp, sc, mc)
		}
		if sc.IsValid() && (!sc.TraceID().IsValid() || !sc.SpanID().IsValid()) {
			t.Fatalf("valid context with a zero id from %q", tp)
		}
		// The agent's context is the same one, kept for a link and never made a parent.
		actx := ExtractAgentMeta(ExtractAgent(context.Background(), h), map[string]any{MetaTraceparent: tp, MetaTracestate: ts})
		ac, ok := AgentContext(actx)
		if ok != sc.IsValid() || (ok && (ac.TraceID() != sc.TraceID() || ac.SpanID() != sc.SpanID())) {
			t.Fatalf("agent context %v (%v) from %q, want %v", ac, ok, tp, sc)
		}
		if trace.SpanContextFromContext(actx).IsValid() {
			t.Fatalf("ExtractAgent made %q the parent context", tp)
		}
	})
}

// TestStartCallLinksTheAgentContext: with the sampler Setup installs at ratio 1, StartCall
// records the call as the root of a new trace whatever the agent sent — a sampled flag of 0, a
// trace id of its choosing, no context — linking the agent's span context; at ratio 0 nothing
// the agent sends makes it record; tracing off records nothing.
func TestStartCallLinksTheAgentContext(t *testing.T) {
	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		name, header string
		meta         map[string]any
		ratio        float64
		record, link bool
	}{
		{"unsampled header", "00-" + agentTrace + "-" + agentSpan + "-00", nil, 1, true, true},
		{"unsampled meta over sampled header", "00-" + agentTrace + "-" + agentSpan + "-01", map[string]any{MetaTraceparent: "00-" + agentTrace + "-" + agentSpan + "-00"}, 1, true, true},
		{"sampled header, chosen trace", "00-" + agentTrace + "-" + agentSpan + "-01", nil, 1, true, true},
		{"no context", "", nil, 1, true, false},
		{"malformed context", "00-zz", nil, 1, true, false},
		{"sampled header at ratio 0", "00-" + agentTrace + "-" + agentSpan + "-01", nil, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(Sampler(tc.ratio)))
			h := http.Header{}
			if tc.header != "" {
				h.Set("traceparent", tc.header)
			}
			ctx := ExtractAgentMeta(ExtractAgent(context.Background(), h), tc.meta)
			ctx, span := StartCall(ctx, TracerOf(tp), "call", trace.SpanKindServer)
			_, child := Start(ctx, TracerOf(tp), "step", trace.SpanKindInternal)
			child.End()
			span.End()
			spans := rec.Ended()
			if !tc.record {
				if len(spans) != 0 {
					t.Fatalf("recorded %d spans at ratio 0", len(spans))
				}
				return
			}
			if len(spans) != 2 {
				t.Fatalf("recorded %d spans, want the call and its step", len(spans))
			}
			call := spans[1]
			if call.Parent().IsValid() || call.SpanContext().TraceID().String() == agentTrace {
				t.Fatalf("the call's span continues %v (trace %s)", call.Parent(), call.SpanContext().TraceID())
			}
			if spans[0].SpanContext().TraceID() != call.SpanContext().TraceID() || spans[0].Parent().SpanID() != call.SpanContext().SpanID() {
				t.Errorf("the step is not the call's child")
			}
			links := call.Links()
			if !tc.link {
				if len(links) != 0 {
					t.Errorf("links %v without an agent context", links)
				}
				return
			}
			if len(links) != 1 || links[0].SpanContext.TraceID().String() != agentTrace || links[0].SpanContext.SpanID().String() != agentSpan {
				t.Errorf("links %v, want the agent's span", links)
			}
		})
	}
	ctx, span := StartCall(context.Background(), nil, "call", trace.SpanKindServer)
	if span.IsRecording() || trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("tracing off recorded a span")
	}
}

// otlpCollector is an OTLP/HTTP traces endpoint: it decodes each POST as an
// ExportTraceServiceRequest with the OTLP collector types and answers status.
type otlpCollector struct {
	mu     sync.Mutex
	status int
	posts  int
	errs   []string
	res    []*tracepb.ResourceSpans
}

func (o *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.posts++
	if o.status/100 == 3 {
		http.Redirect(w, r, "/elsewhere", o.status)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		o.errs = append(o.errs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
	} else if err := proto.Unmarshal(body, &req); err != nil {
		o.errs = append(o.errs, err.Error())
	}
	o.res = append(o.res, req.ResourceSpans...)
	if o.status != 0 {
		w.WriteHeader(o.status)
	}
}

// TestSetupExportsOverOTLP: the provider of Setup exports through the SDK's OTLP/HTTP exporter
// to the configured URL: one ExportTraceServiceRequest a real decoder reads, the resource's
// service.name, the scope, ids, parentage, kind, status and attributes. A collector that
// redirects is not followed: the export fails.
func TestSetupExportsOverOTLP(t *testing.T) {
	col := &otlpCollector{}
	srv := httptest.NewServer(col) // 127.0.0.1
	t.Cleanup(srv.Close)
	tp, shutdown, err := Setup(Config{Endpoint: srv.URL + "/v1/traces", SampleRatio: 1, ServiceName: "actgate-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := Start(context.Background(), TracerOf(tp), "parent", trace.SpanKindServer)
	_, child := Start(ctx, TracerOf(tp), "child", trace.SpanKindClient)
	child.SetAttributes(AttrTool.String("t"), AttrAllowed.Bool(true))
	End(child, "failed")
	parent.End()
	if err := shutdown(context.Background()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.errs) > 0 || col.posts != 1 || len(col.res) != 1 {
		t.Fatalf("collector: %d posts, errors %v, %d resource spans", col.posts, col.errs, len(col.res))
	}
	rs := col.res[0]
	name := ""
	for _, kv := range rs.GetResource().GetAttributes() {
		if kv.Key == "service.name" {
			name = kv.Value.GetStringValue()
		}
	}
	if name != "actgate-test" || len(rs.ScopeSpans) != 1 {
		t.Fatalf("resource %v, %d scopes", rs.GetResource(), len(rs.ScopeSpans))
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.GetName() != Scope || len(ss.Spans) != 2 {
		t.Fatalf("scope %v, %d spans", ss.Scope, len(ss.Spans))
	}
	c, p := ss.Spans[0], ss.Spans[1]
	if c.Name != "child" || p.Name != "parent" || string(c.ParentSpanId) != string(p.SpanId) || string(c.TraceId) != string(p.TraceId) ||
		c.Kind != tracepb.Span_SPAN_KIND_CLIENT || p.Kind != tracepb.Span_SPAN_KIND_SERVER || c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		len(c.Attributes) != 2 || c.Attributes[0].Value.GetStringValue() != "t" || !c.Attributes[1].Value.GetBoolValue() ||
		c.EndTimeUnixNano < c.StartTimeUnixNano || len(p.ParentSpanId) != 0 {
		t.Fatalf("decoded spans %v / %v", c, p)
	}

	// A redirecting collector: the export is an error and the redirect is not followed.
	rcol := &otlpCollector{status: http.StatusTemporaryRedirect}
	rsrv := httptest.NewServer(rcol)
	t.Cleanup(rsrv.Close)
	exp, err := NewExporter(rsrv.URL+"/v1/traces", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	rtp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, s := Start(context.Background(), TracerOf(rtp), "x", trace.SpanKindInternal)
	s.End()
	if err := exp.ExportSpans(context.Background(), rec.Ended()); err == nil {
		t.Error("an export answered by a redirect succeeded")
	}
	_ = exp.Shutdown(context.Background())
	rcol.mu.Lock()
	if rcol.posts != 1 {
		t.Errorf("the redirect was followed: %d requests", rcol.posts)
	}
	rcol.mu.Unlock()

	// Tracing off: Start returns the context and a span that records nothing.
	octx, off := Start(context.Background(), nil, "x", trace.SpanKindInternal)
	if off.IsRecording() || octx != context.Background() {
		t.Fatal("a nil tracer recorded")
	}
}
