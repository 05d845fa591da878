package conformance

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkToolsCallRoundTripServeTraced is BenchmarkToolsCallRoundTripServe with the gate's
// tracing on at 100 % sampling, exporting over OTLP/HTTP to a collector in this process that
// reads and discards every export: the cost of tracing through the whole serve round trip.
func BenchmarkToolsCallRoundTripServeTraced(b *testing.B) {
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
	}))
	b.Cleanup(collector.Close)
	serveRoundTrips(b, fmt.Sprintf("tracing:\n  endpoint: %q\n  sampleRatio: 1\n", collector.URL+"/v1/traces"))
	deadline := time.Now().Add(10 * time.Second) // the batch processor exports every 5 s
	for exports.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if exports.Load() == 0 {
		b.Fatal("the gate exported no spans")
	}
}
