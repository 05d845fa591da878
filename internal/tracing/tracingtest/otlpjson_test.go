package tracingtest

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestFromOTLPJSON: a back end's OTLP/JSON answer (hex ids, numeric enums, string nanoseconds)
// becomes spans with their ids, parent, link, kind, resource and attributes; ids that are not
// hex and documents that are not TracesData are errors, never spans.
func TestFromOTLPJSON(t *testing.T) {
	doc := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"actgate-sidecar"}}]},
	  "scopeSpans":[{"scope":{"name":"actgate"},"spans":[{"traceId":"5bf92f3577b34da6a3ce929d0e0e4736","spanId":"10f067aa0ba902b7",
	  "parentSpanId":"00f067aa0ba902b7","flags":768,"name":"tools/call send_payment","kind":2,"startTimeUnixNano":"1700000000000000000",
	  "endTimeUnixNano":"1700000000100000000","attributes":[{"key":"gen_ai.tool.name","value":{"stringValue":"send_payment"}}],
	  "links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}],"status":{"code":2,"message":"x"}}]}]}]}`
	spans, err := FromOTLPJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.SpanContext().TraceID().String() != "5bf92f3577b34da6a3ce929d0e0e4736" || s.SpanContext().SpanID().String() != "10f067aa0ba902b7" ||
		s.Parent().SpanID().String() != "00f067aa0ba902b7" || !s.Parent().IsRemote() || s.SpanKind() != trace.SpanKindServer ||
		ServiceName(s) != "actgate-sidecar" || Attr(s, "gen_ai.tool.name") != "send_payment" ||
		len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("span %s: %+v", s.Name(), s)
	}
	for name, bad := range map[string]string{
		"not JSON":        `{`,
		"id not hex":      `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"10f067aa0ba902b7"}]}]}]}`,
		"short span id":   `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5bf92f3577b34da6a3ce929d0e0e4736","spanId":"10f0"}]}]}]}`,
		"unknown member":  `{"resourceSpans":[{"bogus":1}]}`,
		"wrong type":      `{"resourceSpans":"x"}`,
		"link id not hex": `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5bf92f3577b34da6a3ce929d0e0e4736","spanId":"10f067aa0ba902b7","links":[{"traceId":"q"}]}]}]}]}`,
	} {
		if spans, err := FromOTLPJSON([]byte(bad)); err == nil {
			t.Errorf("%s: no error, %d spans", name, len(spans))
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: empty error", name)
		}
	}
}

func FuzzFromOTLPJSON(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5bf92f3577b34da6a3ce929d0e0e4736","spanId":"10f067aa0ba902b7"}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = FromOTLPJSON(b)
	})
}
