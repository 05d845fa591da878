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
)

// TestReplayKeepsContent: the result a retry gets from the journal has the content items the
// first answer had, byte for byte (no member added to any item: an agent framework renders
// content to the model, and the model must read on the retry what it read the first time),
// and its own _meta is the first answer's with the one member the gate documents,
// actgate.io/replayed, added; in both revisions, for a result and a content item that carry
// _meta of the upstream's own.
func TestReplayKeepsContent(t *testing.T) {
	tools := bankTools()
	for i := range tools {
		if tools[i].Name == "ticket_create" {
			tools[i].Handler = func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{
					Meta: mcp.Meta{"upstream.example/trace": "t-1"},
					Content: []mcp.Content{
						&mcp.TextContent{Text: "ticket created: " + string(args), Meta: mcp.Meta{"upstream.example/lang": "en"}},
						&mcp.TextContent{Text: "second block"},
					},
				}, nil
			}
		}
	}
	f := newFixture(t, fixtureOpts{tools: tools})
	type result struct {
		Meta    map[string]json.RawMessage `json:"_meta"`
		Content json.RawMessage            `json:"content"`
	}
	resultOf := func(t *testing.T, raw []byte) result {
		t.Helper()
		var m struct {
			Result *result `json:"result"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || m.Result == nil {
			t.Fatalf("not a result: %s (%v)", raw, err)
		}
		return *m.Result
	}
	post2026Raw := func(t *testing.T, id string) []byte {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"replayed 2026"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, err := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_create"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if i := bytes.LastIndex(raw, []byte("data: ")); i >= 0 {
			raw = bytes.SplitN(raw[i+6:], []byte("\n"), 2)[0]
		}
		return raw
	}
	rs := newRawSession(t, f.endpoint())
	for _, tc := range []struct {
		name string
		call func(t *testing.T, id string) []byte
	}{
		{"2025", func(t *testing.T, id string) []byte {
			return rs.request(id, "tools/call", `{"name":"ticket_create","arguments":{"title":"replayed 2025"}}`)
		}},
		{"2026-07-28", post2026Raw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.up.Count("ticket_create")
			first := resultOf(t, tc.call(t, "1"))
			retry := resultOf(t, tc.call(t, "2"))
			if n := f.up.Count("ticket_create") - before; n != 1 {
				t.Fatalf("the upstream ran the call %d times for a call and its retry, want 1", n)
			}
			if !bytes.Equal(first.Content, retry.Content) {
				t.Fatalf("retry content differs from the first answer's:\n first %s\n retry %s", first.Content, retry.Content)
			}
			if string(retry.Meta[MetaReplayed]) != "true" {
				t.Fatalf("retry _meta %v lacks %s", retry.Meta, MetaReplayed)
			}
			delete(retry.Meta, MetaReplayed)
			if len(retry.Meta) != len(first.Meta) || string(retry.Meta["upstream.example/trace"]) != string(first.Meta["upstream.example/trace"]) {
				t.Fatalf("retry _meta (less %s) %v, want the first answer's %v", MetaReplayed, retry.Meta, first.Meta)
			}
		})
	}
}
