package authority

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceCrossesTheAuthorityHop: the sidecar's Review and Consume POSTs carry the W3C trace
// context of its span (the traceparent header, over TLS, to a service answering from a real
// API server), and the service's spans are children of the review client's: one trace from
// the sidecar's call span through the review and the Lease consume. The spans carry the act
// id, decision and code, never the argument value.
func TestTraceCrossesTheAuthorityHop(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := newRig(t, rigOptions{tracer: tp})
	const secret = "argument-value-not-in-spans-71c2"
	c := r.call(t, "session-1", "email_send", `{"to":"a@example.com","body":"`+secret+`"}`)

	// The sidecar's span of the tools/call (actgate.mcp.tools_call in the sidecar process).
	ctx, call := tp.Tracer("test").Start(context.Background(), "sidecar.tools_call")
	resp, err := r.client(r.agentTk).Do(ctx, c.req)
	if err != nil || !resp.Allowed || resp.Authority == nil {
		t.Fatalf("review: %v %+v", err, resp)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.client(r.agentTk).Do(ctx, consumeReq(a.ID, "op-1", c.binding(r.ns, 1)))
	if err != nil || !got.Allowed || got.Consumed == nil {
		t.Fatalf("consume: %v %+v", err, got)
	}
	call.End()

	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var clients, servers, consumes []sdktrace.ReadOnlySpan
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != call.SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name())
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), secret) {
				t.Errorf("span %s attribute %s carries the argument value", s.Name(), kv.Key)
			}
		}
		switch s.Name() {
		case "actgate.review.request":
			clients = append(clients, s)
		case "actgate.authority.review":
			servers = append(servers, s)
		case "actgate.lease.consume":
			consumes = append(consumes, s)
		}
	}
	if len(clients) != 2 || len(servers) != 2 || len(consumes) != 1 {
		t.Fatalf("%d review clients, %d service spans, %d consumes; want 2, 2, 1", len(clients), len(servers), len(consumes))
	}
	for _, cl := range clients {
		if cl.Parent().SpanID() != call.SpanContext().SpanID() || cl.SpanKind() != trace.SpanKindClient {
			t.Errorf("review client span is not a client child of the call span")
		}
	}
	ops := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range servers {
		p := s.Parent()
		if !p.IsRemote() || byID[p.SpanID()] == nil || byID[p.SpanID()].Name() != "actgate.review.request" {
			t.Errorf("service span's parent %v is not a (remote) review client span", p.SpanID())
		}
		ops[attr(s, "actgate.review.operation")] = s
	}
	review, consume := ops["Review"], ops["Consume"]
	if review == nil || consume == nil {
		t.Fatalf("service spans' operations: %v", ops)
	}
	if attr(review, "actgate.allowed") != "true" || attr(review, "actgate.decision") != "Allowed" || attr(review, "actgate.act.name") == "" {
		t.Errorf("review span attributes %v", review.Attributes())
	}
	l := consumes[0]
	if l.Parent().SpanID() != consume.SpanContext().SpanID() || attr(l, "actgate.act.id") != c.cand.Act.CandidateActID ||
		attr(l, "actgate.authority.id") != a.ID || attr(l, "actgate.operation_id") != "op-1" || attr(l, "actgate.ef_code") != "" {
		t.Errorf("lease consume span: parent %v, attributes %v", l.Parent().SpanID(), l.Attributes())
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
