package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/test/testutil"
)

// The pinned packages' entry points, relative to this directory (package.json).
const (
	conformanceCLI = "node_modules/@modelcontextprotocol/conformance/dist/index.js"
	// conformanceNextCLI is the 0.2.0 pre-release, installed under its npm alias next to 0.1.16.
	conformanceNextCLI = "node_modules/conformance-next/dist/index.js"
	everythingJS       = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	reference2025JS    = "reference2025.mjs"
	server2026JS       = "server2026.mjs"
	preload            = "./preload.mjs"
)

// rig is one run of the suite: the upstream servers, and `actgate serve` in front of them.
type rig struct {
	// everything and reference are the servers' own endpoints; modern is server2026.mjs
	// (2026-07-28 and the SDK's stateless 2025 fallback), legacy the same tools served by a
	// stateful 2025 server only (sessions, no 2026-07-28).
	everything, reference, modern, legacy string
	// gate is the gate's base URL; a server's gated endpoint is gate + /mcp/{server}. gateNext
	// is a second gate of the same configuration, for the conformance 0.2.0 runs and the v2
	// walks: every conformance scenario opens sessions of its own, more than one agent's
	// session limit holds for all the suites on one gate.
	gate, gateNext string
	serve          *testutil.ServeProcess
}

func (r *rig) gated(server string) string     { return r.gate + "/mcp/" + server }
func (r *rig) gatedNext(server string) string { return r.gateNext + "/mcp/" + server }

// requireNodeModules fails the test, loudly, when hack/interop.sh has not installed the pinned
// packages: a suite that cannot run is not a suite that passed.
func requireNodeModules(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: the interop suite needs Node 20 or later (hack/interop.sh)")
	}
	for _, f := range []string{conformanceCLI, conformanceNextCLI, everythingJS, "node_modules/@modelcontextprotocol/sdk/package.json", "node_modules/@modelcontextprotocol/server/package.json"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is missing: run hack/interop.sh (npm ci of test/interop/package-lock.json) first: %v", f, err)
		}
	}
}

// startNode runs a Node server with the suite's preload on a free loopback port and waits until
// it accepts connections; it is killed when the test ends.
func startNode(t *testing.T, name string, env []string, args ...string) (addr string, p *testutil.Process) {
	t.Helper()
	addr = testutil.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p = testutil.StartProcess(t, "node", args, append([]string{"PORT=" + port, "NODE_NO_WARNINGS=1"}, env...), true)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return addr, p
		}
		if !p.Alive() || time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s:\n%s", name, addr, p.Out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func startRig(t *testing.T) *rig {
	t.Helper()
	requireNodeModules(t)
	bin := testutil.BuildActgate(t, "")
	ev, _ := startNode(t, "server-everything", nil, "--import", preload, everythingJS, "streamableHttp")
	ref, _ := startNode(t, "reference2025.mjs", nil, "--import", preload, reference2025JS)
	modern, _ := startNode(t, "server2026.mjs", nil, "--import", preload, server2026JS)
	legacy, _ := startNode(t, "server2026.mjs (2025 only)", []string{"SERVER2026_LEGACY=1"}, "--import", preload, server2026JS)
	r := &rig{everything: "http://" + ev + "/mcp", reference: "http://" + ref + "/mcp", modern: "http://" + modern + "/mcp", legacy: "http://" + legacy + "/mcp"}

	r.serve = r.startGate(t, bin)
	r.gate = r.serve.Base
	r.gateNext = r.startGate(t, bin).Base
	return r
}

// startGate starts one `actgate serve` of testdata/actgate.yaml in front of the rig's servers,
// with a data directory of its own.
func (r *rig) startGate(t *testing.T, bin string) *testutil.ServeProcess {
	t.Helper()
	data := t.TempDir()
	tmpl, err := os.ReadFile("testdata/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("{{DATA}}", data, "{{EVERYTHING}}", r.everything, "{{REFERENCE}}", r.reference,
		"{{MODERN}}", r.modern, "{{LEGACY}}", r.legacy).Replace(string(tmpl))
	path := filepath.Join(t.TempDir(), "actgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := testutil.StartServe(t, bin, []string{"serve", "--config", path}, filepath.Join(data, "endpoint"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("actgate serve output:\n%s", serve.Out.String())
		}
	})
	return serve
}

// runNode runs a Node program of the suite to completion (bounded) and returns its stdout.
func runNode(t *testing.T, timeout time.Duration, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"--import", preload}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.Bytes(), fmt.Errorf("node %s: timed out after %s\n%s", strings.Join(args, " "), timeout, stderr.String())
	}
	if err != nil {
		err = fmt.Errorf("node %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return stdout.Bytes(), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestInterop runs the conformance scenarios and the feature walk, each directly and gated.
func TestInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Node servers and actgate serve")
	}
	r := startRig(t)
	t.Run("conformance", func(t *testing.T) {
		for _, up := range []struct{ name, direct string }{{"reference", r.reference}, {"everything", r.everything}} {
			t.Run(up.name, func(t *testing.T) { conformance(t, conformance0116, up.name, up.direct, r.gated(up.name)) })
		}
	})
	// The 0.2.0 pre-release: the 2026-07-28 requirements against server2026.mjs directly and
	// through the gate in front of it, and through the gate in front of the same server serving
	// only the 2025 revisions (the gate speaks 2026-07-28 to the agent, 2025-11-25 upstream);
	// the 2025-11-25 requirements against the stateful reference2025.mjs.
	t.Run("conformance-0.2.0", func(t *testing.T) {
		t.Run("2026-07-28/modern", func(t *testing.T) { conformance(t, next2026, "modern", r.modern, r.gatedNext("modern")) })
		t.Run("2026-07-28/legacy", func(t *testing.T) { conformance(t, next2026, "legacy", r.modern, r.gatedNext("legacy")) })
		t.Run("2025-11-25/reference", func(t *testing.T) {
			conformance(t, next2025, "reference", r.reference, r.gatedNext("reference"))
		})
	})
	t.Run("walk", func(t *testing.T) { walk(t, r.everything, r.gated("everything")) })
	// The same walk against the suite's stateful 2025-11-25 server (reference2025.mjs): its tools
	// are the conformance suite's (a feature that needs one of server-everything's fails alike
	// both ways), its transport and its session handling are the TypeScript SDK server's own.
	t.Run("walk-reference", func(t *testing.T) {
		walkOf(t, "reference2025.mjs", "walk-reference/", r.reference, r.gated("reference"))
	})
	t.Run("inspector-path", func(t *testing.T) { walk(t, r.everything, r.gate+"/everything/mcp") })
	// The TypeScript SDK v2 client (2.4.0) in each revision the server speaks: server-everything
	// and reference2025.mjs 2025-11-25 only, server2026.mjs both.
	t.Run("walk2", func(t *testing.T) {
		for _, w := range []struct{ server, revision, plan, direct string }{
			{"everything", "2025-11-25", "everything", r.everything},
			{"reference", "2025-11-25", "conformance", r.reference},
			{"modern", "2025-11-25", "conformance", r.modern},
			{"modern", "2026-07-28", "conformance", r.modern},
		} {
			t.Run(w.server+"/"+w.revision, func(t *testing.T) {
				walk2Of(t, w.server, "walk2/"+w.server+"/"+w.revision+"/", w.revision, w.plan, w.direct, r.gatedNext(w.server))
			})
		}
	})
	t.Run("inspector", func(t *testing.T) { inspector(t, r.everything, r.gate+"/everything/mcp") })
	t.Run("refusal", func(t *testing.T) { refusal(t, r.gated("guarded")) })
}

// refusal: the gate's refusal of a tool with an outputSchema, as the TypeScript SDK client sees
// it after listing the tools: an error result it accepts (its callTool validates structured
// content against the cached schema and would throw -32602), with the EF code, and without
// structuredContent.
func refusal(t *testing.T, url string) {
	out, err := runNode(t, time.Minute, "refusal.mjs", url, "get-structured-content", `{"location":"Chicago"}`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Listed, OutputSchema, Threw, IsError, Structured bool
		Error, Code                                      string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("refusal.mjs: %v: %s", err, out)
	}
	t.Logf("TypeScript SDK 1.32 callTool of a denied tool with an outputSchema: %s", bytes.TrimSpace(out))
	if !got.Listed || !got.OutputSchema || got.Threw || !got.IsError || got.Code != "EF_POLICY_DENIED" || got.Structured {
		t.Errorf("the refusal as the TypeScript client saw it: %+v, want an error result with EF_POLICY_DENIED and no structuredContent", got)
	}
}
