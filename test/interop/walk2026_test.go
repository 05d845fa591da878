package interop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
)

// walk2026 is walk2026.mjs's transcript.
type walk2026 struct {
	Features []struct {
		Feature string          `json:"feature"`
		OK      bool            `json:"ok"`
		Value   json.RawMessage `json:"value"`
		Error   string          `json:"error"`
	} `json:"features"`
}

func (w walk2026) get(t *testing.T, feature string) (json.RawMessage, string) {
	t.Helper()
	for _, f := range w.Features {
		if f.Feature == feature {
			if !f.OK {
				return nil, f.Error
			}
			return f.Value, ""
		}
	}
	t.Fatalf("transcript has no %q: %+v", feature, w)
	return nil, ""
}

func run2026(t *testing.T, url string) walk2026 {
	t.Helper()
	out, err := runNode(t, 2*time.Minute, "walk2026.mjs", url)
	if err != nil {
		t.Fatalf("walk2026 %s: %v", url, err)
	}
	var w walk2026
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatalf("walk2026 %s: not a transcript: %v\n%s", url, err, tail(string(out), 2000))
	}
	return w
}

func bankTools2026() []mcptest.Tool {
	echo := func(prefix string) func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
		return func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text(prefix + string(args)), nil
		}
	}
	return []mcptest.Tool{
		{Name: "get_balance", Handler: echo("balance: 100 ")},
		{Name: "ticket_create", Handler: echo("ticket created: ")},
		{Name: "send_payment", Handler: echo("paid: ")},
	}
}

// TestWalk2026 runs the TypeScript SDK v2 client pinned to MCP 2026-07-28 directly against a
// 2026-07-28 server and through the gate in front of it and of a stateful server. Gated, the
// client connects in its own revision without a session, in front of either; every answer is
// the direct one except the gate's documented changes: the virtual tool in tools/list, the
// retry of a dispatched call answered from the journal (the upstream runs it once), and the
// refused call (an isError result with its EF code; the upstream never runs it).
func TestWalk2026(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Node and actgate serve")
	}
	requireNodeModules(t)
	if _, err := os.Stat("node_modules/@modelcontextprotocol/client/package.json"); err != nil {
		t.Fatalf("@modelcontextprotocol/client is missing: run hack/interop.sh first: %v", err)
	}
	stateless, err := mcptest.Start(bankTools2026(), mcptest.Options{Name: "bank-2026", Stateless: true, JSONResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stateless.Close() })
	stateful, err := mcptest.Start(bankTools2026(), mcptest.Options{Name: "bank-stateful"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stateful.Close() })

	bin := testutil.BuildActgate(t, "")
	data := t.TempDir()
	tmpl, err := os.ReadFile("testdata/actgate-2026.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("{{DATA}}", data, "{{STATELESS}}", stateless.URL, "{{STATEFUL}}", stateful.URL).Replace(string(tmpl))
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

	direct := run2026(t, stateless.URL)
	directRuns := stateless.Count("ticket_create")
	if v, e := direct.get(t, "connect"); e != "" || !strings.Contains(string(v), `"2026-07-28"`) {
		t.Fatalf("direct connect: %s %s", v, e)
	}
	// A stateful-only server cannot be reached by a client pinned to 2026-07-28: the gate is
	// what makes it reachable (recorded, not a difference the gate makes).
	if _, e := run2026(t, stateful.URL).get(t, "connect"); e == "" {
		t.Fatal("the pinned client connected directly to a stateful-only server")
	}
	for _, server := range []string{"stateless", "stateful"} {
		t.Run(server, func(t *testing.T) {
			up := map[string]*mcptest.Server{"stateless": stateless, "stateful": stateful}[server]
			before, paid := up.Count("ticket_create"), up.Count("send_payment")
			gated := run2026(t, serve.Base+"/mcp/"+server)
			rows := map[string]string{}
			for _, f := range direct.Features {
				dv, de := direct.get(t, f.Feature)
				gv, ge := gated.get(t, f.Feature)
				same := de == ge && string(dv) == string(gv)
				switch f.Feature {
				case "connect":
					var c struct {
						ProtocolVersion string  `json:"protocolVersion"`
						SessionID       *string `json:"sessionId"`
					}
					if ge != "" || json.Unmarshal(gv, &c) != nil || c.ProtocolVersion != "2026-07-28" || c.SessionID != nil {
						t.Fatalf("gated connect: %s %s", gv, ge)
					}
					same = true
				case "tools/list":
					var d, g []string
					_ = json.Unmarshal(dv, &d)
					_ = json.Unmarshal(gv, &g)
					g = without(g, "request_binding_moment")
					same = strings.Join(d, ",") == strings.Join(g, ",")
				case "tools/call ticket_create again":
					// The recorded result as first given (content, _meta, structuredContent and
					// isError the first call's, as the client decoded both) with the direct
					// retry's content; the replay is marked in the gate's Actgate-Replayed
					// header only, which the walk's fetch counted.
					first, _ := gated.get(t, "tools/call ticket_create")
					var g, d, g1 walkResult
					_ = json.Unmarshal(gv, &g)
					_ = json.Unmarshal(dv, &d)
					_ = json.Unmarshal(first, &g1)
					if ge != "" || !g.Replayed || g1.Replayed || d.Replayed || g.SameAsFirst == nil || !*g.SameAsFirst ||
						g.IsError != d.IsError || string(g.Content) != string(d.Content) {
						t.Fatalf("gated retry: %s %s; the gated first call %s, direct %s", gv, ge, first, dv)
					}
					same = true
				case "tools/call send_payment":
					var r struct {
						IsError bool   `json:"isError"`
						Code    string `json:"code"`
					}
					if json.Unmarshal(gv, &r) != nil || !r.IsError || r.Code != "EF_POLICY_DENIED" {
						t.Fatalf("gated refusal: %s %s", gv, ge)
					}
					same = true // refused: the gate's documented change
				}
				rows[f.Feature] = map[bool]string{true: "same", false: "differs"}[same]
				if !same {
					t.Errorf("%s differs: direct %s %s, gated %s %s", f.Feature, dv, de, gv, ge)
				}
			}
			if n := up.Count("ticket_create") - before; n != 1 {
				t.Errorf("the %s upstream ran ticket_create %d times for a call and its retry, want 1", server, n)
			}
			if n := up.Count("send_payment") - paid; n != 0 {
				t.Errorf("the %s upstream ran the refused send_payment %d times", server, n)
			}
			t.Logf("feature x direct/gated (%s upstream): %v", server, rows)
		})
	}
	if directRuns != 2 {
		t.Errorf("direct: ticket_create ran %d times for two calls, want 2", directRuns)
	}
}

// walkResult is a tools/call result as walk2026.mjs prints it.
type walkResult struct {
	IsError     bool            `json:"isError"`
	Content     json.RawMessage `json:"content"`
	Replayed    bool            `json:"replayed"`    // the answer carried Actgate-Replayed: true
	SameAsFirst *bool           `json:"sameAsFirst"` // a tool's second call: the whole result is the first's
}

func without(s []string, drop string) []string {
	out := s[:0:0]
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}
