package mcpproxy

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// heapInUse is the test process's live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestFinishedUpstreamLogsReleased: an agent reads a 512 KiB resource 48 times on each of two
// sessions in front of the Go SDK's server with an event store (every answer stream carries
// upstream ids). Each answer stream's log ends with only upstream ids, so no resumption of it is
// the gate's to answer (the upstream replays them): the gate keeps none of them. Before, each
// session kept the last 64 such logs whole (48 MiB here; ~4 GiB for one agent at the caps).
func TestFinishedUpstreamLogsReleased(t *testing.T) {
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{EventStore: true}})
	big := strings.Repeat("x", 512<<10)
	f.up.MCP().AddResource(&mcp.Resource{URI: "mcptest://big", Name: "big", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mcptest://big", Text: big}}}, nil
		})
	sessions := []*rawSession{newRawSession1125(t, f.endpoint()), newRawSession1125(t, f.endpoint())}
	before := heapInUse()
	for _, s := range sessions {
		for i := range 48 {
			status, ct, body := agentExchange(t, s, http.MethodPost,
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"mcptest://big"}}`, i+1), nil)
			if status != http.StatusOK || ct != "text/event-stream" || !strings.Contains(body, big) || !eventID.MatchString(body) {
				t.Fatalf("resources/read %d: HTTP %d %s, %d bytes (want a resumable event stream with the resource)", i, status, ct, len(body))
			}
		}
	}
	grown := heapInUse() - before
	t.Logf("heap after 96 reads of 512 KiB: %+d KiB", grown>>10)
	// The upstream's event store (in this process) keeps up to 10 MiB; the gate's logs of the
	// 96 streams would hold 48 MiB.
	if grown > 20<<20 {
		t.Fatalf("the test process holds %d MiB more after 96 finished answer streams carrying only upstream ids, want < 20 MiB", grown>>20)
	}
	// Each such stream is still resumed by the upstream: the gate relays the agent's
	// Last-Event-ID of it (answered by the upstream's replay, not refused by the gate).
	status, _, body := agentExchange(t, sessions[0], http.MethodPost, `{"jsonrpc":"2.0","id":99,"method":"resources/read","params":{"uri":"mcptest://big"}}`, nil)
	ids := eventID.FindAllStringSubmatch(body, -1)
	if status != http.StatusOK || len(ids) == 0 {
		t.Fatalf("resources/read: HTTP %d, ids %v", status, ids)
	}
	if status, _, _ := agentExchange(t, sessions[0], http.MethodGet, "", map[string]string{"Last-Event-ID": ids[0][1], "Accept": "text/event-stream"}); status != http.StatusOK {
		t.Fatalf("resumption after the upstream id %s: HTTP %d, want the upstream's replay", ids[0][1], status)
	}
}
