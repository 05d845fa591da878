package attacks

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/rig"
)

// The standalone rows mount their attack on the gate `actgate serve` runs (internal/standalone:
// gateconfig, the bbolt store, the receipt log, the sink, one MCP proxy per server), with the
// official Go SDK's client as the agent and SDK servers (mcptest) as the upstreams, all over
// loopback HTTP; test/testutil/rig is the part test/conformance shares.

const (
	payToken  = rig.PayToken
	agentName = "attack-agent" // testdata/actgate.yaml agent.name
	principal = "alice"        // the principal the policy names for payouts and checkout
)

// startUpstream runs a counting MCP server with the named tools; each answers with its own name
// and arguments.
func startUpstream(t testing.TB, name string, tools ...string) *mcptest.Server {
	t.Helper()
	return rig.StartUpstream(t, mcptest.Options{Name: name}, tools...)
}

// gate is testdata/actgate.yaml's gate, in-process.
type gate struct{ *rig.Gate }

func newGate(t testing.TB) *gate {
	t.Helper()
	return newGateWith(t, nil)
}

// newGateWith is newGate with edit applied to the parsed configuration first. The in-process
// gate's agents connect without a token (agent.authentication none): agent authentication is
// attacked through a real `actgate serve` (standalone_test.go), which keeps the default.
func newGateWith(t testing.TB, edit func(*gateconfig.Config)) *gate {
	t.Helper()
	u := rig.StartUpstreams(t, false)
	cfg, err := gateconfig.Parse(rig.Config(t, "testdata/actgate.yaml", u, filepath.Join(t.TempDir(), "data")), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agent.Authentication = gateconfig.AuthNone
	if edit != nil {
		edit(cfg)
	}
	g := &gate{rig.StartGate(t, cfg)}
	g.Up = u
	return g
}

// journaled counts the journal's records in every state: an attack refused before consume
// leaves no record.
func (g *gate) journaled() int {
	g.T.Helper()
	n := 0
	for _, s := range []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateInvoked,
		journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate} {
		recs, err := g.Store.InState(context.Background(), s)
		if err != nil {
			g.T.Fatal(err)
		}
		n += len(recs)
	}
	return n
}

// authorityState reads an issued authority's state from the store.
func (g *gate) authorityState(id string) authority.State {
	g.T.Helper()
	rec, err := g.Store.Get(context.Background(), "", id)
	if err != nil {
		g.T.Fatalf("authority %s: %v", id, err)
	}
	return rec.State
}

// moment returns the registered moment id.
func (g *gate) moment(id string) sink.Moment {
	g.T.Helper()
	ms, err := g.Sink.Moments(context.Background(), sink.MomentFilter{})
	if err != nil {
		g.T.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	g.T.Fatalf("no moment %s", id)
	return sink.Moment{}
}

// momentCount is how many binding moments the gate holds.
func (g *gate) momentCount() int {
	g.T.Helper()
	ms, err := g.Sink.Moments(context.Background(), sink.MomentFilter{})
	if err != nil {
		g.T.Fatal(err)
	}
	return len(ms)
}

// agent is an MCP client session (the SDK's) to endpoint.
func agent(t testing.TB, endpoint string) *mcp.ClientSession {
	return rig.Agent(t, "attacker", endpoint)
}

// call makes one tools/call; provenance "" declares none.
var call = rig.Call

func code(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

// text joins a result's text blocks.
func text(r *mcp.CallToolResult) string { return testutil.Text(r) }

// refused checks that r is a refusal with code whose §17 error object says invoked=false.
func refused(t testing.TB, r *mcp.CallToolResult, want string) {
	t.Helper()
	if code(r) != want {
		t.Fatalf("code %q, want %s (meta %v) %s", code(r), want, r.Meta, text(r))
	}
	if err := rig.NotInvoked(r); err != nil {
		t.Fatal(err)
	}
}

// escalation returns the moment id and envelope digest an escalation or a registered proposal
// carries.
func escalation(t testing.TB, r *mcp.CallToolResult) (string, string) {
	t.Helper()
	id, _ := r.Meta[mcpproxy.MetaMomentID].(string)
	digest, _ := r.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	if id == "" || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("not a binding moment: %+v %s", r.Meta, text(r))
	}
	return id, digest
}

// resolution is the §7.3 resolution object of an option choice, wrapped as envelope-04 §8.3
// delivers it.
var resolution = rig.OptionResolution

// resolve has who choose option of a moment.
func (g *gate) resolve(momentID, who string, raw []byte) (sink.ResolveResult, error) {
	return g.Sink.Resolve(context.Background(), momentID, who, raw)
}

// parallel runs fns at once and waits for all.
var parallel = rig.Parallel
