package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// replayedResult is the upstream's result of the replay tests: _meta of its own on the result
// and on a content item, and structured content, which an agent framework may render.
func replayedResult(args string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Meta: mcp.Meta{"upstream.example/trace": "t-1"},
		Content: []mcp.Content{
			&mcp.TextContent{Text: "ticket created: " + args, Meta: mcp.Meta{"upstream.example/lang": "en"}},
			&mcp.TextContent{Text: "second block"},
		},
		StructuredContent: map[string]any{"ticket": 7},
	}
}

// TestReplayKeepsContent: the answer a retry gets from the journal carries, as its JSON-RPC
// result, the first answer's result byte for byte (content, structuredContent, isError and
// _meta: nothing added that an agent framework would hand its model), and the replay is
// marked only in the gate's HTTP header Actgate-Replayed: true, absent from the first
// answer; the upstream runs the call once. In both revisions: a 2025 session's call on the
// direct path, through the SDK's handler (Config.sdkOnly, and a request without
// Mcp-Protocol-Version, which the direct path leaves to the SDK), after a first answer on an
// event stream (the upstream logged during the call), and a 2026-07-28 call.
func TestReplayKeepsContent(t *testing.T) {
	tools := bankTools()
	for i := range tools {
		if tools[i].Name == "ticket_create" {
			tools[i].Handler = func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
				return replayedResult(string(args)), nil
			}
		}
	}
	type answer struct {
		result  json.RawMessage
		header  http.Header
		isEvent bool
	}
	resultOf := func(t *testing.T, raw []byte, hdr http.Header) answer {
		t.Helper()
		isEvent := strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream")
		if i := bytes.LastIndex(raw, []byte("data: ")); isEvent && i >= 0 {
			raw = bytes.SplitN(raw[i+6:], []byte("\n"), 2)[0]
		}
		var m struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || len(m.Result) == 0 {
			t.Fatalf("not a result: %s (%v)", raw, err)
		}
		return answer{m.Result, hdr, isEvent}
	}
	post := func(t *testing.T, endpoint, body string, hdr map[string]string) answer {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d: %s", resp.StatusCode, raw)
		}
		return resultOf(t, raw, resp.Header)
	}
	session := func(t *testing.T, f *fixture, version string, withHeader bool) func(t *testing.T, id string) answer {
		s := newRawSession(t, f.endpoint())
		if version == "2025-11-25" {
			s = newRawSession1125(t, f.endpoint())
			s.post(`{"jsonrpc":"2.0","id":99,"method":"logging/setLevel","params":{"level":"debug"}}`)
		}
		return func(t *testing.T, id string) answer {
			hdr := map[string]string{"Mcp-Session-Id": s.session}
			if withHeader {
				hdr["Mcp-Protocol-Version"] = s.version
			}
			return post(t, f.endpoint(), `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"replayed"}}}`, hdr)
		}
	}
	for _, tc := range []struct {
		name string
		// setup returns the call (by its JSON-RPC id text) and the upstream's run count.
		setup       func(t *testing.T) (call func(t *testing.T, id string) answer, ran func() int64)
		firstStream bool
	}{
		{"2025 direct", func(t *testing.T) (func(*testing.T, string) answer, func() int64) {
			f := newFixture(t, fixtureOpts{tools: tools})
			return session(t, f, "", true), func() int64 { return int64(f.up.Count("ticket_create")) }
		}, false},
		{"2025 SDK handler", func(t *testing.T) (func(*testing.T, string) answer, func() int64) {
			f := newFixture(t, fixtureOpts{tools: tools, configure: sdkOnly(true)})
			return session(t, f, "", true), func() int64 { return int64(f.up.Count("ticket_create")) }
		}, false},
		{"2025 without Mcp-Protocol-Version", func(t *testing.T) (func(*testing.T, string) answer, func() int64) {
			f := newFixture(t, fixtureOpts{tools: tools})
			return session(t, f, "", false), func() int64 { return int64(f.up.Count("ticket_create")) }
		}, false},
		{"2025 first answer on an event stream", func(t *testing.T) (func(*testing.T, string) answer, func() int64) {
			f := newFixture(t, fixtureOpts{tools: bankTools()[:1], upstream: mcptest.Options{EventStore: true}})
			ran := sdkTicketTool(f, func(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "working"})
				return replayedResult(string(req.Params.Arguments))
			})
			return session(t, f, "2025-11-25", true), ran.Load
		}, true},
		{"2026-07-28", func(t *testing.T) (func(*testing.T, string) answer, func() int64) {
			f := newFixture(t, fixtureOpts{tools: tools})
			return func(t *testing.T, id string) answer {
				body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"replayed 2026"},` +
					`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
				return post(t, f.endpoint(), body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_create"})
			}, func() int64 { return int64(f.up.Count("ticket_create")) }
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, ran := tc.setup(t)
			first := call(t, "1")
			retry := call(t, "2")
			if n := ran(); n != 1 {
				t.Fatalf("the upstream ran the call %d times for a call and its retry, want 1", n)
			}
			if first.isEvent != tc.firstStream {
				t.Fatalf("the first answer is an event stream: %v, want %v", first.isEvent, tc.firstStream)
			}
			if !bytes.Equal(first.result, retry.result) {
				t.Fatalf("the retry's result differs from the first answer's:\n first %s\n retry %s", first.result, retry.result)
			}
			if !bytes.Contains(first.result, []byte(`"upstream.example/trace"`)) || bytes.Contains(first.result, []byte("actgate.io/")) {
				t.Fatalf("the first answer is not the upstream's result as written: %s", first.result)
			}
			if v := first.header.Values(HeaderReplayed); len(v) != 0 {
				t.Errorf("the first answer carries %s: %q", HeaderReplayed, v)
			}
			if v := retry.header.Values(HeaderReplayed); len(v) != 1 || v[0] != "true" {
				t.Errorf("the retry's answer carries %s %q, want one \"true\"", HeaderReplayed, v)
			}
		})
	}
}
