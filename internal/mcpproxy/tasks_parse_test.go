package mcpproxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// TestParseCreated: what the gate reads of a task-augmented call's answer, bad input included:
// only a CreateTaskResult with a usable task id is accepted (followed); one without is
// INDETERMINATE; anything else is classified as a plain call's answer.
func TestParseCreated(t *testing.T) {
	plain := sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}
	long := strings.Repeat("x", maxTaskID+1)
	for _, tc := range []struct {
		name string
		raw  string
		want sink.InvokeOutcome
	}{
		{"created", `{"task":{"taskId":"t-1","status":"working","ttl":60000}}`, sink.OutcomeAccepted},
		{"created, null ttl", `{"task":{"taskId":"t-1","status":"working","ttl":null}}`, sink.OutcomeAccepted},
		{"created, huge ttl", `{"task":{"taskId":"t-1","ttl":1e300}}`, sink.OutcomeAccepted},
		{"created, negative ttl", `{"task":{"taskId":"t-1","ttl":-5}}`, sink.OutcomeAccepted},
		{"no task id", `{"task":{"status":"working"}}`, sink.OutcomeIndeterminate},
		{"empty task id", `{"task":{"taskId":""}}`, sink.OutcomeIndeterminate},
		{"task id too long", `{"task":{"taskId":"` + long + `"}}`, sink.OutcomeIndeterminate},
		{"task id not a string", `{"task":{"taskId":7}}`, plain.Outcome},
		{"task not an object", `{"task":"t-1"}`, plain.Outcome},
		{"task null", `{"task":null}`, plain.Outcome},
		{"a plain result", `{"content":[{"type":"text","text":"ran"}]}`, plain.Outcome},
		{"not JSON", `{"task":`, plain.Outcome},
		{"empty", ``, plain.Outcome},
		{"an array", `[{"task":{"taskId":"t-1"}}]`, plain.Outcome},
	} {
		t.Run(tc.name, func(t *testing.T) { checkClassify(t, tc.raw, tc.want, plain, parseCreated) })
	}
}

// checkClassify asserts classifyTask of raw with a revision's CreateTaskResult parser: the
// outcome is want, and an acceptance has a task id and a ttl within the gate's bound.
func checkClassify(t *testing.T, raw string, want sink.InvokeOutcome, plain sink.InvokeResult, parse func(json.RawMessage) (string, time.Duration, bool)) {
	t.Helper()
	got := classifyTask(json.RawMessage(raw), plain, parse)
	if got.Outcome != want {
		t.Fatalf("classifyTask(%s) = %s, want %s", raw, got.Outcome, want)
	}
	if id, ttl, _ := parse(json.RawMessage(raw)); got.Outcome == sink.OutcomeAccepted && (id == "" || ttl < 0 || ttl > maxTaskTTL) {
		t.Fatalf("accepted with id %q, ttl %s", id, ttl)
	}
}

// TestTaskParam: a call is task-augmented only by a top-level params.task that is not null; an
// argument named task does not make it one.
func TestTaskParam(t *testing.T) {
	for params, want := range map[string]string{
		`{"name":"a","task":{"ttl":5}}`:               `{"ttl":5}`,
		`{"name":"a","task":{}}`:                      `{}`,
		`{"name":"a","task":null}`:                    ``,
		`{"name":"a","arguments":{"task":{"ttl":5}}}`: ``,
		`{"name":"a"}`:                                ``,
		`{"name":"a","task":`:                         ``,
		`{"name":"a","task":"soon"}`:                  `"soon"`,
	} {
		if got := string(taskParam(json.RawMessage(params))); got != want {
			t.Errorf("taskParam(%s) = %q, want %q", params, got, want)
		}
	}
}

// TestTaskResultOutcome: a tasks/result answer is EXECUTED or FAILED only for a CallToolResult;
// an error, or a result that is not one, is INDETERMINATE.
func TestTaskResultOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer *jsonrpc.Response
		want   sink.InvokeOutcome
	}{
		{"result", &jsonrpc.Response{Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)}, sink.OutcomeExecuted},
		{"tool error", &jsonrpc.Response{Result: json.RawMessage(`{"content":[],"isError":true}`)}, sink.OutcomeFailed},
		{"JSON-RPC error", &jsonrpc.Response{Error: &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "Task not found"}}, sink.OutcomeIndeterminate},
		{"no content", &jsonrpc.Response{Result: json.RawMessage(`{"isError":false}`)}, sink.OutcomeIndeterminate},
		{"isError not a bool", &jsonrpc.Response{Result: json.RawMessage(`{"content":[],"isError":"yes"}`)}, sink.OutcomeIndeterminate},
		{"not an object", &jsonrpc.Response{Result: json.RawMessage(`[1]`)}, sink.OutcomeIndeterminate},
		{"no answer", nil, sink.OutcomeIndeterminate},
	} {
		if got := taskResultOutcome(tc.answer).Outcome; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestWithCapabilities: the gate's initialize answer takes the upstream's capabilities as
// written, plus tools; a body or capabilities it cannot read leave the answer as it was.
func TestWithCapabilities(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"logging":{}},"serverInfo":{"name":"up","version":"1"}}}`)
	got := withCapabilities(body, json.RawMessage(`{"tasks":{"list":{}},"x-vendor":{"a":"<b>"}}`))
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
		if out := withCapabilities([]byte(tc.body), json.RawMessage(tc.caps)); !bytes.Equal(out, []byte(tc.body)) {
			t.Errorf("withCapabilities(%s, %s) changed the answer: %s", tc.body, tc.caps, out)
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
		var f initFraming
		f.stream = tc.stream
		f.answer.WriteString(tc.answer)
		if got := string(f.upstreamCapabilities()); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzTaskWire feeds arbitrary bytes to every reader of the task wire and of the upstream's
// initialize answer: none panics, an acceptance always has a task id the gate can follow, and
// the initialize answer is left as it was or stays one JSON-RPC message.
func FuzzTaskWire(f *testing.F) {
	f.Add([]byte(`{"task":{"taskId":"t-1","status":"working","ttl":60000}}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"ok"}],"isError":true}`))
	f.Add([]byte(`{"tasks":[{"taskId":"t","status":"completed"}],"taskId":"t","status":"cancelled"}`))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{\"tasks\":{}}}}\n\n"))
	f.Add([]byte(`{"name":"a","task":{"ttl":5},"arguments":{"task":1}}`))
	body := []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		raw := json.RawMessage(b)
		out := classifyTask(raw, sink.InvokeResult{Outcome: sink.OutcomeExecuted}, parseCreated)
		if out.Outcome == sink.OutcomeAccepted {
			if id, _, ok := parseCreated(raw); !ok || id == "" || len(id) > maxTaskID {
				t.Fatalf("accepted %q without a task id to follow", b)
			}
		}
		_ = taskParam(raw)
		_ = taskIDParam(raw)
		_ = taskResultOutcome(&jsonrpc.Response{Result: raw})
		for _, stream := range []bool{false, true} {
			var fr initFraming
			fr.stream = stream
			fr.answer.Write(b)
			if caps := fr.upstreamCapabilities(); caps != nil {
				got := withCapabilities(body, caps)
				if !bytes.Equal(got, body) {
					if _, err := jsonrpc.DecodeMessage(got); err != nil {
						t.Fatalf("initialize answer with capabilities %s is not a message: %v", caps, err)
					}
				}
			}
		}
		got := withCapabilities(b, json.RawMessage(`{"tasks":{}}`))
		if !bytes.Equal(got, b) {
			if _, err := jsonrpc.DecodeMessage(got); err != nil {
				t.Fatalf("rewritten answer %s is not a message: %v", got, err)
			}
		}
	})
}
