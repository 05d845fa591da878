package agent2026

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestCancellationParamsRewrite: withRequestID sets requestId and keeps every other member;
// params that are not an object are refused.
func TestCancellationParamsRewrite(t *testing.T) {
	id, _ := jsonrpc.MakeID("actgate-12")
	for _, tc := range []struct{ in, want string }{
		{`{"requestId":7,"reason":"r","_meta":{"a":1}}`, `{"_meta":{"a":1},"reason":"r","requestId":"actgate-12"}`},
		{`{}`, `{"requestId":"actgate-12"}`},
		{`[]`, ""},
		{`null`, ""},
		{`7`, ""},
		{``, ""},
		{`{"requestId":`, ""},
	} {
		out, ok := withRequestID(json.RawMessage(tc.in), id)
		if (tc.want == "") == ok || (ok && string(out) != tc.want) {
			t.Errorf("withRequestID(%s) = %s, %v; want %q", tc.in, out, ok, tc.want)
		}
	}
}

// TestRelabel: what an upstream names by the leg's id (a listen's subscription id, a
// cancellation's requestId) is given back under the agent's; anything else, and params that do
// not parse, are left as they are.
func TestRelabel(t *testing.T) {
	up, _ := jsonrpc.MakeID("actgate-5")
	agent, _ := jsonrpc.MakeID(float64(7)) // as the decoder makes a number id
	ctx := withLegIDs(context.Background(), up, agent)
	for _, tc := range []struct{ method, in, want string }{
		{wire.NotifyToolsChanged, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"actgate-5"}}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}`},
		{wire.NotifyToolsChanged, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"actgate-6"}}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"actgate-6"}}`},
		{wire.NotifyCancelled, `{"requestId":"actgate-5","reason":"r"}`, `{"reason":"r","requestId":7}`},
		{wire.NotifyCancelled, `{"requestId":5}`, `{"requestId":5}`},
		{wire.NotifyProgress, `{"requestId":"actgate-5"}`, `{"requestId":"actgate-5"}`},
		{wire.NotifyToolsChanged, `[1]`, `[1]`},
		{wire.NotifyToolsChanged, `{"_meta":7}`, `{"_meta":7}`},
		{wire.NotifyToolsChanged, ``, ``},
	} {
		got := relabel(ctx, &jsonrpc.Request{Method: tc.method, Params: json.RawMessage(tc.in)})
		if string(got.Params) != tc.want {
			t.Errorf("relabel(%s %s) = %s, want %s", tc.method, tc.in, got.Params, tc.want)
		}
	}
	if got := relabelResult(ctx, json.RawMessage(`{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"actgate-5"}}`)); string(got) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"resultType":"complete"}` {
		t.Errorf("relabelResult = %s", got)
	}
	for _, raw := range []string{``, `null`, `[]`, `{"_meta":[]}`, `{"content":[]}`} {
		if got := relabelResult(ctx, json.RawMessage(raw)); string(got) != raw {
			t.Errorf("relabelResult(%s) = %s, want it unchanged", raw, got)
		}
	}
	m := &jsonrpc.Request{Method: wire.NotifyCancelled, Params: json.RawMessage(`{"requestId":"actgate-5"}`)}
	if relabel(context.Background(), m) != m {
		t.Error("relabel without a leg changed the message")
	}
}

// FuzzNotifyParsers: any notification params and result from an upstream, any cancellation
// params from an agent: rewritten or left alone, never a panic, and a rewrite keeps the JSON an
// object.
func FuzzNotifyParsers(f *testing.F) {
	f.Add(`{"requestId":"actgate-5","reason":"r"}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"actgate-5"}}`)
	f.Add(`{"requestId":7,"_meta":{}}`, `{"resultType":"complete"}`)
	f.Add(`[]`, `null`)
	f.Fuzz(func(t *testing.T, params, result string) {
		up, _ := jsonrpc.MakeID("actgate-5")
		agent, _ := jsonrpc.MakeID(float64(7)) // as the decoder makes a number id
		ctx := withLegIDs(context.Background(), up, agent)
		if out, ok := withRequestID(json.RawMessage(params), up); ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(out, &m) != nil || string(m["requestId"]) != `"actgate-5"` {
				t.Fatalf("withRequestID(%s) = %s", params, out)
			}
		}
		for _, method := range []string{wire.NotifyCancelled, wire.NotifyToolsChanged} {
			got := relabel(ctx, &jsonrpc.Request{Method: method, Params: json.RawMessage(params)})
			if string(got.Params) != params && !json.Valid(got.Params) {
				t.Fatalf("relabel(%s) = %s", params, got.Params)
			}
		}
		if got := relabelResult(ctx, json.RawMessage(result)); string(got) != result && !json.Valid(got) {
			t.Fatalf("relabelResult(%s) = %s", result, got)
		}
		_, _, _ = wire.ParseCancelled(json.RawMessage(params))
	})
}
