package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/test/testutil"
)

// TestServeMetricsAndLogs runs the standalone gate with metrics.address set: calls through its
// MCP endpoint are counted on /metrics (internal/metrics), and the gate's log at full verbosity
// carries act ids and digests but never an argument value.
func TestServeMetricsAndLogs(t *testing.T) {
	up, dir, tok := countingDemoUpstream(t)
	metricsAddr := testutil.FreeAddr(t)
	cfgFile := filepath.Join(dir, "actgate.yaml")
	doc := string(demoConfig(up.URL, filepath.Join(dir, "data"), tok)) + "metrics:\n  address: " + metricsAddr + "\n"
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateconfig.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.Buffer
	log := newLogger(&logs, true)
	rt, err := standalone.Open(context.Background(), cfg, log, standalone.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	stopMetrics, err := rt.ServeMetrics(log)
	if err != nil {
		t.Fatal(err)
	}
	defer stopMetrics()
	// A second gate cannot take an address the file names.
	if _, err := rt.ServeMetrics(log); err == nil {
		t.Fatal("a second metrics listener on the same explicit address started")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, ln, io.Discard) }()

	hc, err := agentClient(cfg, cfg.Agent.Name)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + mcpproxy.Path("finance"), HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "SECRET-ARG-4242"
	for _, tc := range []struct{ tool, args string }{
		{"get_balance", `{"account":"` + secret + `"}`},
		{"send_payment", `{"amount":50,"to":"` + secret + `"}`}, // escalates: a binding moment
		{"email_send", `{"to":"` + secret + `"}`},
	} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)}); err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
	}
	_ = cs.Close()

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`actgate_decisions_total{class="INFORMATIONAL",code="",decision="Allowed"} 1`,
		`actgate_decisions_total{class="FINANCIAL",code="EF_ESCALATION_REQUIRED",decision="Escalated"} 1`,
		`actgate_decisions_total{class="COMMUNICATION",code="EF_INSTRUCTION_PROVENANCE_FAILURE",decision="Denied"} 1`, // unknown provenance matches the deny rule
		`actgate_side_effect_denies_total{class="FINANCIAL",code="EF_ESCALATION_REQUIRED"} 1`,
		`actgate_moments_emitted_total{class="FINANCIAL",decision_class="none",policy="` + gateconfig.PolicyName + `"} 1`,
		`actgate_enforce_duration_seconds_count{path="hot"} 1`,
		`actgate_enforce_duration_seconds_count{path="deny"} 1`,
		`actgate_indeterminate_outstanding{source="journal"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), secret) {
		t.Error("/metrics carries an argument value")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	all := logs.String()
	if strings.Contains(all, secret) {
		t.Fatalf("an argument value reached the gate's log:\n%s", all)
	}
	if !strings.Contains(all, "actionDigest") || !strings.Contains(all, "sha256:") {
		t.Fatalf("the gate's log names no digest:\n%s", all)
	}
}
