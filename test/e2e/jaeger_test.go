package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/actgate/actgate/internal/tracing/tracingtest"
	"github.com/actgate/actgate/test/testutil"
)

// jaeger is a Jaeger v2 process (the OpenTelemetry Collector distribution of the Jaeger
// project, built from its Go module by hack/jaeger-bin.sh): an OTLP/HTTP receiver on loopback,
// the collector's batch processor, in-memory trace storage and the query API, as an operator's
// tracing back end runs them.
type jaeger struct {
	proc  *proc
	otlp  string // the OTLP/HTTP traces URL the processes export to
	query string // the query API's base URL
}

// jaegerBinary is ACTGATE_JAEGER, or what hack/jaeger-bin.sh prints after building it.
func jaegerBinary(t *testing.T, root string) string {
	t.Helper()
	if bin := os.Getenv("ACTGATE_JAEGER"); bin != "" {
		return bin
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "hack", "jaeger-bin.sh"))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/jaeger-bin.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func startJaeger(t *testing.T, root string) *jaeger {
	t.Helper()
	otlpAddr, queryAddr, grpcAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %q
    grpc:
      endpoint: %q
receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, queryAddr, grpcAddr, otlpAddr)
	path := testutil.WriteFile(t, t.TempDir(), "jaeger.yaml", []byte(config))
	j := &jaeger{otlp: "http://" + otlpAddr + "/v1/traces", query: "http://" + queryAddr}
	j.proc = start(t, "jaeger", jaegerBinary(t, root), []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, "--config", path)
	waitTCP(t, j.proc, otlpAddr)
	testutil.Eventually(t, 30*time.Second, "Jaeger's query API to answer", func() error {
		if j.proc.exited() {
			t.Fatalf("jaeger exited: %v\n%s", j.proc.err, j.proc.output())
		}
		resp, err := http.Get(j.query + "/api/v3/services")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/v3/services: %s", resp.Status)
		}
		return nil
	})
	return j
}

// spans reads back from Jaeger's query API (/api/v3/traces, OTLP/JSON) every span of the
// traces with a span of one of services that started since, as a trace viewer does. A service
// with no trace yet is not an error: Jaeger answers 404 until its spans are stored.
func (j *jaeger) spans(ctx context.Context, since time.Time, services ...string) ([]sdktrace.ReadOnlySpan, error) {
	seen := map[string]bool{}
	var out []sdktrace.ReadOnlySpan
	for _, svc := range services {
		q := url.Values{
			"query.service_name":   {svc},
			"query.start_time_min": {since.Add(-time.Minute).UTC().Format(time.RFC3339Nano)},
			"query.start_time_max": {time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)},
			"query.num_traces":     {"100"},
		}
		got, err := j.find(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("Jaeger query for %s: %w", svc, err)
		}
		for _, s := range got {
			id := s.SpanContext().TraceID().String() + "/" + s.SpanContext().SpanID().String()
			if !seen[id] {
				seen[id] = true
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func (j *jaeger) find(ctx context.Context, q url.Values) ([]sdktrace.ReadOnlySpan, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.query+"/api/v3/traces?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == http.StatusNotFound:
		return nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var wrapped struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &wrapped); err != nil {
		return nil, err
	}
	return tracingtest.FromOTLPJSON(wrapped.Result)
}
