package tracingtest

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP traces endpoint (POST /v1/traces, binary protobuf) for tests that
// run actgate's processes: it decodes every ExportTraceServiceRequest with the OTLP collector
// types and keeps the spans, each with its resource, as ReadOnlySpans for SpanTree and Attr.
// A request it cannot decode is answered 400 and recorded in Errors.
type Receiver struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
	errs  []string
	posts int
}

// ServeHTTP decodes one export.
func (o *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.posts++
	if err != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		o.errs = append(o.errs, fmt.Sprintf("%s %s %q: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err))
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		o.errs = append(o.errs, "decode: "+err.Error())
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	spans, err := FromOTLP(&req)
	if err != nil {
		o.errs = append(o.errs, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.spans = append(o.spans, spans...)
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// Spans returns the spans received so far.
func (o *Receiver) Spans() []sdktrace.ReadOnlySpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sdktrace.ReadOnlySpan(nil), o.spans...)
}

// Errors returns the exports the receiver refused.
func (o *Receiver) Errors() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.errs...)
}

// Posts is the number of export requests received.
func (o *Receiver) Posts() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.posts
}

// ServiceName is the service.name of span s's resource, "" when it has none.
func ServiceName(s sdktrace.ReadOnlySpan) string { return serviceName(s) }

// FromOTLP turns the spans of an export request into ReadOnlySpans with their resource,
// scope and links. A span with a malformed trace or span id is an error.
func FromOTLP(req *collectortrace.ExportTraceServiceRequest) ([]sdktrace.ReadOnlySpan, error) {
	var out []sdktrace.ReadOnlySpan
	for _, rs := range req.GetResourceSpans() {
		res := resource.NewSchemaless(attrs(rs.GetResource().GetAttributes())...)
		for _, ss := range rs.GetScopeSpans() {
			scope := instrumentation.Scope{Name: ss.GetScope().GetName(), Version: ss.GetScope().GetVersion(), SchemaURL: ss.GetSchemaUrl()}
			for _, p := range ss.GetSpans() {
				sc, err := spanContext(p.GetTraceId(), p.GetSpanId(), false)
				if err != nil {
					return nil, fmt.Errorf("span %q: %w", p.GetName(), err)
				}
				var parent trace.SpanContext
				if len(p.GetParentSpanId()) > 0 {
					if parent, err = spanContext(p.GetTraceId(), p.GetParentSpanId(), p.GetFlags()&0x200 != 0); err != nil {
						return nil, fmt.Errorf("span %q parent: %w", p.GetName(), err)
					}
				}
				stub := tracetest.SpanStub{
					Name: p.GetName(), SpanContext: sc, Parent: parent, SpanKind: kind(p.GetKind()),
					StartTime: time.Unix(0, int64(p.GetStartTimeUnixNano())), EndTime: time.Unix(0, int64(p.GetEndTimeUnixNano())),
					Attributes: attrs(p.GetAttributes()), Resource: res, InstrumentationScope: scope,
				}
				for _, l := range p.GetLinks() {
					lsc, err := spanContext(l.GetTraceId(), l.GetSpanId(), true)
					if err != nil {
						return nil, fmt.Errorf("span %q link: %w", p.GetName(), err)
					}
					stub.Links = append(stub.Links, sdktrace.Link{SpanContext: lsc, Attributes: attrs(l.GetAttributes())})
				}
				for _, ev := range p.GetEvents() {
					stub.Events = append(stub.Events, sdktrace.Event{Name: ev.GetName(), Attributes: attrs(ev.GetAttributes()), Time: time.Unix(0, int64(ev.GetTimeUnixNano()))})
				}
				switch p.GetStatus().GetCode() {
				case tracepb.Status_STATUS_CODE_ERROR:
					stub.Status = sdktrace.Status{Code: codes.Error, Description: p.GetStatus().GetMessage()}
				case tracepb.Status_STATUS_CODE_OK:
					stub.Status = sdktrace.Status{Code: codes.Ok}
				}
				out = append(out, stub.Snapshot())
			}
		}
	}
	return out, nil
}

func spanContext(tid, sid []byte, remote bool) (trace.SpanContext, error) {
	var t trace.TraceID
	var s trace.SpanID
	if len(tid) != len(t) || len(sid) != len(s) {
		return trace.SpanContext{}, fmt.Errorf("trace id of %d bytes, span id of %d", len(tid), len(sid))
	}
	copy(t[:], tid)
	copy(s[:], sid)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled, Remote: remote})
	if !sc.IsValid() {
		return trace.SpanContext{}, fmt.Errorf("zero trace or span id")
	}
	return sc, nil
}

func kind(k tracepb.Span_SpanKind) trace.SpanKind {
	switch k {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return trace.SpanKindInternal
	case tracepb.Span_SPAN_KIND_SERVER:
		return trace.SpanKindServer
	case tracepb.Span_SPAN_KIND_CLIENT:
		return trace.SpanKindClient
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return trace.SpanKindProducer
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return trace.SpanKindConsumer
	}
	return trace.SpanKindUnspecified
}

func attrs(kvs []*commonpb.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		k := attribute.Key(kv.GetKey())
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out = append(out, k.String(v.StringValue))
		case *commonpb.AnyValue_BoolValue:
			out = append(out, k.Bool(v.BoolValue))
		case *commonpb.AnyValue_IntValue:
			out = append(out, k.Int64(v.IntValue))
		case *commonpb.AnyValue_DoubleValue:
			out = append(out, k.Float64(v.DoubleValue))
		default:
			// Arrays, maps and bytes: their protobuf text, which is what a test searching for
			// a leaked value needs.
			out = append(out, k.String(kv.GetValue().String()))
		}
	}
	return out
}
