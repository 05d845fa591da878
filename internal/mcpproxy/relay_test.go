package mcpproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// upstreamLog records the JSON-RPC bodies the upstream received, by method.
type upstreamLog struct {
	mu     sync.Mutex
	bodies map[string][]string
	ch     chan string // every body, as it arrives
}

func newUpstreamLog() *upstreamLog {
	return &upstreamLog{bodies: map[string][]string{}, ch: make(chan string, 64)}
}

func (l *upstreamLog) add(method, body string) {
	l.mu.Lock()
	l.bodies[method] = append(l.bodies[method], body)
	l.mu.Unlock()
	select {
	case l.ch <- body:
	default:
	}
}

func (l *upstreamLog) get(method string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.bodies[method]...)
}

// rpcBody reads a POSTed JSON-RPC message's method and id, leaving the body readable.
func rpcBody(r *http.Request) (raw []byte, method string, id json.RawMessage) {
	if r.Method != http.MethodPost {
		return nil, "", nil
	}
	raw, _ = io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(raw, &m)
	return raw, m.Method, m.ID
}

// answerJSON writes a JSON-RPC response with id and a raw result or error member.
func answerJSON(w http.ResponseWriter, id json.RawMessage, member, value string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%q:%s}`, id, member, value)
}

// TestRelayIsFaithful: requests the gate does not decide reach the upstream as the agent wrote
// them and the upstream's answers reach the agent as the upstream wrote them: members the SDK's
// types do not know, false and zero values, unknown methods and their errors; the agent's
// parameterless notification stays parameterless; tools/list keeps every member of the
// upstream's tools and gets only the gate's additions.
func TestRelayIsFaithful(t *testing.T) {
	log := newUpstreamLog()
	release := make(chan struct{})
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		raw, method, id := rpcBody(r)
		if method == "" {
			return false
		}
		log.add(method, string(raw))
		switch method {
		case "foo/bar":
			answerJSON(w, id, "result", `{"echo":true,"hasMore":false,"required":false,"ttlMs":0,"nested":{"x":[1,2.5,"<&>"]}}`)
		case "foo/missing":
			answerJSON(w, id, "error", `{"code":-32601,"message":"Method not found","data":{"method":"foo/missing"}}`)
		case "foo/slow":
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			answerJSON(w, id, "result", `{}`)
		case "tools/list":
			answerJSON(w, id, "result", `{"tools":[{"name":"get_balance","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"},"icons":[{"src":"https://example.com/i.png"}]},`+
				`{"name":"request_binding_moment","inputSchema":{"type":"object"}},`+
				`{"name":"send_payment","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"paid":{"type":"number"}},"required":["paid"]}}],"nextCursor":"","_meta":{"k":"v"}}`)
		case "foo/progress":
			// An event stream: a progress notification of the request, then its response.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: up-1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p9\",\"progress\":1,\"extra\":false}}\n\n")
			fmt.Fprintf(w, "id: up-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"done\":true}}\n\n", id)
		case wire.NotifyRootsChanged, wire.NotifyCancelled:
			w.WriteHeader(http.StatusAccepted)
		default:
			return false
		}
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())

	// An unknown method with params the SDK's types know nothing of: relayed as written.
	params := `{"b":1,"a":{"z":null,"y":[true,false]},"_meta":{"progressToken":"p1","vendor/x":{"deep":1}}}`
	got := s.request("7", "foo/bar", params)
	want := `{"jsonrpc":"2.0","id":7,"result":{"echo":true,"hasMore":false,"required":false,"ttlMs":0,"nested":{"x":[1,2.5,"<&>"]}}}`
	if string(got) != want {
		t.Errorf("foo/bar answer:\n got %s\nwant %s", got, want)
	}
	if bodies := log.get("foo/bar"); len(bodies) != 1 || !strings.Contains(bodies[0], `"params":`+params) {
		t.Errorf("upstream received %q, want params %s byte for byte", bodies, params)
	}

	// The upstream's own error, code, message and data.
	got = s.request(`"m1"`, "foo/missing", `{}`)
	want = `{"jsonrpc":"2.0","id":"m1","error":{"code":-32601,"message":"Method not found","data":{"method":"foo/missing"}}}`
	if string(got) != want {
		t.Errorf("foo/missing answer:\n got %s\nwant %s", got, want)
	}

	// A parameterless notification stays parameterless (no "params": null).
	s.post(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if bodies := log.get(wire.NotifyRootsChanged); len(bodies) != 1 || strings.Contains(bodies[0], "params") {
		t.Errorf("upstream received roots/list_changed %q, want one without params", bodies)
	}

	// tools/list: the upstream's members kept, its tool named like the virtual one removed,
	// the virtual tool appended.
	var list struct {
		Result struct {
			Tools      []map[string]json.RawMessage `json:"tools"`
			NextCursor *string                      `json:"nextCursor"`
			Meta       map[string]string            `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(s.request("8", "tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	tools := list.Result.Tools
	if len(tools) != 3 || string(tools[0]["execution"]) != `{"taskSupport":"optional"}` || string(tools[0]["icons"]) == "" ||
		string(tools[1]["name"]) != `"send_payment"` || string(tools[2]["name"]) != `"`+sink.RequestBindingMomentTool+`"` ||
		list.Result.NextCursor == nil || list.Result.Meta["k"] != "v" {
		t.Errorf("tools/list through the gate: %+v", list.Result)
	}
	if !bytes.Contains(tools[1]["annotations"], []byte(`"emits_binding_moment":true`)) {
		t.Errorf("send_payment escalates but is not annotated: %s", tools[1]["annotations"])
	}

	// A refusal of a tool the session listed with an outputSchema has no structuredContent
	// (it would not match the schema); one of a tool without a schema keeps it.
	var pay struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(s.request("9", "tools/call", `{"name":"send_payment","arguments":{"amount":5}}`), &pay); err != nil {
		t.Fatal(err)
	}
	if _, ok := pay.Result["structuredContent"]; ok || string(pay.Result["isError"]) != "true" ||
		!bytes.Contains(pay.Result["_meta"], []byte(ef.EFEscalationRequired)) {
		t.Errorf("refusal of a tool with an outputSchema: %v", pay.Result)
	}
	var mail struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(s.request("10", "tools/call", `{"name":"email_send","arguments":{"to":"x@example.com"},"_meta":{"actgate.io/instruction-provenance":"retrieval"}}`), &mail); err != nil {
		t.Fatal(err)
	}
	if _, ok := mail.Result["structuredContent"]; !ok || string(mail.Result["isError"]) != "true" {
		t.Errorf("refusal of a tool without an outputSchema: %v", mail.Result)
	}

	// An upstream event stream: the agent's answer is an event stream too, the request's
	// progress notification on it as the upstream wrote it, then the response.
	req, _ := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(`{"jsonrpc":"2.0","id":21,"method":"foo/progress","params":{"_meta":{"progressToken":"p9"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.session)
	req.Header.Set("Mcp-Protocol-Version", s.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// The upstream's events carry ids, and the gate's carry them as the upstream wrote them
	// (resume.go).
	wantStream := "id: up-1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p9\",\"progress\":1,\"extra\":false}}\n\n" +
		"id: up-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":21,\"result\":{\"done\":true}}\n\n"
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || string(stream) != wantStream {
		t.Errorf("foo/progress answer (%s):\n%s\nwant\n%s", ct, stream, wantStream)
	}

	// The agent's cancellation reaches the upstream under the upstream leg's id.
	done := make(chan json.RawMessage, 1)
	go func() { done <- s.request("11", "foo/slow", `{}`) }()
	var upID json.RawMessage
	deadline := time.After(5 * time.Second)
	for upID == nil {
		select {
		case body := <-log.ch:
			var m struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal([]byte(body), &m)
			if m.Method == "foo/slow" {
				upID = m.ID
			}
		case <-deadline:
			t.Fatal("foo/slow never reached the upstream")
		}
	}
	s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11,"reason":"user pressed stop"}}`)
	close(release)
	<-done
	cancels := log.get(wire.NotifyCancelled)
	if len(cancels) != 1 || !strings.Contains(cancels[0], `"requestId":`+string(upID)) || !strings.Contains(cancels[0], "user pressed stop") {
		t.Errorf("upstream cancellations %q, want one for %s with the agent's reason", cancels, upID)
	}
}

// TestSessionlessRequestRefused: a request of a stateful revision without Mcp-Session-Id that
// is not initialize is refused with HTTP 400 and a JSON-RPC invalid-request error (not HTTP 200
// with error code 0); a notification gets HTTP 400 too. Nothing reaches the upstream.
func TestSessionlessRequestRefused(t *testing.T) {
	log := newUpstreamLog()
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: func(_ http.ResponseWriter, r *http.Request) bool {
		raw, method, _ := rpcBody(r)
		log.add(method, string(raw))
		return false
	}}})
	for _, tc := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Bad Request: Mcp-Session-Id header is required (initialize first)"}}`},
		{`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"get_balance"}}`, `{"jsonrpc":"2.0","id":"c","error":{"code":-32600,"message":"Bad Request: Mcp-Session-Id header is required (initialize first)"}}`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Bad Request: Mcp-Session-Id header is required (initialize first)\n"},
	} {
		req, _ := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || string(b) != tc.want {
			t.Errorf("%s: HTTP %d %s, want 400 %s", tc.body, resp.StatusCode, b, tc.want)
		}
	}
	if n := len(log.get("tools/list")) + len(log.get("tools/call")); n != 0 {
		t.Errorf("the upstream received %d sessionless requests", n)
	}
}

// TestUpstreamGETDoesNotBlockInitialize: the agent's initialize is answered without waiting for
// the upstream's answer to the upstream session's GET stream (the gate opens it in the
// background, agent2025's getstream.go; the SDK client would open it before returning from Connect).
func TestUpstreamGETDoesNotBlockInitialize(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet {
			select { // the GET's headers come late
			case <-release:
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}
		return false
	}}})
	start := time.Now()
	s := newRawSession(t, f.endpoint())
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("initialize took %s: it waited for the upstream's GET stream", d)
	}
	if got := s.request("1", "ping", `{}`); !bytes.Contains(got, []byte(`"result":{}`)) {
		t.Errorf("ping: %s", got)
	}
}

// TestUpstreamRequestOnAnswerStream: an upstream's elicitation/create on the stream of a
// relayed request reaches the agent on the agent's own answer stream (no GET stream open), as
// the upstream wrote it, and the agent's answer reaches the upstream as the agent wrote it,
// member order and all, under the upstream's id.
func TestUpstreamRequestOnAnswerStream(t *testing.T) {
	answered := make(chan string, 1)
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		raw, method, id := rpcBody(r)
		switch {
		case method == "foo/ask":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"u-1\",\"method\":\"elicitation/create\",\"params\":{\"message\":\"Name?\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"default\":\"Ann\"},\"age\":{\"type\":\"integer\",\"default\":3}}}}}\n\n")
			w.(http.Flusher).Flush()
			var got string
			select {
			case got = <-answered:
			case <-time.After(5 * time.Second):
			}
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"upstreamSaw\":%q}}\n\n", id, got)
			return true
		case method == "" && r.Method == http.MethodPost && bytes.Contains(raw, []byte(`"u-1"`)):
			answered <- string(raw)
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	post := func(session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	resp = post(session, `{"jsonrpc":"2.0","id":5,"method":"foo/ask","params":{}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("answer content type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	next := func() string { // the next event's data
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
				return d
			}
		}
	}
	var ask struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(next()), &ask); err != nil || ask.Method != "elicitation/create" || !strings.HasPrefix(ask.ID, "actgate-s-") ||
		string(ask.Params) != `{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"Ann"},"age":{"type":"integer","default":3}}}}` {
		t.Fatalf("the agent was asked %+v (%v)", ask, err)
	}
	post(session, `{"jsonrpc":"2.0","id":"`+ask.ID+`","result":{"action":"accept","content":{"zeta":"z","name":"Bo"}}}`).Body.Close()
	var final struct {
		ID     int `json:"id"`
		Result struct {
			UpstreamSaw string `json:"upstreamSaw"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(next()), &final); err != nil || final.ID != 5 {
		t.Fatalf("final answer %+v %v", final, err)
	}
	if want := `{"jsonrpc":"2.0","id":"u-1","result":{"action":"accept","content":{"zeta":"z","name":"Bo"}}}`; final.Result.UpstreamSaw != want {
		t.Errorf("the upstream received %s, want %s", final.Result.UpstreamSaw, want)
	}
}

// TestToolsCallProgressOnAnswerStream: the upstream's progress notification of a tools/call
// reaches the agent on the call's own answer stream, before the result, as the upstream wrote
// it; a call the upstream streams with nothing but its result is answered application/json.
func TestToolsCallProgressOnAnswerStream(t *testing.T) {
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		raw, method, id := rpcBody(r)
		if method != wire.MethodCallTool {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if bytes.Contains(raw, []byte(`"progressToken":"tok"`)) {
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":1,\"total\":2}}\n\n")
		}
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"42\"}]}}\n\n", id)
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())
	post := func(body string) (string, string) {
		req, _ := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.session)
		req.Header.Set("Mcp-Protocol-Version", s.version)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Content-Type"), string(b)
	}
	ct, body := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_balance","arguments":{},"_meta":{"progressToken":"tok"}}}`)
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":1,\"total\":2}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"42\"}]}}\n\n"
	if ct != "text/event-stream" || body != want {
		t.Errorf("tools/call with progress: %s\n%s\nwant\n%s", ct, body, want)
	}
	ct, body = post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_balance","arguments":{"x":1}}}`)
	if ct != "application/json" || body != `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"42"}]}}` {
		t.Errorf("tools/call without progress: %s %s", ct, body)
	}
}

// TestToolsCallCancellationForwarded: the agent's notifications/cancelled of a dispatched
// tools/call reaches the upstream under the upstream leg's id, with the agent's reason; the
// call itself still ends with the upstream's answer.
func TestToolsCallCancellationForwarded(t *testing.T) {
	log := newUpstreamLog()
	release := make(chan struct{})
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		raw, method, id := rpcBody(r)
		switch method {
		case wire.MethodCallTool:
			log.add(method, string(raw))
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			answerJSON(w, id, "result", `{"content":[{"type":"text","text":"done"}]}`)
			return true
		case wire.NotifyCancelled:
			log.add(method, string(raw))
			close(release)
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())
	done := make(chan json.RawMessage, 1)
	go func() { done <- s.request("31", "tools/call", `{"name":"get_balance","arguments":{"account":"a"}}`) }()
	var upID json.RawMessage
	deadline := time.After(5 * time.Second)
	for upID == nil {
		select {
		case body := <-log.ch:
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal([]byte(body), &m)
			upID = m.ID
		case <-deadline:
			t.Fatal("the call never reached the upstream")
		}
	}
	s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":31,"reason":"stop"}}`)
	got := <-done
	cancels := log.get(wire.NotifyCancelled)
	if len(cancels) != 1 || !strings.Contains(cancels[0], `"requestId":`+string(upID)) || !strings.Contains(cancels[0], `"reason":"stop"`) {
		t.Errorf("upstream cancellations %q, want one for %s", cancels, upID)
	}
	if !bytes.Contains(got, []byte(`"text":"done"`)) {
		t.Errorf("the call's answer: %s", got)
	}
}
