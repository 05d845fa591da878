package mcpproxy

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolsCallAllocations guards the gate's own allocations per hot-path tools/call. The MCP Go
// SDK's decoder allocates a fresh 32 KiB buffer for each value it decodes, several per message,
// and that allocation rate was most of the CPU a tools/call cost and the tail of the gate's
// latency (tool-use-binding §22 T-F); the gate decodes the messages on its path with
// wire.DecodeMessage instead (docs/performance.md "The MCP proxy's direct paths"). The agent
// client and the upstream server in this process are the SDK's, so a direct call (client and
// server) allocates about 350 KB; a call through the proxy adds the gate's own share, about
// 27 KB (about 160 KB with the SDK's decoder on the gate's path). The bound fails the test if the
// gate's path decodes with the SDK again.
func TestToolsCallAllocations(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	gated := f.agent()
	direct := connect(t, f.up.URL)
	perCall := func(cs *mcp.ClientSession) uint64 {
		const n = 200
		for range 20 {
			call(t, cs, "get_balance", `{"account":"main"}`, nil)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			call(t, cs, "get_balance", `{"account":"main"}`, nil)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	d, g := perCall(direct), perCall(gated)
	t.Logf("bytes allocated per tools/call, whole process: direct %d, through the proxy %d: the gate's own %d", d, g, int64(g)-int64(d))
	if own := int64(g) - int64(d); own > 96<<10 {
		t.Errorf("the gate allocates %d bytes per tools/call; more than 96 KiB means a message or result on its path is decoded by the SDK's decoder again", own)
	}
}
