package sink

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/tracing"
)

// marshalExporter encodes every batch as the OTLP exporter does and drops it: the export's CPU
// without a network.
type marshalExporter struct{}

func (marshalExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	_, err := tracing.MarshalSpans(spans)
	return err
}

func (marshalExporter) Shutdown(context.Context) error { return nil }

// BenchmarkEnforceHotPathTraced is BenchmarkEnforceHotPath with tracing on at 100 % sampling:
// the SDK's batch span processor and the OTLP encoding of every span, exported nowhere.
func BenchmarkEnforceHotPathTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(marshalExporter{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	spec, err := policy.LoadFile("testdata/policy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	compiled, err := policy.Compile("default/sink-e2e", spec, 7)
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b, func(o *Options) { o.Policy = CompiledPolicy(compiled); o.TracerProvider = tp })
	inv := func(context.Context, string) (InvokeResult, error) {
		return InvokeResult{Result: []byte(`{"content":[]}`), Outcome: OutcomeExecuted}, nil
	}
	c := call("s1", "tools", "search", `{"q":"weather in Lisbon","limit":10,"filters":{"lang":"en","safe":true}}`)
	lat := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := f.gate.Handle(context.Background(), c, inv)
		lat = append(lat, time.Since(start))
		if err != nil || !res.Invoked {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.StopTimer()
	reportLatencies(b, lat)
}
