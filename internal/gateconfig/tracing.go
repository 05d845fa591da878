package gateconfig

import (
	"math"

	"github.com/actgate/actgate/internal/tracing"
)

// Tracing exports OpenTelemetry traces of every tool call over OTLP/HTTP (docs/operations.md
// "Tracing"). Off unless endpoint is set.
type Tracing struct {
	// Endpoint is the OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces. Empty: off.
	Endpoint string `json:"endpoint,omitempty"`
	// SampleRatio is the fraction of agent calls recorded, in [0, 1], each in a trace of the
	// gate's own. Default 1. The agent's traceparent is linked and neither raises nor lowers
	// it (tracing.StartCall).
	SampleRatio *float64 `json:"sampleRatio,omitempty"`
	// ServiceName is the traces' service.name. Default "actgate-gate".
	ServiceName string `json:"serviceName,omitempty"`
}

// DefaultTracingServiceName is the service.name of the standalone gate's spans.
const DefaultTracingServiceName = "actgate-gate"

// TracingConfig returns the tracing configuration (tracing off when no endpoint is set).
func (c *Config) TracingConfig() tracing.Config {
	t := c.Tracing
	if t.Endpoint == "" {
		return tracing.Config{}
	}
	cfg := tracing.Config{Endpoint: t.Endpoint, SampleRatio: tracing.DefaultSampleRatio, ServiceName: t.ServiceName}
	if t.SampleRatio != nil {
		cfg.SampleRatio = *t.SampleRatio
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = DefaultTracingServiceName
	}
	return cfg
}

func (c *Config) validateTracing(bad func(field, format string, args ...any)) {
	t := c.Tracing
	if t.Endpoint == "" {
		if t.SampleRatio != nil || t.ServiceName != "" {
			bad("tracing.endpoint", "required when tracing.sampleRatio or tracing.serviceName is set")
		}
		return
	}
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		bad("tracing.sampleRatio", "must be within [0, 1]")
	}
	if len(t.ServiceName) > 253 {
		bad("tracing.serviceName", "must be at most 253 characters")
	}
	if err := (tracing.Config{Endpoint: t.Endpoint}).Validate(); err != nil {
		bad("tracing.endpoint", "must be an absolute http or https URL without user info, query or fragment")
	}
}
