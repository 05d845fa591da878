package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/test/testutil"
)

// BenchmarkSidecarHotPath and BenchmarkServeHotPath are the hot path (get_balance, evidence
// None) of the two deployments as their processes assemble it, one MCP client each over
// loopback HTTP, in front of the same upstream: the sidecar as New builds it (the stub
// authority service only serves the pod's policy; the receipt log mirrored to a file, as
// `actgate sidecar` mirrors it to stdout; the Anchorer and the outbox running), and the gate
// as `actgate serve` opens it (internal/standalone: metrics observer, session limits). Each
// reports its p50/p99 and the process's CPU per call. Run them with -cpuprofile to compare
// where each spends it; BenchmarkHotPathSidecarVsServe alternates the two in one run, so both
// see the same machine load.
func BenchmarkSidecarHotPath(b *testing.B) {
	up := benchUpstream(b)
	hotLoop(b, connectTo(b, benchSidecar(b, up.URL)))
}

func BenchmarkServeHotPath(b *testing.B) {
	up := benchUpstream(b)
	hotLoop(b, connectTo(b, benchServe(b, up.URL)))
}

// BenchmarkHotPathSidecarVsServe alternates one hot call through the sidecar and one through
// the standalone gate per iteration for the latencies, then runs blocks of calls through each
// in turn for the CPU per call (this process's CPU time: the client and the upstream cost the
// same both ways, so the difference is the sinks'). Reported: each one's p50 and p99, its CPU
// per call, and the sidecar's over serve's.
func BenchmarkHotPathSidecarVsServe(b *testing.B) {
	up := benchUpstream(b)
	side := connectTo(b, benchSidecar(b, up.URL))
	serve := connectTo(b, benchServe(b, up.URL))
	alternate(b, side, serve, processCPU, processCPU, "cpu")
}

// alternate runs one hot call through the sidecar's session and one through serve's per
// iteration for the latencies, then blocks of calls through each in turn for the CPU per call,
// read with sideCPU and serveCPU; it reports each one's p50 and p99, the CPU per call (as
// "sidecar-{cpuName}-µs/call" and "serve-{cpuName}-µs/call"), and the sidecar's over serve's.
func alternate(b *testing.B, side, serve *mcp.ClientSession, sideCPU, serveCPU func() time.Duration, cpuName string) {
	for range 100 {
		hotCall(b, side)
		hotCall(b, serve)
	}
	var ls, lg []time.Duration
	for b.Loop() {
		ls = append(ls, hotCall(b, side))
		lg = append(lg, hotCall(b, serve))
	}
	b.StopTimer()
	const rounds = 6
	n := max(b.N/rounds, 200)
	var cs, cg time.Duration
	for range rounds {
		cs += cpuOver(n, sideCPU, func() { hotCall(b, side) })
		cg += cpuOver(n, serveCPU, func() { hotCall(b, serve) })
	}
	slices.Sort(ls)
	slices.Sort(lg)
	b.ReportMetric(micros(ls[len(ls)/2]), "sidecar-p50-µs")
	b.ReportMetric(micros(lg[len(lg)/2]), "serve-p50-µs")
	b.ReportMetric(micros(ls[len(ls)*99/100]), "sidecar-p99-µs")
	b.ReportMetric(micros(lg[len(lg)*99/100]), "serve-p99-µs")
	b.ReportMetric(micros(cs/time.Duration(n*rounds)), "sidecar-"+cpuName+"-µs/call")
	b.ReportMetric(micros(cg/time.Duration(n*rounds)), "serve-"+cpuName+"-µs/call")
	b.ReportMetric(float64(cs)/float64(cg), "sidecar/serve-cpu")
}

// hotLoop calls get_balance through cs b.N times and reports p50, p99 and CPU per call.
func hotLoop(b *testing.B, cs *mcp.ClientSession) {
	for range 100 {
		hotCall(b, cs)
	}
	var lat []time.Duration
	start := processCPU()
	for b.Loop() {
		lat = append(lat, hotCall(b, cs))
	}
	cpu := processCPU() - start
	slices.Sort(lat)
	b.ReportMetric(micros(lat[len(lat)/2]), "p50-µs")
	b.ReportMetric(micros(lat[len(lat)*99/100]), "p99-µs")
	b.ReportMetric(micros(cpu/time.Duration(len(lat))), "cpu-µs/call")
}

func hotCall(b *testing.B, cs *mcp.ClientSession) time.Duration {
	start := time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{"account":"acct-1"}`)})
	d := time.Since(start)
	if err != nil || res.IsError {
		b.Fatalf("get_balance: %v %+v", err, res)
	}
	return d
}

// cpuOver is the CPU time cpu reads over n calls of f.
func cpuOver(n int, cpu func() time.Duration, f func()) time.Duration {
	start := cpu()
	for range n {
		f()
	}
	return cpu() - start
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func benchUpstream(b *testing.B) *mcptest.Server {
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = up.Close() })
	return up
}

// benchSidecar starts the sidecar as `actgate sidecar` assembles it (New, Serve) in front of
// upstreamURL and returns its MCP endpoint.
func benchSidecar(b *testing.B, upstreamURL string) string {
	s := newStub(b, bankModes)
	s.spec, s.epoch = testPolicy(b, upstreamURL), 1
	dir := b.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			b.Fatal(err)
		}
		return p
	}
	mirror, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = mirror.Close() })
	sc, err := New(Config{
		Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCAFile: write("ca.crt", certPEM(s.srv)),
		TokenFile: write("token", []byte(testToken+"\n")), PublicKeyFile: write("authority.pub", publicKeyPEM(b, s.signer)),
		Namespace: testNS, Agent: testAgent, SinkID: testSink, JournalDir: filepath.Join(dir, "journal"),
		Upstreams:     []Upstream{{Name: "payments", URL: upstreamURL, CredentialFile: write("credential", []byte(upstreamTk))}},
		ReceiptMirror: mirror,
	})
	if err != nil {
		b.Fatal(err)
	}
	return serveBench(b, func(ctx context.Context, ln net.Listener) error { return sc.Serve(ctx, ln) }) + mcpproxy.Path("payments")
}

// benchServe opens the standalone gate as `actgate serve` does, with the sidecar's policy, in
// front of upstreamURL and returns its MCP endpoint.
func benchServe(b *testing.B, upstreamURL string) string {
	dir := b.TempDir()
	cfg, err := gateconfig.Parse(serveConfig(b, dir, upstreamURL), dir)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := standalone.Open(context.Background(), cfg, logr.Discard(), standalone.Hooks{})
	if err != nil {
		b.Fatal(err)
	}
	return serveBench(b, func(ctx context.Context, ln net.Listener) error { return rt.Serve(ctx, ln, nopWriter{}) }) + mcpproxy.Path("payments")
}

// serveBench runs serve on a loopback listener until the benchmark ends and returns its base
// URL.
func serveBench(b *testing.B, serve func(context.Context, net.Listener) error) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkHotPathProcesses is BenchmarkHotPathSidecarVsServe as deployed: `actgate sidecar`
// (its authority service the stub in this process, which only serves the pod's policy) and
// `actgate serve` run as two processes in front of the same upstream, built from this tree or
// taken from $ACTGATE_BENCH_BINARY, their output in files. One hot call through each per
// iteration for the latencies, then blocks of calls through each in turn; each process's own
// CPU per call is read from /proc (10 ms resolution over thousands of calls).
func BenchmarkHotPathProcesses(b *testing.B) {
	bin := os.Getenv("ACTGATE_BENCH_BINARY")
	if bin == "" {
		bin = testutil.BuildActgate(b, "")
	}
	up := benchUpstream(b)
	sideURL, sidePID := sidecarProcess(b, bin, up.URL)
	serveURL, servePID := serveProcess(b, bin, up.URL)
	side, serve := connectTo(b, sideURL), connectTo(b, serveURL)
	alternate(b, side, serve, func() time.Duration { return pidCPU(b, sidePID) }, func() time.Duration { return pidCPU(b, servePID) }, "proc-cpu")
}

// pidCPU is the CPU time (user and system) process pid has used, from /proc/pid/stat.
func pidCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if len(f) < 13 || err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticksPerSecond
}

// startBenchProcess runs bin with args, its output in dir/out, stopped (SIGTERM) when the
// benchmark ends.
func startBenchProcess(b *testing.B, dir, bin string, args ...string) *exec.Cmd {
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = out.Close()
	})
	return cmd
}

// sidecarProcess starts `actgate sidecar` in front of upstreamURL and returns its MCP endpoint
// once it holds its pod's policy, and its pid.
func sidecarProcess(b *testing.B, bin, upstreamURL string) (string, int) {
	s := newStub(b, bankModes)
	s.spec, s.epoch = testPolicy(b, upstreamURL), 1
	dir := b.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			b.Fatal(err)
		}
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := startBenchProcess(b, dir, bin, "sidecar", "--listen", addr, "--authority-url", s.srv.URL,
		"--authority-ca-file", write("ca.crt", certPEM(s.srv)), "--authority-public-key-file", write("authority.pub", publicKeyPEM(b, s.signer)),
		"--token-file", write("token", []byte(testToken+"\n")), "--namespace", testNS, "--service-account", "billing-agent",
		"--sink-id", testSink, "--server", "payments="+upstreamURL, "--credential-file", "payments="+write("credential", []byte(upstreamTk)),
		"--journal-dir", filepath.Join(dir, "journal"))
	base := "http://" + addr
	waitBench(b, "the sidecar to hold its policy", func() bool {
		resp, err := http.Get(base + ReadyPath + "?check=policy")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base + mcpproxy.Path("payments"), cmd.Process.Pid
}

// serveProcess starts `actgate serve` with benchServe's configuration in front of upstreamURL
// and returns its MCP endpoint and its pid.
func serveProcess(b *testing.B, bin, upstreamURL string) (string, int) {
	dir := b.TempDir()
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, serveConfig(b, dir, upstreamURL), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := startBenchProcess(b, dir, bin, "serve", "--config", cfgFile)
	var base string
	waitBench(b, "actgate serve to write its endpoint", func() bool {
		raw, err := os.ReadFile(filepath.Join(dir, "data", gateconfig.EndpointFile))
		base = strings.TrimSpace(string(raw))
		return err == nil && base != ""
	})
	return base + mcpproxy.Path("payments"), cmd.Process.Pid
}

func waitBench(b *testing.B, what string, ok func() bool) {
	for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("waiting for %s: timed out", what)
		}
	}
}

// serveConfig is the standalone gate's configuration in dir: the sidecar's hot-path rule, the
// upstream's credential, no metrics listener.
func serveConfig(b *testing.B, dir, upstreamURL string) []byte {
	cred := filepath.Join(dir, "credential")
	if err := os.WriteFile(cred, []byte(upstreamTk), 0o600); err != nil {
		b.Fatal(err)
	}
	return fmt.Appendf(nil, `listen: 127.0.0.1:0
dataDir: %q
sinkID: %s
metrics:
  address: "off"
agent:
  name: %s
  authentication: none
upstreams:
- server: payments
  bearerTokenFile: %q
policy:
  podSelector: {}
  servers:
  - name: payments
    url: %q
  rules:
  - name: reads
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
`, filepath.Join(dir, "data"), testSink, testAgent, cred, upstreamURL)
}
