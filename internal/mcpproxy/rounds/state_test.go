package rounds

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/stateless"
)

// TestParseRoundMembers: the continuation members a 2026-07-28 agent sends are refused with a
// clear error when malformed; a requestState passes only with the gate's MAC.
func TestParseRoundMembers(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	good := Mint(key, Claims{Call: "c1", Round: 1, Expires: 1, Bound: "b"})
	if c, err := Parse(key, jsonOf(good)); err != nil || c.Call != "c1" || c.Round != 1 {
		t.Fatalf("minted state: %+v %v", c, err)
	}
	for _, bad := range []string{`5`, `null`, `""`, `"x"`, `"ag1."`, `"ag1.e30"`, `"ag1.e30.AAAA"`, `"ag1.!!.AAAA"`, jsonOfStr(good + "x"),
		jsonOfStr(strings.Replace(good, "ag1.", "ag1.e", 1)), jsonOfStr("ag1." + strings.Repeat("A", MaxRequestState)), `{"a":1}`} {
		if _, err := Parse(key, json.RawMessage(bad)); err == nil {
			t.Errorf("requestState %s accepted", bad)
		}
	}
	if _, err := Parse([]byte("another key another key another k"), jsonOf(good)); err == nil {
		t.Error("state accepted under another key")
	}
	for _, bad := range []string{`5`, `[]`, `"x"`, `{"a":1}`, `{"a":[]}`, `{"a":null}`, `{"a":"x"}`, manyResponses(MaxInputRequests + 1)} {
		if _, err := ParseInputResponses(json.RawMessage(bad)); err == nil {
			t.Errorf("inputResponses %s accepted", bad)
		}
	}
	if m, err := ParseInputResponses(json.RawMessage(manyResponses(MaxInputRequests))); err != nil || len(m) != MaxInputRequests {
		t.Fatalf("%d responses: %v %v", MaxInputRequests, len(m), err)
	}
}

func jsonOf(s string) json.RawMessage {
	raw, _ := json.Marshal(s)
	return raw
}

func jsonOfStr(s string) string { return string(jsonOf(s)) }

func manyResponses(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":{}`, i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// FuzzParseRoundMembers: no requestState or inputResponses panics the parsers, and none but a
// minted state verifies.
func FuzzParseRoundMembers(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add(`"ag1.e30.AAAA"`, `{"a":{}}`)
	f.Add(`"x"`, `[]`)
	f.Fuzz(func(t *testing.T, state, responses string) {
		if c, err := Parse(key, json.RawMessage(state)); err == nil && c.Call == "" {
			t.Fatalf("accepted a state naming no call: %s", state)
		}
		if m, err := ParseInputResponses(json.RawMessage(responses)); err == nil && len(m) > MaxInputRequests {
			t.Fatalf("accepted %d responses", len(m))
		}
	})
}

// TestBindings: a round's state binds every part of what it continues (Bound changes with the
// agent, the server, the method, the request's binding, the operation, the round and each
// pending upstream request), and a request's binding is its method and params without the
// continuation's members and _meta, canonical (member order and escapes do not matter).
func TestBindings(t *testing.T) {
	id := func(v any) jsonrpc.ID {
		i, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	var b1, b2 [32]byte
	b2[0] = 1
	w := map[string]jsonrpc.ID{"r1-1": id("u1")}
	base := Bound("a", "s", "tools/call", b1, "op", 1, w)
	for name, got := range map[string]string{
		"agent":     Bound("b", "s", "tools/call", b1, "op", 1, w),
		"server":    Bound("a", "t", "tools/call", b1, "op", 1, w),
		"method":    Bound("a", "s", "prompts/get", b1, "op", 1, w),
		"binding":   Bound("a", "s", "tools/call", b2, "op", 1, w),
		"operation": Bound("a", "s", "tools/call", b1, "op2", 1, w),
		"round":     Bound("a", "s", "tools/call", b1, "op", 2, w),
		"request":   Bound("a", "s", "tools/call", b1, "op", 1, map[string]jsonrpc.ID{"r1-1": id("u2")}),
		"key":       Bound("a", "s", "tools/call", b1, "op", 1, map[string]jsonrpc.ID{"r1-2": id("u1")}),
		"more":      Bound("a", "s", "tools/call", b1, "op", 1, map[string]jsonrpc.ID{"r1-1": id("u1"), "r1-2": id("u2")}),
	} {
		if got == base {
			t.Errorf("Bound does not change with the %s", name)
		}
	}
	req := func(method, params string) *stateless.Request {
		var p map[string]json.RawMessage
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			t.Fatal(err)
		}
		return &stateless.Request{Req: &jsonrpc.Request{Method: method}, Params: p}
	}
	first, ok := RequestBinding(req("tools/call", `{"name":"pay","arguments":{"to":"bob","amount":5},"_meta":{"x":1}}`))
	if !ok {
		t.Fatal("no binding")
	}
	same, _ := RequestBinding(req("tools/call", `{"arguments":{"amount":5,"to":"\u0062ob"},"name":"pay","requestState":"s","inputResponses":{"r1-1":{}}}`))
	if same != first {
		t.Error("a continuation repeating the request has another binding")
	}
	for _, other := range []*stateless.Request{
		req("tools/call", `{"name":"pay","arguments":{"to":"bob","amount":6}}`),
		req("tools/call", `{"name":"pay2","arguments":{"to":"bob","amount":5}}`),
		req("prompts/get", `{"name":"pay","arguments":{"to":"bob","amount":5}}`),
	} {
		if b, _ := RequestBinding(other); b == first {
			t.Errorf("%s %s has the first request's binding", other.Req.Method, other.Params)
		}
	}
}
