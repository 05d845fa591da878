package authority

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/tracing/tracingtest"
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

	// The sidecar's span of the tools/call (its tools/call server span in the sidecar process).
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
	t.Logf("span tree:\n%s", tracingtest.SpanTree(spans))
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var clients, servers, consumes []sdktrace.ReadOnlySpan
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != call.SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name())
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), secret) {
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
		ops[tracingtest.Attr(s, "actgate.review.operation")] = s
	}
	review, consume := ops["Review"], ops["Consume"]
	if review == nil || consume == nil {
		t.Fatalf("service spans' operations: %v", ops)
	}
	if tracingtest.Attr(review, "actgate.allowed") != "true" || tracingtest.Attr(review, "actgate.decision") != "Allowed" || tracingtest.Attr(review, "actgate.act.name") == "" {
		t.Errorf("review span attributes %v", review.Attributes())
	}
	l := consumes[0]
	if l.Parent().SpanID() != consume.SpanContext().SpanID() || tracingtest.Attr(l, "actgate.act.id") != c.cand.Act.CandidateActID ||
		tracingtest.Attr(l, "actgate.authority.id") != a.ID || tracingtest.Attr(l, "actgate.operation_id") != "op-1" || tracingtest.Attr(l, "actgate.ef_code") != "" {
		t.Errorf("lease consume span: parent %v, attributes %v", l.Parent().SpanID(), l.Attributes())
	}
}

// TestTraceEscalatedCall: an escalated call and its retry after the principal's resolution,
// made by an agent under one span of its own: the escalating Review, the granted Review and the
// Consume are each a service span under the review client's, in the agent's trace; the
// escalation's code and the resolution's decision are on them, the argument values nowhere.
func TestTraceEscalatedCall(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := newRig(t, rigOptions{tracer: tp})
	aliceC := r.principal(t, alice)
	const session = "mcp-session-trace"
	root, task := tp.Tracer("test").Start(context.Background(), "agent.task")

	ctx, first := tp.Tracer("test").Start(root, "sidecar.tools_call")
	c := r.call(t, session, "send_payment", paymentArgs)
	resp, err := r.client(r.agentTk).Do(ctx, c.req)
	if err != nil || resp.Escalation == nil || len(resp.Escalation.BindingMoments) != 1 {
		t.Fatalf("escalation: %v %+v", err, resp)
	}
	first.End()
	name := resp.Escalation.BindingMoments[0]
	r.waitMoment(t, name)
	r.resolve(t, aliceC, name, alice, v1alpha1.ResolutionOption, ptr.To[int32](0), "", true)

	ctx, retry := tp.Tracer("test").Start(root, "sidecar.tools_call")
	granted := r.call(t, session, "send_payment", paymentArgs)
	resp, err = r.client(r.agentTk).Do(ctx, granted.req)
	if err != nil || !resp.Allowed || resp.Authority == nil {
		t.Fatalf("granted review: %v %+v", err, resp)
	}
	a, err := resp.Authority.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.client(r.agentTk).Do(ctx, consumeReq(a.ID, "op-esc", granted.binding(r.ns, 1))); err != nil || !got.Allowed {
		t.Fatalf("consume: %v %+v", err, got)
	}
	retry.End()
	task.End()

	spans := rec.Ended()
	t.Logf("span tree:\n%s", tracingtest.SpanTree(spans))
	var services []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() != task.SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name())
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "acct-9") || strings.Contains(kv.Value.String(), "invoice 7") {
				t.Errorf("span %s attribute %s carries an argument value", s.Name(), kv.Key)
			}
		}
		if s.Name() == "actgate.authority.review" {
			services = append(services, s)
		}
	}
	if len(services) != 3 {
		t.Fatalf("%d service spans, want 3 (escalating Review, granted Review, Consume)", len(services))
	}
	if tracingtest.Attr(services[0], "actgate.ef_code") != "EF_ESCALATION_REQUIRED" || tracingtest.Attr(services[0], "actgate.decision") != "Escalated" ||
		tracingtest.Attr(services[1], "actgate.allowed") != "true" || tracingtest.Attr(services[1], "actgate.review.reason") != "BindingMoment" ||
		tracingtest.Attr(services[2], "actgate.review.operation") != "Consume" {
		t.Errorf("service spans: %v / %v / %v", services[0].Attributes(), services[1].Attributes(), services[2].Attributes())
	}
}
