package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inspectorDir is the MCP Inspector CLI's build directory (package.json). The CLI is run from
// it: it finds its own package.json through a path relative to the working directory.
const inspectorDir = "node_modules/@modelcontextprotocol/inspector-cli/build"

// runInspector runs the Inspector CLI against url with args and returns the JSON it prints.
func runInspector(t *testing.T, url string, args ...string) any {
	t.Helper()
	abs, err := filepath.Abs(preload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"--import", abs, "index.js", url}, args...)...)
	cmd.Dir = inspectorDir
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("inspector %s %v: %v\n%s%s", url, args, err, tail(string(out), 2000), tail(stderr, 2000))
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("inspector %s %v: not JSON: %v\n%s", url, args, err, tail(string(out), 2000))
	}
	return doc
}

// inspector runs the MCP Inspector CLI (@modelcontextprotocol/inspector-cli) against
// server-everything directly and through the gate at /{server}/mcp, the form it reaches (it
// takes a URL ending in /mcp for streamable HTTP): tools/list (less the gate's additions) and a
// tools/call are the same both ways.
func inspector(t *testing.T, direct, gated string) {
	if _, err := os.Stat(filepath.Join(inspectorDir, "index.js")); err != nil {
		t.Fatalf("the Inspector CLI is missing: run hack/interop.sh first: %v", err)
	}
	type op struct {
		name string
		args []string
		norm func(any) any
	}
	tools := func(doc any) any {
		m, _ := doc.(map[string]any)
		return withoutAdditions(m["tools"])
	}
	same := func(doc any) any { return doc }
	var rows []row
	for _, o := range []op{
		{"tools/list", []string{"--method", "tools/list"}, tools},
		{"tools/call echo", []string{"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hello <gate> & inspector"}, same},
	} {
		d, _ := json.Marshal(o.norm(runInspector(t, direct, o.args...)))
		g, _ := json.Marshal(o.norm(runInspector(t, gated, o.args...)))
		rows = append(rows, row{name: o.name, direct: string(d), gated: string(g), same: string(d) == string(g)})
		if o.name == "tools/list" && !strings.Contains(string(d), `"echo"`) {
			t.Fatalf("the Inspector listed no echo tool directly: %s", d)
		}
	}
	report(t, fmt.Sprintf("MCP Inspector CLI 1.0.3, server-everything at %s", gated), "inspector/", rows)
}
