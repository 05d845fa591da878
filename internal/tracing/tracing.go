// Package tracing sets up OpenTelemetry traces for actgate's processes and carries W3C trace
// context across their hops (docs/operations.md "Tracing").
//
// Nothing here is global: Setup returns a trace.TracerProvider that the caller injects into the
// components it wires (sink.Options, mcpproxy.Config, service.Options, review.Client). A nil
// provider is tracing off: components then use a no-op tracer, never extract or inject trace
// context, and pay a nil check per call.
//
// Spans carry act ids, tool and server names, consequence classes, decisions, EF codes and
// digests; never a tool argument value.
package tracing

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every actgate tracer.
const Scope = "github.com/actgate/actgate"

// Span attribute keys.
const (
	AttrActID          = attribute.Key("actgate.act.id")
	AttrTool           = attribute.Key("actgate.tool")
	AttrServer         = attribute.Key("actgate.server")
	AttrClass          = attribute.Key("actgate.consequence_class")
	AttrDecision       = attribute.Key("actgate.decision")
	AttrPolicy         = attribute.Key("actgate.policy")
	AttrRule           = attribute.Key("actgate.rule")
	AttrCode           = attribute.Key("actgate.ef_code")
	AttrState          = attribute.Key("actgate.state")
	AttrActionDigest   = attribute.Key("actgate.action_digest")
	AttrArgsDigest     = attribute.Key("actgate.arguments_digest")
	AttrOperationID    = attribute.Key("actgate.operation_id")
	AttrAuthorityID    = attribute.Key("actgate.authority.id")
	AttrOperation      = attribute.Key("actgate.review.operation")
	AttrAllowed        = attribute.Key("actgate.allowed")
	AttrInvoked        = attribute.Key("actgate.invoked")
	AttrReplayed       = attribute.Key("actgate.replayed")
	AttrOutcome        = attribute.Key("actgate.outcome")
	AttrMomentID       = attribute.Key("actgate.moment.id")
	AttrEnvelopeDigest = attribute.Key("actgate.envelope_digest")
	// AttrLink says what a span link points at (LinkAgent).
	AttrLink = attribute.Key("actgate.link")
)

// LinkAgent is the AttrLink of the link from a call's span to the agent's span context.
const LinkAgent = "agent"

// Defaults of Config.
const (
	DefaultSampleRatio   = 1.0
	DefaultExportTimeout = 10 * time.Second
)

// Config is one process's tracing configuration. The zero value is tracing off.
type Config struct {
	// Endpoint is the OTLP/HTTP traces URL (e.g. http://otel-collector:4318/v1/traces).
	// Empty: tracing off.
	Endpoint string
	// SampleRatio is the fraction of agent calls recorded, in [0, 1] (DefaultSampleRatio is
	// the configuration default). Each call is the root of a trace of the process's own
	// (StartCall): the agent's traceparent neither raises nor lowers it.
	SampleRatio float64
	// ServiceName is the resource's service.name (actgate-gate, actgate-sidecar,
	// actgate-authority).
	ServiceName string
	// Transport carries the export requests; nil: a clone of http.DefaultTransport.
	Transport http.RoundTripper
}

// Validate reports a Config that cannot be used.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" || u.ForceQuery || u.Opaque != "" {
		return fmt.Errorf("tracing: endpoint %q is not an absolute http(s) URL without credentials, query or fragment", c.Endpoint)
	}
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("tracing: sampleRatio %v is not in [0, 1]", c.SampleRatio)
	}
	return nil
}

// Setup returns the TracerProvider of cfg and its shutdown, which flushes the spans not yet
// exported. Tracing off returns a nil provider and a shutdown that does nothing.
func Setup(cfg Config) (trace.TracerProvider, func(context.Context) error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if cfg.Endpoint == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	name := cfg.ServiceName
	if name == "" {
		name = "actgate"
	}
	exp, err := NewExporter(cfg.Endpoint, cfg.Transport)
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(Sampler(cfg.SampleRatio)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	return tp, tp.Shutdown, nil
}

// Sampler is the sampler of a process with sample ratio ratio: a new trace (every agent call,
// StartCall) is recorded with probability ratio, decided on the trace id the process chose; a
// span under a parent follows the parent's decision, so the hops of one call (sidecar, authority
// service) are recorded together.
func Sampler(ratio float64) sdktrace.Sampler {
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
}

// Tracer returns tp's actgate tracer, or a no-op tracer when tp is nil (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(Scope)
	}
	return tp.Tracer(Scope)
}

// propagator is W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Extract returns ctx with the remote span context of h's traceparent, when h carries a valid
// one.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h == nil || h.Get("traceparent") == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// agentContextKey holds the span context an agent sent with a call (ExtractAgent).
type agentContextKey struct{}

// ExtractAgent returns ctx carrying the span context of h's traceparent as the agent's, when h
// carries a valid one. The agent's context is untrusted: StartCall links to it and never
// continues it, so an agent can neither switch off the recording of a call (a traceparent
// whose sampled flag is 0) nor file it under a trace id of its choosing.
func ExtractAgent(ctx context.Context, h http.Header) context.Context {
	if h == nil || h.Get("traceparent") == "" {
		return ctx
	}
	return withAgentContext(ctx, propagator.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// ExtractAgentMeta is ExtractAgent for an MCP request's params._meta (ExtractMeta), which
// replaces a context taken from the header when it carries a valid one.
func ExtractAgentMeta(ctx context.Context, meta map[string]any) context.Context {
	return withAgentContext(ctx, ExtractMeta(context.Background(), meta))
}

func withAgentContext(ctx, extracted context.Context) context.Context {
	sc := trace.SpanContextFromContext(extracted)
	if !sc.IsValid() {
		return ctx
	}
	return context.WithValue(ctx, agentContextKey{}, sc)
}

// AgentContext is the span context ExtractAgent or ExtractAgentMeta put in ctx, if any.
func AgentContext(ctx context.Context) (trace.SpanContext, bool) {
	sc, ok := ctx.Value(agentContextKey{}).(trace.SpanContext)
	return sc, ok
}

// StartCall starts the span of an agent's call: the root of a new trace, sampled by the
// process's own sampler on a trace id it chose, with a link to the agent's span context when
// ctx carries one (ExtractAgent). Whatever the agent sent, a call the process records is
// recorded in a trace of the process's own (docs/operations.md "Tracing"). With a nil tracer
// (tracing off) it returns ctx unchanged and a span that records nothing.
func StartCall(ctx context.Context, tr trace.Tracer, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithNewRoot()}
	if sc, ok := AgentContext(ctx); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLink.String(LinkAgent)}}))
	}
	return tr.Start(ctx, name, opts...)
}

// Inject sets h's traceparent (and tracestate) from ctx's span, when it has a valid one.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// MCP _meta keys of W3C trace context (the MCP specification's trace-context convention,
// SEP-414: the bare traceparent and tracestate keys of params._meta).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// ExtractMeta returns ctx with the remote span context of an MCP request's params._meta, when
// it carries a valid traceparent. Non-string values are ignored.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta[MetaTraceparent].(string)
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{MetaTraceparent: tp}
	if ts, ok := meta[MetaTracestate].(string); ok && ts != "" {
		c[MetaTracestate] = ts
	}
	return propagator.Extract(ctx, c)
}

// InjectMeta sets traceparent (and tracestate) in an MCP request's params._meta from ctx's
// span, when it has a valid one.
func InjectMeta(ctx context.Context, meta map[string]any) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	for k, v := range c {
		meta[strings.ToLower(k)] = v
	}
}

// TracerOf returns tp's actgate tracer, or nil when tp is nil (tracing off: Start then does
// nothing).
func TracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Scope)
}

// noSpan is the span Start returns with tracing off: not recording, every method a no-op.
var noSpan = trace.SpanFromContext(context.Background())

// Start starts a span of kind under ctx's span. With a nil tracer (tracing off) it returns ctx
// unchanged and a span that records nothing, without allocating.
func Start(ctx context.Context, tr trace.Tracer, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	return tr.Start(ctx, name, trace.WithSpanKind(kind))
}

// End ends span, with status Error and the description why (never an error's text, which may
// quote what the upstream or a store said) when why is set. A refusal is a decision, not an
// error: it is the actgate.ef_code attribute.
func End(span trace.Span, why string) {
	if why != "" && span.IsRecording() {
		span.SetStatus(codes.Error, why)
	}
	span.End()
}
