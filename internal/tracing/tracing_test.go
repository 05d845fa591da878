package tracing

import (
	"context"
	"math"
	"net/http"
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
	})
}

// TestMarshalSpansDecodes: MarshalSpans is an ExportTraceServiceRequest the OTLP collector types
// decode, spans grouped by resource and scope, with ids, parentage, kind and attributes.
func TestMarshalSpansDecodes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := Start(context.Background(), TracerOf(tp), "parent", trace.SpanKindServer)
	_, child := Start(ctx, TracerOf(tp), "child", trace.SpanKindClient)
	child.SetAttributes(AttrTool.String("t"), AttrAllowed.Bool(true))
	End(child, "failed")
	parent.End()
	b, err := MarshalSpans(rec.Ended())
	if err != nil {
		t.Fatal(err)
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("grouping: %v", &req)
	}
	ss := req.ResourceSpans[0].ScopeSpans[0]
	if ss.Scope.Name != Scope || len(ss.Spans) != 2 {
		t.Fatalf("scope %v, %d spans", ss.Scope, len(ss.Spans))
	}
	c, p := ss.Spans[0], ss.Spans[1]
	if c.Name != "child" || p.Name != "parent" || string(c.ParentSpanId) != string(p.SpanId) || string(c.TraceId) != string(p.TraceId) ||
		c.Kind != tracepb.Span_SPAN_KIND_CLIENT || p.Kind != tracepb.Span_SPAN_KIND_SERVER || c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		len(c.Attributes) != 2 || c.Attributes[0].Value.GetStringValue() != "t" || !c.Attributes[1].Value.GetBoolValue() ||
		c.EndTimeUnixNano < c.StartTimeUnixNano {
		t.Fatalf("decoded spans %v / %v", c, p)
	}
	// Tracing off: Start returns the context and a span that records nothing.
	octx, off := Start(context.Background(), nil, "x", trace.SpanKindInternal)
	if off.IsRecording() || octx != context.Background() {
		t.Fatal("a nil tracer recorded")
	}
}
