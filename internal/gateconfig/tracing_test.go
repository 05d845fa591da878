package gateconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/tracing"
)

func TestTracingConfig(t *testing.T) {
	c, err := Parse([]byte(minimal), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TracingConfig(); got != (tracing.Config{}) {
		t.Errorf("tracing is on by default: %+v", got)
	}
	c, err = Parse([]byte(minimal+"tracing:\n  endpoint: http://127.0.0.1:4318/v1/traces\n"), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TracingConfig(); got.Endpoint != "http://127.0.0.1:4318/v1/traces" || got.SampleRatio != 1 || got.ServiceName != DefaultTracingServiceName {
		t.Errorf("defaults: %+v", got)
	}
	c, err = Parse([]byte(minimal+"tracing:\n  endpoint: https://collector.example/v1/traces\n  sampleRatio: 0\n  serviceName: edge-gate\n"), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TracingConfig(); got.SampleRatio != 0 || got.ServiceName != "edge-gate" {
		t.Errorf("explicit: %+v", got)
	}
}

func TestBadTracingConfigs(t *testing.T) {
	for _, tc := range []struct{ name, doc, field string }{
		{"ratio without endpoint", "tracing:\n  sampleRatio: 0.5\n", "tracing.endpoint"},
		{"service without endpoint", "tracing:\n  serviceName: x\n", "tracing.endpoint"},
		{"ratio above 1", "tracing:\n  endpoint: http://c:4318/v1/traces\n  sampleRatio: 2\n", "tracing.sampleRatio"},
		{"negative ratio", "tracing:\n  endpoint: http://c:4318/v1/traces\n  sampleRatio: -1\n", "tracing.sampleRatio"},
		{"not a URL", "tracing:\n  endpoint: collector:4318\n", "tracing.endpoint"},
		{"grpc", "tracing:\n  endpoint: grpc://c:4317\n", "tracing.endpoint"},
		{"credentials in URL", "tracing:\n  endpoint: http://u:p@c:4318/v1/traces\n", "tracing.endpoint"},
		{"long service name", "tracing:\n  endpoint: http://c:4318/v1/traces\n  serviceName: " + strings.Repeat("a", 254) + "\n", "tracing.serviceName"},
	} {
		_, err := Parse([]byte(minimal+tc.doc), "/etc/actgate")
		var es Errors
		if !errors.As(err, &es) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error on %s", tc.name, err, tc.field)
		}
	}
	for _, doc := range []string{"tracing:\n  endpont: http://c:4318\n", "tracing:\n  sampleRatio: half\n  endpoint: http://c:4318/v1/traces\n", "tracing: on\n"} {
		if _, err := Parse([]byte(minimal+doc), "/etc/actgate"); err == nil {
			t.Errorf("%q accepted", doc)
		}
	}
}
