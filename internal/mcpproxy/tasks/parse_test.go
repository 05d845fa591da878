package tasks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// TestParseCreated2026: what the gate reads of a 2026-07-28 tools/call result, bad input
// included: only a CreateTaskResult (resultType "task") with a usable task id is accepted; one
// without is INDETERMINATE; anything else is classified as a plain call's result.
func TestParseCreated2026(t *testing.T) {
	plain := sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}
	long := strings.Repeat("x", MaxID+1)
	for _, tc := range []struct {
		name string
		raw  string
		want sink.InvokeOutcome
	}{
		{"created", `{"resultType":"task","taskId":"t-1","status":"working","ttlMs":60000}`, sink.OutcomeAccepted},
		{"created, null ttlMs", `{"resultType":"task","taskId":"t-1","ttlMs":null}`, sink.OutcomeAccepted},
		{"created, huge ttlMs", `{"resultType":"task","taskId":"t-1","ttlMs":1e300}`, sink.OutcomeAccepted},
		{"created, negative ttlMs", `{"resultType":"task","taskId":"t-1","ttlMs":-5}`, sink.OutcomeAccepted},
		{"no task id", `{"resultType":"task","status":"working"}`, sink.OutcomeIndeterminate},
		{"empty task id", `{"resultType":"task","taskId":""}`, sink.OutcomeIndeterminate},
		{"task id too long", `{"resultType":"task","taskId":"` + long + `"}`, sink.OutcomeIndeterminate},
		{"task id not a string", `{"resultType":"task","taskId":7}`, sink.OutcomeIndeterminate},
		{"ttlMs not a number", `{"resultType":"task","taskId":"t-1","ttlMs":"soon"}`, sink.OutcomeAccepted},
		{"task id an object", `{"resultType":"task","taskId":{"a":1}}`, sink.OutcomeIndeterminate},
		{"resultType not a string", `{"resultType":7,"taskId":"t-1"}`, plain.Outcome},
		{"a 2025 CreateTaskResult", `{"task":{"taskId":"t-1"}}`, plain.Outcome},
		{"task id without resultType", `{"taskId":"t-1","content":[]}`, plain.Outcome},
		{"complete", `{"resultType":"complete","content":[{"type":"text","text":"ran"}]}`, plain.Outcome},
		{"not JSON", `{"resultType":`, plain.Outcome},
		{"empty", ``, plain.Outcome},
		{"an array", `[{"resultType":"task","taskId":"t-1"}]`, plain.Outcome},
	} {
		t.Run(tc.name, func(t *testing.T) { checkClassify(t, tc.raw, tc.want, plain, ParseCreated2026) })
	}
}

// FuzzCreated2026 feeds arbitrary bytes to the 2026-07-28 task readers: none panics, and an
// acceptance always has a task id the gate can follow and a ttl within its bound.
func FuzzCreated2026(f *testing.F) {
	f.Add([]byte(`{"resultType":"task","taskId":"t-1","status":"working","ttlMs":60000}`))
	f.Add([]byte(`{"resultType":"complete","taskId":"t","status":"completed","result":{"content":[]}}`))
	f.Add([]byte(`{"resultType":"task","taskId":null,"ttlMs":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		raw := json.RawMessage(b)
		out := Classify(raw, sink.InvokeResult{Outcome: sink.OutcomeExecuted}, ParseCreated2026)
		id, ttl, ok := ParseCreated2026(raw)
		if out.Outcome == sink.OutcomeAccepted && (!ok || id == "" || len(id) > MaxID || ttl < 0 || ttl > MaxTTL) {
			t.Fatalf("accepted %q without a task to follow (id %q, ttl %s)", b, id, ttl)
		}
	})
}

// TestParseCreated: what the gate reads of a task-augmented call's answer, bad input included:
// only a CreateTaskResult with a usable task id is accepted (followed); one without is
// INDETERMINATE; anything else is classified as a plain call's answer.
func TestParseCreated(t *testing.T) {
	plain := sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}
	long := strings.Repeat("x", MaxID+1)
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
		t.Run(tc.name, func(t *testing.T) { checkClassify(t, tc.raw, tc.want, plain, ParseCreated) })
	}
}

// checkClassify asserts Classify of raw with a revision's CreateTaskResult parser: the
// outcome is want, and an acceptance has a task id and a ttl within the gate's bound.
func checkClassify(t *testing.T, raw string, want sink.InvokeOutcome, plain sink.InvokeResult, parse func(json.RawMessage) (string, time.Duration, bool)) {
	t.Helper()
	got := Classify(json.RawMessage(raw), plain, parse)
	if got.Outcome != want {
		t.Fatalf("Classify(%s) = %s, want %s", raw, got.Outcome, want)
	}
	if id, ttl, _ := parse(json.RawMessage(raw)); got.Outcome == sink.OutcomeAccepted && (id == "" || ttl < 0 || ttl > MaxTTL) {
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
		if got := string(Param(json.RawMessage(params))); got != want {
			t.Errorf("Param(%s) = %q, want %q", params, got, want)
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
		if got := ResultOutcome(tc.answer).Outcome; got != tc.want {
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
		out := Classify(raw, sink.InvokeResult{Outcome: sink.OutcomeExecuted}, ParseCreated)
		if out.Outcome == sink.OutcomeAccepted {
			if id, _, ok := ParseCreated(raw); !ok || id == "" || len(id) > MaxID {
				t.Fatalf("accepted %q without a task id to follow", b)
			}
		}
		_ = Param(raw)
		_ = IDParam(raw)
		_ = ResultOutcome(&jsonrpc.Response{Result: raw})
	})
}
