package stateless

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

func TestParseListen(t *testing.T) {
	long := `"` + strings.Repeat("x", MaxListenURI+1) + `"`
	many := make([]string, MaxListenURIs+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"u%d"`, i)
	}
	for _, tc := range []struct {
		params string
		code   ef.EFCode
	}{
		{`{}`, ef.EFListenInvalid},
		{`{"notifications":null}`, ef.EFListenInvalid},
		{`{"notifications":[]}`, ef.EFListenInvalid},
		{`{"notifications":"x"}`, ef.EFListenInvalid},
		{`{"notifications":{"toolsListChanged":1}}`, ef.EFListenInvalid},
		{`{"notifications":{"promptsListChanged":null}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourcesListChanged":"true"}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourceSubscriptions":null}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourceSubscriptions":"res://a"}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourceSubscriptions":[1]}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourceSubscriptions":[""]}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourceSubscriptions":[null]}}`, ef.EFListenInvalid},
		{`{"notifications":{"resourceSubscriptions":[` + long + `]}}`, ef.EFListenLimit},
		{`{"notifications":{"resourceSubscriptions":[` + strings.Join(many, ",") + `]}}`, ef.EFListenLimit},
	} {
		var params map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.params), &params); err != nil {
			t.Fatal(err)
		}
		_, err := ParseListen(params)
		if err == nil {
			t.Errorf("%s accepted", wire.Clip(tc.params, 80))
			continue
		}
		var data map[string]string
		_ = json.Unmarshal(err.Data, &data)
		if err.Code != wire.CodeInvalidParams || data[wire.MetaEFCode] != string(tc.code) {
			t.Errorf("%s: %d %v, want -32602 %s", wire.Clip(tc.params, 80), err.Code, data, tc.code)
		}
	}
	var params map[string]json.RawMessage
	_ = json.Unmarshal([]byte(`{"notifications":{"toolsListChanged":true,"promptsListChanged":false,"other":5,"resourceSubscriptions":["a","b","a"]}}`), &params)
	f, err := ParseListen(params)
	if err != nil || !f.Tools || f.Prompts || f.Resources || !slices.Equal(f.URIs, []string{"a", "b"}) {
		t.Fatalf("good filter: %+v %v", f, err)
	}
	honoured := HonoredFilter(f, json.RawMessage(`{"capabilities":{"tools":{},"resources":{"listChanged":true}}}`))
	if !honoured.Empty() {
		t.Fatalf("honoured %+v by an upstream without listChanged or subscribe", honoured)
	}
	honoured = HonoredFilter(f, json.RawMessage(`{"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}`))
	if !honoured.Tools || !slices.Equal(honoured.URIs, []string{"a", "b"}) {
		t.Fatalf("honoured %+v", honoured)
	}
}

func TestStampSubscription(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}`},
		{`null`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}`},
		{`{"uri":"a"}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"uri":"a"}`},
		{`{"uri":"a","_meta":{"k":1,"io.modelcontextprotocol/subscriptionId":"spoofed"}}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":7,"k":1},"uri":"a"}`},
	} {
		got, ok := StampSubscription(json.RawMessage(tc.in), json.RawMessage(`7`))
		if !ok || string(got) != tc.want {
			t.Errorf("stamp %s: %s %v, want %s", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `5`, `{"_meta":[]}`, `{"_meta":"x"}`} {
		if _, ok := StampSubscription(json.RawMessage(bad), json.RawMessage(`7`)); ok {
			t.Errorf("stamped %s", bad)
		}
	}
}

// FuzzParseListen: no params panic the filter parser, and an accepted filter is within the
// bounds, without repeats, and survives its own acknowledgement's encoding.
func FuzzParseListen(f *testing.F) {
	f.Add(`{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["res://a"]}}`)
	f.Add(`{"notifications":{"resourceSubscriptions":[1,"a"]}}`)
	f.Add(`{"notifications":null}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var params map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &params) != nil {
			return
		}
		flt, err := ParseListen(params)
		if err != nil {
			if err.Code != wire.CodeInvalidParams {
				t.Fatalf("code %d", err.Code)
			}
			return
		}
		if len(flt.URIs) > MaxListenURIs {
			t.Fatalf("%d URIs", len(flt.URIs))
		}
		seen := map[string]bool{}
		for _, u := range flt.URIs {
			if u == "" || len(u) > MaxListenURI || seen[u] {
				t.Fatalf("URI %q accepted", wire.Clip(u, 40))
			}
			seen[u] = true
		}
		if _, ok := StampSubscription(wire.JSONOrEmpty(map[string]any{"notifications": flt}), json.RawMessage(`1`)); !ok {
			t.Fatalf("acknowledgement of %+v not encodable", flt)
		}
		if _, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: wire.NotifyListenAck, Params: wire.JSONOrEmpty(map[string]any{"notifications": flt})}); err != nil {
			t.Fatal(err)
		}
	})
}
