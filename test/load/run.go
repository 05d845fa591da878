package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// target is a kind of sink under load: the standalone gate or the sidecar.
type target interface {
	name() string
	// startRun starts a sink on fresh state in front of the upstream at upstreamURL.
	startRun(ctx context.Context, runID, upstreamURL string) (sinkRun, error)
	// close stops what the target shares between runs.
	close() error
}

// sinkRun is one running sink.
type sinkRun interface {
	// endpoint is the MCP endpoint of the protected server through the sink.
	endpoint() string
	principal() principal
	// finish stops the sink and reads what it recorded.
	finish(ctx context.Context) (World, error)
	// pid is the sink process's id (its CPU time is read from /proc around the mix).
	pid() int
}

// runConfig is what one run does.
type runConfig struct {
	concurrency    int
	duration       time.Duration
	directDuration time.Duration
	mix            Mix
	host           string
	seed           uint64
	// floor runs the API floor after the sink's run, for a target that has one.
	floor bool
}

// floorer is a sink's run that can measure the API floor of the same mix (floor.go).
type floorer interface {
	floor(ctx context.Context, rc runConfig) (*FloorReport, error)
}

// runOnce runs one target at one concurrency: the direct phase, the mix through the sink, the
// sink stopped, the checks.
func runOnce(ctx context.Context, t target, rc runConfig, runID string) (RunReport, error) {
	rep := RunReport{Target: t.name(), Concurrency: rc.concurrency, Duration: rc.duration.Seconds(), Mix: rc.mix.String()}
	up, err := startUpstream(net.JoinHostPort(rc.host, "0"))
	if err != nil {
		return rep, err
	}
	defer up.Close()
	twin, err := startUpstream(net.JoinHostPort(rc.host, "0"))
	if err != nil {
		return rep, err
	}
	defer twin.Close()

	if rc.directDuration > 0 {
		hc := &http.Client{Transport: bearer{base: http.DefaultTransport}}
		direct, err := runPhase(ctx, rc.concurrency, rc.directDuration, func(int) int { return 0 }, rc.seed, twin.URL, hc, nil, directOp(rc.mix))
		if err != nil {
			return rep, fmt.Errorf("direct phase: %w", err)
		}
		rep.DirectDuration = direct.elapsed.Seconds()
		rep.DirectCalls = direct.tally.Calls
		rep.Direct = summarize(direct.lat)
		if direct.tally.Unexpected > 0 {
			return rep, fmt.Errorf("direct phase: %d calls failed: %v", direct.tally.Unexpected, direct.tally.Samples)
		}
	}

	sr, err := t.startRun(ctx, runID, up.URL)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", t.name(), err)
	}
	mix := rc.mix
	n := rc.concurrency
	cpu0, cpuErr := procCPU(sr.pid())
	gate, perr := runPhase(ctx, n, rc.duration, func(id int) int { return len(mix.firstKinds(id, n)) }, rc.seed+1,
		sr.endpoint(), &http.Client{}, sr.principal(),
		func(ctx context.Context, w *worker) { w.op(ctx, mix.nextKind(w.rnd, w.id, n, w.done)) })
	cpu1, cpuErr2 := procCPU(sr.pid())
	world, ferr := sr.finish(ctx)
	if perr != nil {
		return rep, fmt.Errorf("%s: %w", t.name(), perr)
	}
	if ferr != nil {
		return rep, fmt.Errorf("%s: reading what the sink recorded: %w", t.name(), ferr)
	}
	world.Upstream = up.Calls()
	rep.Elapsed = gate.elapsed.Seconds()
	rep.Calls = gate.tally.Calls
	rep.Throughput = float64(gate.tally.Calls) / gate.elapsed.Seconds()
	if cpuErr == nil && cpuErr2 == nil && gate.tally.Calls > 0 {
		rep.SinkCPU = float64((cpu1 - cpu0).Microseconds()) / float64(gate.tally.Calls)
	}
	rep.Ops = map[string]int{}
	for k, v := range gate.tally.Ops {
		rep.Ops[string(k)] = v
	}
	rep.Gate = summarize(gate.lat)
	rep.Overhead = overheads(rep.Gate, rep.Direct)
	if len(gate.tally.UnexpectedBy) > 0 {
		rep.Unexpected = gate.tally.UnexpectedBy
	}
	rep.Checks = RunChecks(world, gate.tally)
	rep.Pass = Passed(rep.Checks)
	if f, ok := sr.(floorer); ok && rc.floor {
		if rep.Floor, err = f.floor(ctx, rc); err != nil {
			return rep, fmt.Errorf("%s: API floor: %w", t.name(), err)
		}
	}
	return rep, nil
}

// procCPU is the CPU time (user and system) process pid has used, from /proc/pid/stat (10 ms
// resolution: over thousands of calls it is the sink's own CPU per call).
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticksPerSecond, nil
}
