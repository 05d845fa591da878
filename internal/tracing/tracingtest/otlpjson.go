package tracingtest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// idKeys are the OTLP/JSON members whose value is a hex trace or span id (OTLP specification,
// "JSON Protobuf Encoding": ids are hex strings, where protobuf's JSON mapping has base64).
var idKeys = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// FromOTLPJSON turns OTLP/JSON TracesData — a tracing back end's answer, such as the "result" of
// Jaeger's /api/v3/traces — into ReadOnlySpans as FromOTLP does. An id that is not hex, or a
// document that is not TracesData, is an error.
func FromOTLPJSON(b []byte) ([]sdktrace.ReadOnlySpan, error) {
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("OTLP/JSON: %w", err)
	}
	if err := hexIDsToBase64(doc); err != nil {
		return nil, err
	}
	pb, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var td tracepb.TracesData
	if err := protojson.Unmarshal(pb, &td); err != nil {
		return nil, fmt.Errorf("OTLP/JSON TracesData: %w", err)
	}
	return FromOTLP(&collectortrace.ExportTraceServiceRequest{ResourceSpans: td.GetResourceSpans()})
}

func hexIDsToBase64(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			if s, ok := m.(string); ok && idKeys[k] {
				raw, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("OTLP/JSON %s %q: %w", k, s, err)
				}
				v[k] = base64.StdEncoding.EncodeToString(raw)
				continue
			}
			if err := hexIDsToBase64(m); err != nil {
				return err
			}
		}
	case []any:
		for _, m := range v {
			if err := hexIDsToBase64(m); err != nil {
				return err
			}
		}
	}
	return nil
}
