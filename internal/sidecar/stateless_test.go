package sidecar

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/review"
)

// TestStatelessClientThroughSidecar: the sidecar runs the same proxy, so an MCP 2026-07-28
// client (no session) is served in its revision: a permitted call is one Permit, one
// journaled dispatch, one upstream run; the same call again is the recorded result.
func TestStatelessClientThroughSidecar(t *testing.T) {
	f := newFixture(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent-2026", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.srv.URL + mcpproxy.Path("payments")}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || cs.ID() != "" {
		t.Fatalf("client fell back: version %q, session %q", v, cs.ID())
	}
	args := json.RawMessage(`{"amount":250,"to":"ACME"}`)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("permit refused: %v %s", err, text(res))
	}
	again, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: args})
	if err != nil || again.IsError || text(again) != text(res) {
		t.Fatalf("retry: %v %s, want the recorded %s", err, text(again), text(res))
	}
	if n := f.up.Count("send_payment"); n != 1 || f.stub.consumeCount() != 1 || f.stub.count(review.OperationPermit) != 1 {
		t.Fatalf("upstream ran %d times, %d consumes, %d permits; want 1 each", n, f.stub.consumeCount(), f.stub.count(review.OperationPermit))
	}
	calls := f.up.Calls()
	rec, err := f.store.Record(context.Background(), calls[len(calls)-1].OperationID)
	if err != nil || rec.State != journal.StateExecuted {
		t.Fatalf("journal record %+v %v", rec, err)
	}
}
