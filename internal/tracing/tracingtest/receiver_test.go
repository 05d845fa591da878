package tracingtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/tracing"
	"github.com/actgate/actgate/internal/tracing/tracingtest"
)

// TestReceiver: spans exported by the SDK's OTLP/HTTP exporter come back from the Receiver with
// their ids, parentage, kind, attributes and service.name; a body that is not an export is
// refused with 400 and recorded.
func TestReceiver(t *testing.T) {
	recv := &tracingtest.Receiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	tp, shutdown, err := tracing.Setup(tracing.Config{Endpoint: srv.URL + "/v1/traces", SampleRatio: 1, ServiceName: "svc-a"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	ctx, parent := tracing.StartCall(tracing.ExtractAgent(context.Background(), h), tracing.TracerOf(tp), "parent", trace.SpanKindServer)
	_, child := tracing.Start(ctx, tracing.TracerOf(tp), "child", trace.SpanKindClient)
	child.SetAttributes(tracing.AttrTool.String("get_balance"), tracing.AttrAllowed.Bool(true))
	child.End()
	parent.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 2 || len(recv.Errors()) != 0 {
		t.Fatalf("%d spans, errors %v", len(spans), recv.Errors())
	}
	c, p := spans[0], spans[1]
	if c.Name() != "child" || c.Parent().SpanID() != p.SpanContext().SpanID() || c.SpanContext().TraceID() != p.SpanContext().TraceID() ||
		c.SpanKind() != trace.SpanKindClient || tracingtest.Attr(c, "actgate.tool") != "get_balance" || tracingtest.Attr(c, "actgate.allowed") != "true" ||
		tracingtest.ServiceName(p) != "svc-a" || p.Parent().IsValid() {
		t.Fatalf("received %v / %v", c, p)
	}
	if l := p.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		l[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" || len(l[0].Attributes) != 1 || l[0].Attributes[0].Value.AsString() != tracing.LinkAgent {
		t.Errorf("the parent's links came back as %v", l)
	}
	if tree := tracingtest.SpanTree(spans); tree != "parent [server] "+p.EndTime().Sub(p.StartTime()).Round(1000).String()+" (svc-a)\n  child [client] "+
		c.EndTime().Sub(c.StartTime()).Round(1000).String()+" (svc-a) actgate.tool=get_balance\n" {
		t.Errorf("tree:\n%s", tree)
	}

	for _, body := range []string{"not protobuf \xff\xff", "\x0a\x05\x12\x03\x12\x01\x0a"} {
		resp, err := http.Post(srv.URL+"/v1/traces", "application/x-protobuf", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %q: HTTP %d", body, resp.StatusCode)
		}
	}
	if len(recv.Errors()) != 2 || len(recv.Spans()) != 2 {
		t.Errorf("errors %v, %d spans", recv.Errors(), len(recv.Spans()))
	}
}
