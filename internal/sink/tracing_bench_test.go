package sink

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// dropClient is an OTLP trace client that encodes every batch as the OTLP/HTTP exporter does
// (one ExportTraceServiceRequest) and drops it: the export's CPU without a network.
type dropClient struct{}

func (dropClient) Start(context.Context) error { return nil }
func (dropClient) Stop(context.Context) error  { return nil }
func (dropClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	_, err := proto.Marshal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: rs})
	return err
}

// BenchmarkEnforceHotPathTraced is BenchmarkEnforceHotPath with tracing on at 100 % sampling:
// the SDK's batch span processor, its OTLP exporter's span transform and the protobuf encoding
// of every span, exported nowhere.
func BenchmarkEnforceHotPathTraced(b *testing.B) {
	exp, err := otlptrace.New(context.Background(), dropClient{})
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	benchHotPath(b, compiledFixture(b, false, func(o *Options) { o.TracerProvider = tp }))
}
