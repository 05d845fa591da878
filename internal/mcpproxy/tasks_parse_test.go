package mcpproxy

import (
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

// FuzzTaskWire feeds arbitrary bytes to every reader of the task wire: none panics, and an
// acceptance always has a task id the gate can follow (the upstream's initialize answer:
// upstream.FuzzInitAnswer).
func FuzzTaskWire(f *testing.F) {
	f.Add([]byte(`{"task":{"taskId":"t-1","status":"working","ttl":60000}}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"ok"}],"isError":true}`))
	f.Add([]byte(`{"tasks":[{"taskId":"t","status":"completed"}],"taskId":"t","status":"cancelled"}`))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{\"tasks\":{}}}}\n\n"))
	f.Add([]byte(`{"name":"a","task":{"ttl":5},"arguments":{"task":1}}`))
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
	})
}
