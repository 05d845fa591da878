package rig

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Agent is an MCP client session (the SDK's) named name to endpoint, a new session each time,
// closed when t ends. Connecting is bounded by 20 s.
func Agent(t testing.TB, name, endpoint string) *mcp.ClientSession {
	t.Helper()
	return AgentAt(t, name, endpoint, "2025-11-25")
}

// AgentAt is Agent offering MCP revision version first; "" offers the SDK's default (its newest).
func AgentAt(t testing.TB, name, endpoint, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Replays counts the HTTP answers an agent received that the gate marked a journal replay
// (mcpproxy.HeaderReplayed: "true"): the SDK's client session does not show response headers,
// so a test reads the mark here, through the session's own HTTP client.
type Replays struct {
	Base http.RoundTripper // nil: http.DefaultTransport
	n    atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (r *Replays) RoundTrip(req *http.Request) (*http.Response, error) {
	return wire.ReplayCounter{Base: r.Base, N: &r.n}.RoundTrip(req)
}

// Count is the number of answers marked a replay so far.
func (r *Replays) Count() int64 { return r.n.Load() }

// AgentReplays is Agent whose answers marked a journal replay are counted in the Replays
// returned.
func AgentReplays(t testing.TB, name, endpoint string) (*mcp.ClientSession, *Replays) {
	t.Helper()
	rp := &Replays{}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true, HTTPClient: &http.Client{Transport: rp}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, rp
}

// Replayed makes one tools/call on cs, whose answers rp counts (AgentReplays), and reports
// whether its answer was marked a journal replay.
func Replayed(t testing.TB, cs *mcp.ClientSession, rp *Replays, tool, args, provenance string) (*mcp.CallToolResult, bool) {
	t.Helper()
	before := rp.Count()
	res := Call(t, cs, tool, args, provenance)
	return res, rp.Count() > before
}

// SameResult reports, as an error, how two results the SDK's client decoded differ: a
// replay's result is the first answer's as it was given.
func SameResult(first, again *mcp.CallToolResult) error {
	a, err := json.Marshal(first)
	if err != nil {
		return err
	}
	b, err := json.Marshal(again)
	if err != nil {
		return err
	}
	if string(a) != string(b) {
		return fmt.Errorf("results differ:\n first %s\n again %s", a, b)
	}
	return nil
}

// Call makes one tools/call; provenance "" declares none.
func Call(t testing.TB, cs *mcp.ClientSession, tool, args, provenance string) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
	if provenance != "" {
		p.Meta = mcp.Meta{mcpproxy.MetaProvenance: provenance}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

// NotInvoked checks that r is a refusal whose §17 error object says invoked=false: nil when
// it is, an error naming what r is otherwise.
func NotInvoked(r *mcp.CallToolResult) error {
	b, _ := json.Marshal(r.StructuredContent)
	var sc struct {
		Error struct {
			Invoked *bool `json:"invoked"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &sc); err != nil || sc.Error.Invoked == nil || *sc.Error.Invoked || !r.IsError {
		return fmt.Errorf("refusal is not an isError result with invoked=false: %s", b)
	}
	return nil
}

// OptionResolution is the §7.3 resolution object of an option choice, wrapped as envelope-04
// §8.3 delivers it.
func OptionResolution(digest string, option int) []byte {
	b, _ := json.Marshal(map[string]any{envelope.MemberResolution: map[string]any{
		"envelope_digest": digest, "resolution": "option", "option_idx": option}})
	return b
}

// Parallel runs fns at once and waits for all.
func Parallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}
