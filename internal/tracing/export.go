package tracing

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// NewExporter returns the OpenTelemetry SDK's OTLP/HTTP trace exporter (otlptracehttp): binary
// protobuf ExportTraceServiceRequests POSTed to url, uncompressed, through rt (nil: a clone of
// http.DefaultTransport), each attempt bounded by DefaultExportTimeout, redirects not followed,
// transient failures (429, 502-504, network errors) retried with the SDK's backoff for up to a
// minute. The URL, timeout and transport are actgate's configuration and win over the SDK's
// OTEL_EXPORTER_OTLP_* variables; headers and compression from those variables still apply
// (docs/operations.md "Tracing").
func NewExporter(url string, rt http.RoundTripper) (sdktrace.SpanExporter, error) {
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	client := &http.Client{
		Transport: rt, Timeout: DefaultExportTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(url),
		otlptracehttp.WithHTTPClient(client),
		otlptracehttp.WithTimeout(DefaultExportTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	return exp, nil
}
