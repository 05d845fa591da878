package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil/rig"
)

// T-F (tool-use-binding §22, §27.8): measure the latency enforce() adds to a hot-path call. Each
// iteration makes the same tools/call twice over real MCP on loopback — once straight to the
// upstream, once through the gate (proxy, mapping, policy, receipt, upstream session) — so both
// series see the same machine load. Reported: p50/p95/p99 of each, in microseconds, and the
// gate's overhead at each percentile (gate minus direct); and the CPU time one call costs the
// whole process (agent, gate, upstream) each way. The goal is an overhead under 1 ms at p99 on
// a hot-path call; §22 asks for under 10 ms. Figures: docs/performance.md "Go benchmarks".
func BenchmarkToolsCallRoundTrip(b *testing.B) {
	forEachPair(b, func(b *testing.B, client, upstream string) {
		direct, gated := inProcessPair(b, client, upstream)
		args := json.RawMessage(`{"q":"invoice 42"}`)
		roundTrips(b, direct, gated, func(int) (string, json.RawMessage) { return "search", args })
	})
}

// BenchmarkToolsCallRoundTripPermit is the same measurement for a machine-permitted call: a
// signed authority issued, consumed and journaled DISPATCH_PENDING with an fsync'd commit
// before the invoke, and the outcome recorded after it. Arguments differ per iteration, so no
// call is a retry of another. Two fsync'd commits and the receipt's fsync are on its path.
func BenchmarkToolsCallRoundTripPermit(b *testing.B) {
	forEachPair(b, func(b *testing.B, client, upstream string) {
		direct, gated := inProcessPair(b, client, upstream)
		roundTrips(b, direct, gated, func(i int) (string, json.RawMessage) {
			return "ticket_create", json.RawMessage(fmt.Sprintf(`{"title":"ticket %d"}`, i))
		})
	})
}

// inProcessPair starts the conformance policy's gate in this process in front of a tools
// upstream speaking only revision upstream, and connects the agent offering client first to the
// upstream (direct) and through the gate (gated).
func inProcessPair(b *testing.B, client, upstream string) (direct, gated *mcp.ClientSession) {
	u := &rig.Upstreams{
		Tools: rig.StartUpstream(b, mcptest.Options{
			Name: "tools", Samples: true, ProtocolVersions: []string{upstream}, Stateless: upstream >= "2026-07-28",
		}, "search", "ticket_create", "email_send"),
		Pay:     rig.StartUpstream(b, mcptest.Options{Name: "pay"}, "payout_create"),
		Browser: rig.StartUpstream(b, mcptest.Options{Name: "browser"}, "computer_submit"),
	}
	cfg, err := gateconfig.Parse(config(b, u, filepath.Join(b.TempDir(), "data")), "")
	if err != nil {
		b.Fatal(err)
	}
	g := rig.StartGate(b, cfg)
	return pairAgents(b, u.Tools.URL, g.Endpoint("tools"), client, upstream)
}

// BenchmarkToolsCallRoundTripServe is BenchmarkToolsCallRoundTrip as deployed: agent, gate and
// upstream are three processes. The gate is a real `actgate serve`, built as shipped (no
// failpoints tag) and run as the README runs it (not verbose), with its receipt log, metrics and
// logs; the upstream is this test binary re-executed (TestMain, upstreamProcessEnv); the agent
// is this process. Direct calls go from the agent to the upstream process, gated calls through
// the gate process. Besides the latencies it reports the gate process's own CPU per gated call
// (serve-cpu-µs/call, from /proc; 10 ms resolution over thousands of calls). Run it interleaved
// with BenchmarkToolsCallRoundTripReverseProxy, the floor under it. Figures and the analysis
// (BenchmarkLoopbackRoundTrip, strace, execution traces): docs/performance.md "Through a
// separate process".
func BenchmarkToolsCallRoundTripServe(b *testing.B) { serveRoundTrips(b, "") }

// revisionPairs are the MCP revision pairs every tools/call round-trip benchmark runs, each a
// sub-benchmark: the revision the agent offers first (client=) and the only revision the
// upstream speaks (upstream=). A 2026-07-28 agent in front of a 2025-11-25 upstream is what an
// up-to-date SDK's default client costs in front of the 2025 servers most deployments run: the
// gate answers the agent in 2026-07-28 and speaks 2025-11-25 upstream, while a direct call
// negotiates 2025-11-25. docs/performance.md "Revision pairs".
var revisionPairs = []struct{ client, upstream string }{
	{"2025-11-25", "2025-11-25"},
	{"2026-07-28", "2025-11-25"},
	{"2026-07-28", "2026-07-28"},
}

// forEachPair runs bench once per revision pair, as sub-benchmarks named after the pair.
func forEachPair(b *testing.B, bench func(b *testing.B, client, upstream string)) {
	for _, p := range revisionPairs {
		b.Run("client="+p.client+"/upstream="+p.upstream, func(b *testing.B) { bench(b, p.client, p.upstream) })
	}
}

// serveRoundTrips runs BenchmarkToolsCallRoundTripServe's rounds, one sub-benchmark per revision
// pair, against an `actgate serve` whose configuration has extra (top-level YAML) appended.
func serveRoundTrips(b *testing.B, extra string) {
	bin := os.Getenv(serveBinaryEnv)
	if bin == "" {
		bin = buildActgateTags(b, "")
	}
	forEachPair(b, func(b *testing.B, client, upstream string) {
		toolsURL := startUpstreamProcess(b, upstream)
		u := startUpstreams(b) // pay and browser stay in this process; the benchmark calls tools only
		dir := b.TempDir()
		cfgFile := filepath.Join(dir, "actgate.yaml")
		raw := strings.ReplaceAll(string(config(b, u, filepath.Join(dir, "data"))), u.Tools.URL, toolsURL) + extra
		if err := os.WriteFile(cfgFile, []byte(raw), 0o600); err != nil {
			b.Fatal(err)
		}
		cfg, err := gateconfig.Load(cfgFile)
		if err != nil {
			b.Fatal(err)
		}
		p := startServeArgs(b, bin, []string{"serve", "--config", cfgFile}, cfg)
		direct, gated := pairAgents(b, toolsURL, p.Base+mcpproxy.Path("tools"), client, upstream)
		pid := p.Cmd.Process.Pid
		args := json.RawMessage(`{"q":"invoice 42"}`)
		roundTrips(b, direct, gated, func(int) (string, json.RawMessage) { return "search", args },
			func() time.Duration { return procCPU(b, pid) })
	})
}

// pairAgents connects the agent offering client first to the upstream (direct) and to the
// gate's endpoint (gated), and checks each session runs the revision the pair says: the gate
// answers the agent in the agent's revision, a direct session runs the upstream's.
func pairAgents(b *testing.B, upstreamURL, gatedURL, client, upstream string) (direct, gated *mcp.ClientSession) {
	direct = rig.AgentAt(b, "conformance-agent", upstreamURL, client)
	gated = rig.AgentAt(b, "conformance-agent", gatedURL, client)
	for _, s := range []struct {
		cs   *mcp.ClientSession
		want string
	}{{direct, upstream}, {gated, client}} {
		if got := s.cs.InitializeResult().ProtocolVersion; got != s.want {
			b.Fatalf("a session of the pair client=%s upstream=%s runs %s, want %s", client, upstream, got, s.want)
		}
	}
	return direct, gated
}

// serveBinaryEnv names an actgate binary for BenchmarkToolsCallRoundTripServe to run instead of
// one built from this tree: A/B comparisons of two builds with the same test binary, rounds
// interleaved (docs/performance.md "Running them").
const serveBinaryEnv = "ACTGATE_BENCH_SERVE_BINARY"

// BenchmarkToolsCallRoundTripReverseProxy is the floor under BenchmarkToolsCallRoundTripServe:
// the same three processes with, in the gate's place, a process that does nothing but forward
// HTTP (net/http/httputil.ReverseProxy, streaming responses as they come). What it adds over
// direct is what any process in the path costs on this machine before it does any work.
func BenchmarkToolsCallRoundTripReverseProxy(b *testing.B) {
	forEachPair(b, func(b *testing.B, client, upstream string) {
		toolsURL := startUpstreamProcess(b, upstream)
		proxyURL, pid := startHelperProcess(b, reverseProxyEnv+"="+toolsURL)
		direct := rig.AgentAt(b, "conformance-agent", toolsURL, client)
		gated := rig.AgentAt(b, "conformance-agent", proxyURL, client)
		args := json.RawMessage(`{"q":"invoice 42"}`)
		roundTrips(b, direct, gated, func(int) (string, json.RawMessage) { return "search", args },
			func() time.Duration { return procCPU(b, pid) })
	})
}

// BenchmarkLoopbackRoundTrip is the machine's floor under the benchmarks above: one 512-byte
// message written on a kept-alive loopback TCP connection and read back whole, from an echo
// server in another process ("process", what each hop between agent, gate and upstream
// processes costs) and from an echo goroutine in this process ("in-process"). It does no HTTP,
// no JSON and no gate work. A gated call through a separate `actgate serve` makes two such
// process round trips where a direct call makes one, so what one process round trip costs at
// p99 here is the part of BenchmarkToolsCallRoundTripServe's overhead no gate can remove.
func BenchmarkLoopbackRoundTrip(b *testing.B) {
	for _, where := range []string{"process", "in-process"} {
		b.Run(where, func(b *testing.B) {
			var addr string
			if where == "process" {
				addr, _ = startHelperProcess(b, echoProcessEnv+"=1")
			} else {
				ln, err := listenEcho()
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = ln.Close() })
				addr = ln.Addr().String()
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg, back := bytes.Repeat([]byte("x"), 512), make([]byte, 512)
			once := func() time.Duration {
				start := time.Now()
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, back); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			for range 100 {
				once()
			}
			var ds []time.Duration
			for b.Loop() {
				ds = append(ds, once())
			}
			slices.Sort(ds)
			b.ReportMetric(us(quantile(ds, 0.50)), "p50-µs")
			b.ReportMetric(us(quantile(ds, 0.95)), "p95-µs")
			b.ReportMetric(us(quantile(ds, 0.99)), "p99-µs")
		})
	}
}

// startUpstreamProcess re-executes this test binary as the tools upstream speaking only MCP
// revision version and returns its URL.
func startUpstreamProcess(b *testing.B, version string) string {
	u, _ := startHelperProcess(b, upstreamProcessEnv+"="+version)
	return u
}

// startHelperProcess re-executes this test binary with env (TestMain serves instead of testing)
// and returns the URL it prints and its pid.
func startHelperProcess(b *testing.B, env string) (string, int) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("helper process %s: %v", env, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// procCPU is the CPU time (user and system) process pid has used, from /proc/pid/stat.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticksPerSecond
}

// roundTrips measures next's calls straight to the upstream (direct) and through the gate
// (gated), alternately. gateCPU, when given, is the gate process's CPU time (a gate in another
// process); the in-process gates' CPU is in this process's.
func roundTrips(b *testing.B, direct, gated *mcp.ClientSession, next func(int) (string, json.RawMessage), gateCPU ...func() time.Duration) {
	ctx := context.Background()
	once := func(cs *mcp.ClientSession, i int) time.Duration {
		tool, args := next(i)
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %s", tool, err, js(res))
		}
		return d
	}
	for i := range 50 { // warm both paths (connections, sessions, caches)
		once(direct, -1-i)
		once(gated, -1-i)
	}
	// b.Loop runs this function once per -count (the setup above — processes, sessions — is
	// not repeated for the framework's ramp-up), and b.N is the iteration count after it.
	var ds, gs []time.Duration
	for i := 0; b.Loop(); i++ {
		ds = append(ds, once(direct, i))
		gs = append(gs, once(gated, i))
	}
	b.StopTimer()
	// CPU per call, the figure machine load distorts least: the process's CPU time (every
	// goroutine: agent, gate, upstream, GC) over a run of direct calls, then of gated calls.
	n := max(b.N/2, 100)
	cpu := func(cs *mcp.ClientSession, base int) time.Duration {
		start := cpuTime()
		for i := range n {
			once(cs, base+i)
		}
		return (cpuTime() - start) / time.Duration(n)
	}
	dc := cpu(direct, b.N)
	var sc0 time.Duration
	if len(gateCPU) > 0 {
		sc0 = gateCPU[0]()
	}
	gc := cpu(gated, b.N+n)
	b.ReportMetric(us(dc), "direct-cpu-µs/call")
	b.ReportMetric(us(gc), "gate-cpu-µs/call")
	if len(gateCPU) > 0 {
		b.ReportMetric(us((gateCPU[0]()-sc0)/time.Duration(n)), "serve-cpu-µs/call")
	}
	slices.Sort(ds)
	slices.Sort(gs)
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p95", 0.95}, {"p99", 0.99}} {
		d, g := quantile(ds, p.q), quantile(gs, p.q)
		b.ReportMetric(us(d), "direct-"+p.name+"-µs")
		b.ReportMetric(us(g), "gate-"+p.name+"-µs")
		b.ReportMetric(us(g-d), "overhead-"+p.name+"-µs")
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
