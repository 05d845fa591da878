package mcpproxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStatelessInputRequired: a 2026-07-28 upstream answers the first round of a permitted
// call "input required"; the agent answers and continues. The first round was not executed,
// so the continuation is its own act and runs: were it the same act, its retry would be
// answered with the recorded input-required result and the call would never complete.
func TestStatelessInputRequired(t *testing.T) {
	var rounds, executed atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "mrtr", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ticket_confirm", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rounds.Add(1)
			if req.Params.RequestState == "" {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Confirm?", RequestedSchema: map[string]any{"type": "object"}}},
					RequestState:  "round-1",
				}, nil
			}
			executed.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed"}}}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(up.Close)
	_, gate := newGate(t, up.URL)
	_, _, endpoint := serveProxy(t, Config{Server: "bank", URL: up.URL, Gate: gate, Agent: agentName, CallTimeout: 5 * time.Second})

	asked := 0
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ticket_confirm", Arguments: map[string]any{"id": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != "confirmed" || asked != 1 {
		t.Fatalf("result %q (isError %v), agent asked %d times", text(res), res.IsError, asked)
	}
	if rounds.Load() != 2 || executed.Load() != 1 {
		t.Fatalf("upstream saw %d rounds and executed %d times, want 2 and 1", rounds.Load(), executed.Load())
	}
}
