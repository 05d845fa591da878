package sink

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
	benchHotPath(b, compiledFixture(b, false, func(o *Options) { o.TracerProvider = tp }))
}
