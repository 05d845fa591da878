package agent2025

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDirectUpstreamStreamParsing: the event-stream reader of the direct upstream path against
// hand-written streams (CRLF line ends, multi-line data, comments, other event names, a
// response to another id, a priming event) — the call's response is found, or the call is
// reported as having no answer.
func TestDirectUpstreamStreamParsing(t *testing.T) {
	b := &bridge{p: &Handler{}, caps: &mcp.ClientCapabilities{}}
	id := mustID(t, "actgate-1")
	resp := `{"jsonrpc":"2.0","id":"actgate-1","result":{"content":[]}}`
	for _, tc := range []struct {
		name, stream string
		found        bool
	}{
		{"plain", "data: " + resp + "\n\n", true},
		{"CRLF", "event: message\r\ndata: " + resp + "\r\n\r\n", true},
		{"no space after colon", "data:" + resp + "\n\n", true},
		{"multi-line data", "data: {\"jsonrpc\":\"2.0\",\n" + "data: \"id\":\"actgate-1\",\"result\":{}}\n\n", true},
		{"comment and priming event first", ": keep-alive\n\nid: s_0\nevent: prime\n\nid: s_1\ndata: " + resp + "\n\n", true},
		{"other event name skipped", "event: other\ndata: " + resp + "\n\n", false},
		{"response to another id", `data: {"jsonrpc":"2.0","id":"actgate-2","result":{}}` + "\n\n", false},
		{"response to a numeric id", `data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n", false},
		{"unterminated event", "data: " + resp + "\n", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.readStream(context.Background(), "s", "2025-06-18", strings.NewReader(tc.stream), id)
			if tc.found != (err == nil && got != nil) {
				t.Fatalf("found=%v err=%v, want found=%v", got != nil, err, tc.found)
			}
		})
	}
	if _, err := b.readStream(context.Background(), "s", "2025-06-18", strings.NewReader("data: {not json\n\n"), id); err == nil {
		t.Fatal("a malformed event was accepted")
	}
	long := "data: " + strings.Repeat("x", wire.MaxEventSize+1) + "\n\n"
	if _, err := b.readStream(context.Background(), "s", "2025-06-18", bytes.NewReader([]byte(long)), id); err == nil {
		t.Fatal("an oversized event was accepted")
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
