package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/rig"
)

const payToken = rig.PayToken

func startUpstreams(t testing.TB) *rig.Upstreams { return rig.StartUpstreams(t, true) }

// startUpstream runs a counting MCP server with the named tools; each answers with its own
// name and arguments.
func startUpstream(t testing.TB, name string, tools ...string) *mcptest.Server {
	t.Helper()
	return rig.StartUpstream(t, mcptest.Options{Name: name, Samples: true}, tools...)
}

// config renders testdata/actgate.yaml for these upstreams and data dir.
func config(t testing.TB, u *rig.Upstreams, dataDir string) []byte {
	t.Helper()
	return rig.Config(t, "testdata/actgate.yaml", u, dataDir)
}

// gate is the conformance policy's gate, in-process: the gate `actgate serve` runs
// (internal/standalone: gateconfig, bbolt store, receipt log, sink, one MCP proxy per server),
// served over loopback HTTP.
type gate struct{ *rig.Gate }

func newGate(t testing.TB) *gate {
	t.Helper()
	return &gate{rig.Start(t, "testdata/actgate.yaml", true)}
}

// agent is an MCP client session (the SDK's) to endpoint.
func agent(t testing.TB, endpoint string) *mcp.ClientSession {
	return rig.Agent(t, "conformance-agent", endpoint)
}

// call makes one tools/call; provenance "" declares none.
var call = rig.Call

func code(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

// invokedFalse checks the refusal's §17 error object says invoked=false.
func invokedFalse(t testing.TB, r *mcp.CallToolResult) {
	t.Helper()
	if err := rig.NotInvoked(r); err != nil {
		t.Error(err)
	}
}

// resolveOption has alice choose an option of the moment an escalation returned.
func (g *gate) resolveOption(r *mcp.CallToolResult, option int) {
	g.T.Helper()
	id, _ := r.Meta[mcpproxy.MetaMomentID].(string)
	digest, _ := r.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	if id == "" || !strings.HasPrefix(digest, "sha256:") {
		g.T.Fatalf("not an escalation: %+v", r.Meta)
	}
	b := rig.OptionResolution(digest, option)
	rr, err := g.Sink.Resolve(context.Background(), id, "alice", b)
	if err != nil || rr.AuthorityID == "" {
		g.T.Fatalf("resolve %s: %+v %v", id, rr, err)
	}
}

// parallel runs fns at once and waits for all.
var parallel = rig.Parallel
