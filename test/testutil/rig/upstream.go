package rig

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// PayToken is the bearer token the gate presents to the pay server (the file {{PAYTOKEN}} of
// the rigs' configuration names holds it).
const PayToken = "pay-upstream-token"

// EchoTools are MCP tools that each answer with their own name and arguments.
func EchoTools(names ...string) []mcptest.Tool {
	ts := make([]mcptest.Tool, 0, len(names))
	for _, tl := range names {
		ts = append(ts, mcptest.Tool{Name: tl, Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text(tl + " " + string(args)), nil
		}})
	}
	return ts
}

// StartUpstream runs a counting MCP server with the named EchoTools, closed when t ends.
func StartUpstream(t testing.TB, opts mcptest.Options, tools ...string) *mcptest.Server {
	t.Helper()
	s, err := mcptest.Start(EchoTools(tools...), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Upstreams are the three MCP servers of the rigs' policy (testdata/actgate.yaml).
type Upstreams struct {
	Tools, Pay, Browser *mcptest.Server
}

// StartUpstreams runs the three servers; samples adds mcptest's sample resource, template and
// prompt to each.
func StartUpstreams(t testing.TB, samples bool) *Upstreams {
	t.Helper()
	return &Upstreams{
		Tools:   StartUpstream(t, mcptest.Options{Name: "tools", Samples: samples}, "search", "ticket_create", "email_send"),
		Pay:     StartUpstream(t, mcptest.Options{Name: "pay", Samples: samples}, "payout_create"),
		Browser: StartUpstream(t, mcptest.Options{Name: "browser", Samples: samples}, "computer_submit"),
	}
}

// Config renders the configuration file at path for these upstreams and data dir: {{DATA}},
// {{PAYTOKEN}} (a file beside dataDir holding PayToken), {{TOOLS}}, {{PAY}} and {{BROWSER}}.
func Config(t testing.TB, path string, u *Upstreams, dataDir string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(filepath.Dir(dataDir), "pay.token")
	if err := os.WriteFile(tok, []byte(PayToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer("{{DATA}}", dataDir, "{{PAYTOKEN}}", tok, "{{TOOLS}}", u.Tools.URL,
		"{{PAY}}", u.Pay.URL, "{{BROWSER}}", u.Browser.URL).Replace(string(raw)))
}
