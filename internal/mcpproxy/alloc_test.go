package mcpproxy

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolsCallAllocations guards third_party/go-sdk/PATCHES.md: the MCP Go SDK v1.8.0 decoded
// every message through a Decoder that allocated a fresh 32 KiB buffer, several per message,
// and that allocation rate was most of the CPU a tools/call cost and the tail of the gate's
// latency (tool-use-binding §22 T-F). With the patched SDK a direct hot-path tools/call
// (agent client and upstream server) allocates about 19 KB and one through the proxy about 43 KB
// (unpatched: 351 KB and 721 KB); the bounds, about three times the patched figures, fail the
// test if the replace is dropped or a release brings the buffer back.
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
	t.Logf("bytes allocated per tools/call, whole process: direct %d, through the proxy %d", d, g)
	if d > 64<<10 {
		t.Errorf("a direct tools/call allocates %d bytes; more than 64 KiB means the SDK allocates a read buffer per message again (third_party/go-sdk/PATCHES.md)", d)
	}
	if g > 160<<10 {
		t.Errorf("a tools/call through the proxy allocates %d bytes; more than 160 KiB means the SDK allocates a read buffer per message again (third_party/go-sdk/PATCHES.md)", g)
	}
}
