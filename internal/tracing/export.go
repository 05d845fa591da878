package tracing

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Exporter sends spans to an OTLP/HTTP traces endpoint as binary protobuf (an
// ExportTraceServiceRequest, OTLP specification "OTLP/HTTP"). It is written against the OTLP
// message types only: the SDK's otlptracehttp exporter links the OTLP collector package, whose
// gRPC service stubs bring gRPC and grpc-gateway into every binary that can trace.
type Exporter struct {
	url    string
	client *http.Client
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// NewExporter returns an Exporter posting to url through rt (nil: a clone of
// http.DefaultTransport). Each export is bounded by DefaultExportTimeout.
func NewExporter(url string, rt http.RoundTripper) *Exporter {
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &Exporter{url: url, client: &http.Client{
		Transport: rt, Timeout: DefaultExportTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// ExportSpans posts spans in one request.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := MarshalSpans(spans)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("tracing: export: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("tracing: export: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("tracing: export: the collector answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// Shutdown does nothing: the exporter holds no state beyond its HTTP client.
func (e *Exporter) Shutdown(context.Context) error { return nil }

// MarshalSpans encodes spans as an OTLP ExportTraceServiceRequest: field 1 (resource_spans)
// repeated, one ResourceSpans per resource, one ScopeSpans per instrumentation scope.
func MarshalSpans(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	type scopeKey struct{ name, version string }
	var order []*tracepb.ResourceSpans
	byRes := map[string]*tracepb.ResourceSpans{}
	byScope := map[*tracepb.ResourceSpans]map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		rk := ""
		var attrs []attribute.KeyValue
		if r := s.Resource(); r != nil {
			rk = r.Encoded(attribute.DefaultEncoder())
			attrs = r.Attributes()
		}
		rs, ok := byRes[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(attrs)}}
			byRes[rk] = rs
			byScope[rs] = map[scopeKey]*tracepb.ScopeSpans{}
			order = append(order, rs)
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{sc.Name, sc.Version}
		ss, ok := byScope[rs][sk]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version}, SchemaUrl: sc.SchemaURL}
			byScope[rs][sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	var out []byte
	for _, rs := range order {
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("tracing: encoding spans: %w", err)
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	return out, nil
}

func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   kind(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(s.DroppedAttributes(), 0)),
		DroppedEventsCount:     uint32(max(s.DroppedEvents(), 0)),
		DroppedLinksCount:      uint32(max(s.DroppedLinks(), 0)),
		Flags:                  uint32(sc.TraceFlags()) | 0x100, // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	}
	if par := s.Parent(); par.IsValid() {
		psid := par.SpanID()
		p.ParentSpanId = psid[:]
		if par.IsRemote() {
			p.Flags |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
		}
	}
	for _, ev := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano: unixNano(ev.Time), Name: ev.Name, Attributes: keyValues(ev.Attributes),
			DroppedAttributesCount: uint32(max(ev.DroppedAttributeCount, 0)),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
		})
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return p
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func kind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.STRINGSLICE:
		var vs []*commonpb.AnyValue
		for _, s := range v.AsStringSlice() {
			vs = append(vs, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}})
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
}
