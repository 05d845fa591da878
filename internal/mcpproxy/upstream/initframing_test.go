package upstream

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestWithCapabilities: the gate's initialize answer takes the upstream's capabilities as
// written, plus tools; a body or capabilities it cannot read leave the answer as it was.
func TestWithCapabilities(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"logging":{}},"serverInfo":{"name":"up","version":"1"}}}`)
	got := WithCapabilities(body, json.RawMessage(`{"tasks":{"list":{}},"x-vendor":{"a":"<b>"}}`))
	var m struct {
		Result struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
			ServerInfo   json.RawMessage            `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	c := m.Result.Capabilities
	if string(c["tasks"]) != `{"list":{}}` || string(c["tools"]) != `{}` || string(c["x-vendor"]) != `{"a":"<b>"}` || c["logging"] != nil || m.Result.ServerInfo == nil {
		t.Fatalf("capabilities: %s", got)
	}
	for _, tc := range []struct{ body, caps string }{
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no"}}`, `{}`},
		{`not JSON`, `{}`},
		{string(body), `[1]`},
		{string(body), `{"tasks":`},
		{`{"jsonrpc":"2.0","id":0,"result":[1]}`, `{}`},
	} {
		if out := WithCapabilities([]byte(tc.body), json.RawMessage(tc.caps)); !bytes.Equal(out, []byte(tc.body)) {
			t.Errorf("WithCapabilities(%s, %s) changed the answer: %s", tc.body, tc.caps, out)
		}
	}
}

// TestUpstreamCapabilities: the capabilities are read from a JSON answer or from the response
// event of an event stream, and from nothing else.
func TestUpstreamCapabilities(t *testing.T) {
	resp := `{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tasks":{}}}}`
	for _, tc := range []struct {
		name   string
		stream bool
		answer string
		want   string
	}{
		{"JSON", false, resp, `{"tasks":{}}`},
		{"event stream", true, "id: 1\nevent: message\ndata: " + resp + "\n\n", `{"tasks":{}}`},
		{"event stream, CRLF, priming event first", true, "id: 0\r\ndata:\r\n\r\ndata: " + resp + "\r\n\r\n", `{"tasks":{}}`},
		{"a notification only", true, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n", ``},
		{"an error", false, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no"}}`, ``},
		{"capabilities not an object", false, `{"jsonrpc":"2.0","id":1,"result":{"capabilities":"all"}}`, ``},
		{"cut short", false, resp[:30], ``},
		{"nothing", false, ``, ``},
	} {
		var f InitFraming
		f.stream = tc.stream
		f.answer.WriteString(tc.answer)
		if got := string(f.UpstreamCapabilities()); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzInitAnswer feeds arbitrary bytes to the readers of the upstream's initialize answer:
// none panics, and the gate's initialize answer is left as it was or stays one JSON-RPC message.
func FuzzInitAnswer(f *testing.F) {
	f.Add([]byte(`{"task":{"taskId":"t-1","status":"working","ttl":60000}}`))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{\"tasks\":{}}}}\n\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"x":1}}}`))
	body := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, stream := range []bool{false, true} {
			var fr InitFraming
			fr.stream = stream
			fr.answer.Write(b)
			if caps := fr.UpstreamCapabilities(); caps != nil {
				got := WithCapabilities(body, caps)
				if !bytes.Equal(got, body) {
					if _, err := jsonrpc.DecodeMessage(got); err != nil {
						t.Fatalf("initialize answer with capabilities %s is not a message: %v", caps, err)
					}
				}
			}
		}
		got := WithCapabilities(b, json.RawMessage(`{"tasks":{}}`))
		if !bytes.Equal(got, b) {
			if _, err := jsonrpc.DecodeMessage(got); err != nil {
				t.Fatalf("rewritten answer %s is not a message: %v", got, err)
			}
		}
	})
}
