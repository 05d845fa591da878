package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
)

// BenchmarkToolsCallRoundTripServeTraced is BenchmarkToolsCallRoundTripServe with the gate's
// tracing on at 100 % sampling, exporting over OTLP/HTTP to a collector in this process that
// reads and discards every export: the cost of tracing through the whole serve round trip.
func BenchmarkToolsCallRoundTripServeTraced(b *testing.B) {
	bin := os.Getenv(serveBinaryEnv)
	if bin == "" {
		bin = buildActgateTags(b, "")
	}
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
	}))
	b.Cleanup(collector.Close)
	toolsURL := startUpstreamProcess(b)
	u := startUpstreams(b)
	dir := b.TempDir()
	cfgFile := filepath.Join(dir, "actgate.yaml")
	raw := strings.ReplaceAll(string(config(b, u, filepath.Join(dir, "data"))), u.Tools.URL, toolsURL)
	raw += fmt.Sprintf("tracing:\n  endpoint: %q\n  sampleRatio: 1\n", collector.URL+"/v1/traces")
	if err := os.WriteFile(cfgFile, []byte(raw), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := gateconfig.Load(cfgFile)
	if err != nil {
		b.Fatal(err)
	}
	p := startServeArgs(b, bin, []string{"serve", "--config", cfgFile}, cfg)
	direct := agent(b, toolsURL)
	gated := agent(b, p.Base+mcpproxy.Path("tools"))
	pid := p.Cmd.Process.Pid
	args := json.RawMessage(`{"q":"invoice 42"}`)
	roundTrips(b, direct, gated, func(int) (string, json.RawMessage) { return "search", args },
		func() time.Duration { return procCPU(b, pid) })
	deadline := time.Now().Add(10 * time.Second) // the batch processor exports every 5 s
	for exports.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if exports.Load() == 0 {
		b.Fatal("the gate exported no spans")
	}
}
