package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
)

// taskFixture is a real gate behind a real proxy in front of a real upstream that speaks the
// task wire (mcptest.TaskServer).
type taskFixture struct {
	t     *testing.T
	up    *mcptest.TaskServer
	store *boltstore.Store
	proxy *Proxy
	url   string
}

func newTaskFixture(t *testing.T) *taskFixture {
	t.Helper()
	up, err := mcptest.StartTasks("ticket_task", "send_payment")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	f := &taskFixture{t: t, up: up}
	var gate Gate
	f.store, gate = newGateOf(t, up.URL)
	f.proxy, _, f.url = serveProxy(t, Config{Server: "bank", URL: up.URL, Gate: gate, Agent: agentName, CallTimeout: 5 * time.Second})
	return f
}

// newGateOf is newGate as a proxy Gate.
func newGateOf(t *testing.T, url string) (*boltstore.Store, Gate) {
	st, g := newGate(t, url)
	return st, g
}

// session opens a raw 2025-11-25 session; it returns the initialize result too.
func (f *taskFixture) session() (*rawSession, json.RawMessage) {
	f.t.Helper()
	r := &rawSession{t: f.t, endpoint: f.url, next: 1}
	resp, hdr := r.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"list":{},"cancel":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.session, r.version = hdr.Get("Mcp-Session-Id"), "2025-11-25"
	if r.session == "" {
		f.t.Fatalf("initialize: no session id: %s", resp)
	}
	r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r, resp
}

// records returns the journal's records of a tool in a state.
func (f *taskFixture) records(st journal.State) []journal.DispatchRecord {
	f.t.Helper()
	recs, err := f.store.InState(context.Background(), st)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

// waitState waits for the journal to hold n records in st.
func (f *taskFixture) waitState(st journal.State, n int) []journal.DispatchRecord {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs := f.records(st)
		if len(recs) == n || time.Now().After(deadline) {
			if len(recs) != n {
				f.t.Fatalf("journal: %d records %s, want %d", len(recs), st, n)
			}
			return recs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// result decodes the result (or error) member of a response.
func result(t *testing.T, resp json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  json.RawMessage            `json:"error"`
	}
	if err := json.Unmarshal(resp, &m); err != nil || m.Result == nil {
		t.Fatalf("not a result: %s", resp)
	}
	return m.Result
}

// taskIDOf returns the task id of a CreateTaskResult, "" when it is not one.
func taskIDOf(t *testing.T, resp json.RawMessage) string {
	t.Helper()
	var c struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	_ = json.Unmarshal(result(t, resp)["task"], &c.Task)
	return c.Task.TaskID
}

const taskCall = `{"name":"ticket_task","arguments":{"title":"disk full"},"task":{"ttl":60000}}`

// TestTaskCallDispatchedOnceAndSettled: the upstream's capabilities.tasks and
// execution.taskSupport reach the agent; a task-augmented call of a protected tool is sent once,
// with params.task, journaled INVOKED while its task works (a retry gets the same task, and the
// upstream no second call), and EXECUTED with the task's result when the agent's tasks/result
// brings it.
func TestTaskCallDispatchedOnceAndSettled(t *testing.T) {
	f := newTaskFixture(t)
	s, init := f.session()
	var caps struct {
		Result struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(init, &caps); err != nil {
		t.Fatal(err)
	}
	var want map[string]json.RawMessage
	_ = json.Unmarshal([]byte(mcptest.TaskCapabilities), &want)
	if got, w := string(caps.Result.Capabilities["tasks"]), string(want["tasks"]); got != w {
		t.Fatalf("initialize: capabilities.tasks %s, want the upstream's %s\n%s", got, w, init)
	}
	if list := s.request("1", "tools/list", `{}`); !bytes.Contains(list, []byte(`"execution":{"taskSupport":"required"}`)) {
		t.Fatalf("tools/list lost execution.taskSupport: %s", list)
	}

	created := s.request("2", "tools/call", taskCall)
	id := taskIDOf(t, created)
	if id == "" {
		t.Fatalf("tools/call: not the upstream's CreateTaskResult: %s", created)
	}
	if calls, _ := f.up.Calls("ticket_task"); calls != 1 {
		t.Fatalf("upstream tools/call count %d, want 1", calls)
	}
	sent := f.up.Params("ticket_task")[0]
	var fwd struct {
		Task json.RawMessage            `json:"task"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(sent, &fwd); err != nil || string(fwd.Task) != `{"ttl":60000}` || fwd.Meta[MetaOperationID] == nil {
		t.Fatalf("forwarded params: %s", sent)
	}
	inv := f.waitState(journal.StateInvoked, 1)
	if inv[0].Tool != "ticket_task" || len(f.records(journal.StateExecuted)) != 0 {
		t.Fatalf("journal while the task works: %+v", inv)
	}

	// The same call again: the same task, not a second one.
	again := s.request("3", "tools/call", taskCall)
	if got := taskIDOf(t, again); got != id {
		t.Fatalf("retry: task %q, want %q: %s", got, id, again)
	}
	if calls, _ := f.up.Calls("ticket_task"); calls != 1 {
		t.Fatalf("retry reached the upstream: %d calls", calls)
	}

	if st := result(t, s.request("4", "tasks/get", fmt.Sprintf(`{"taskId":%q}`, id)))["status"]; string(st) != `"working"` {
		t.Fatalf("tasks/get: status %s", st)
	}
	f.waitState(journal.StateInvoked, 1)

	f.up.Finish(id, "completed", `{"content":[{"type":"text","text":"ticket 7 opened"}]}`)
	res := s.request("5", "tasks/result", fmt.Sprintf(`{"taskId":%q}`, id))
	if !bytes.Contains(res, []byte("ticket 7 opened")) || !bytes.Contains(res, []byte("related-task")) {
		t.Fatalf("tasks/result not relayed as written: %s", res)
	}
	done := f.waitState(journal.StateExecuted, 1)
	if done[0].OperationID != inv[0].OperationID || !bytes.Contains(done[0].Result, []byte("ticket 7 opened")) {
		t.Fatalf("EXECUTED record: %+v", done[0])
	}
	f.waitState(journal.StateInvoked, 0)

	// After the outcome, still the same task to a retry, and no second call.
	if got := taskIDOf(t, s.request("6", "tools/call", taskCall)); got != id {
		t.Fatalf("retry after the outcome: task %q, want %q", got, id)
	}
	if calls, _ := f.up.Calls("ticket_task"); calls != 1 {
		t.Fatalf("upstream tools/call count %d, want 1", calls)
	}
}

// TestTaskFailedStatusIsFetched: a failed status the agent's tasks/get carries makes the gate
// fetch the task's result itself (the TypeScript SDK's client does not ask for a failed task's
// result): a tool error is FAILED.
func TestTaskFailedStatusIsFetched(t *testing.T) {
	f := newTaskFixture(t)
	s, _ := f.session()
	id := taskIDOf(t, s.request("1", "tools/call", taskCall))
	f.up.Finish(id, "failed", `{"content":[{"type":"text","text":"no such queue"}],"isError":true}`)
	_, before := f.up.Calls("ticket_task")
	s.request("2", "tasks/get", fmt.Sprintf(`{"taskId":%q}`, id))
	rec := f.waitState(journal.StateFailed, 1)
	if !bytes.Contains(rec[0].Result, []byte("no such queue")) {
		t.Fatalf("FAILED record: %+v", rec[0])
	}
	if _, after := f.up.Calls("ticket_task"); after != before+1 {
		t.Fatalf("the gate asked tasks/result %d times, want once", after-before)
	}
	f.waitState(journal.StateInvoked, 0)
}

// TestTaskCancelledOrAbandonedIsIndeterminate: a cancelled task, and a task whose session
// ends before its outcome is known, are INDETERMINATE; a retry of the action is then refused.
func TestTaskCancelledOrAbandonedIsIndeterminate(t *testing.T) {
	f := newTaskFixture(t)
	s, _ := f.session()
	id := taskIDOf(t, s.request("1", "tools/call", taskCall))
	if st := result(t, s.request("2", "tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, id)))["status"]; string(st) != `"cancelled"` {
		t.Fatalf("tasks/cancel: %s", st)
	}
	f.waitState(journal.StateIndeterminate, 1)
	f.waitState(journal.StateInvoked, 0)

	s2, _ := f.session()
	other := `{"name":"ticket_task","arguments":{"title":"other"},"task":{}}`
	if taskIDOf(t, s2.request("1", "tools/call", other)) == "" {
		t.Fatal("no task created")
	}
	f.waitState(journal.StateInvoked, 1)
	req, _ := http.NewRequest(http.MethodDelete, f.url, nil)
	req.Header.Set("Mcp-Session-Id", s2.session)
	req.Header.Set("Mcp-Protocol-Version", s2.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	f.waitState(journal.StateIndeterminate, 2)
	f.waitState(journal.StateInvoked, 0)

	s3, _ := f.session()
	refused := s3.request("1", "tools/call", other)
	if !bytes.Contains(refused, []byte(`"isError":true`)) || !bytes.Contains(refused, []byte("EF_INDETERMINATE")) || taskIDOf(t, refused) != "" {
		t.Fatalf("retry of an INDETERMINATE task's action: %s", refused)
	}
	if calls, _ := f.up.Calls("ticket_task"); calls != 2 {
		t.Fatalf("upstream tools/call count %d, want 2", calls)
	}
}

// TestRefusedTaskCallNeverReachesUpstream: a task-augmented call the gate refuses (a
// human-gated tool, an unknown one) gets the gate's refusal as an ordinary tool result, not a
// task, and never reaches the upstream.
func TestRefusedTaskCallNeverReachesUpstream(t *testing.T) {
	f := newTaskFixture(t)
	s, _ := f.session()
	for tool, code := range map[string]string{"send_payment": "EF_ESCALATION_REQUIRED", "wire_all_funds": "EF_"} {
		resp := s.request("1", "tools/call", fmt.Sprintf(`{"name":%q,"arguments":{"amount":5},"task":{"ttl":1000}}`, tool))
		r := result(t, resp)
		if string(r["isError"]) != "true" || r["task"] != nil || !bytes.Contains(r["_meta"], []byte(code)) {
			t.Fatalf("%s: not the gate's refusal as a tool result: %s", tool, resp)
		}
		if calls, _ := f.up.Calls(tool); calls != 0 {
			t.Fatalf("%s: a refused call reached the upstream", tool)
		}
	}
	if n := len(f.records(journal.StateInvoked)); n != 0 {
		t.Fatalf("journal: %d INVOKED records after refusals", n)
	}
}

// TestTaskLimit: a session follows at most tasks.MaxFollowed running tasks; the next task-augmented call
// is refused with EF_TASK_LIMIT before it is decided or sent, and a place frees when a task's
// outcome is recorded.
func TestTaskLimit(t *testing.T) {
	defer func(n int) { tasks.MaxFollowed = n }(tasks.MaxFollowed)
	tasks.MaxFollowed = 2
	f := newTaskFixture(t)
	s, _ := f.session()
	var ids []string
	for i := range 2 {
		ids = append(ids, taskIDOf(t, s.request("1", "tools/call", fmt.Sprintf(`{"name":"ticket_task","arguments":{"n":%d},"task":{}}`, i))))
	}
	over := s.request("2", "tools/call", `{"name":"ticket_task","arguments":{"n":2},"task":{}}`)
	if !bytes.Contains(over, []byte("EF_TASK_LIMIT")) || taskIDOf(t, over) != "" {
		t.Fatalf("call beyond the limit: %s", over)
	}
	if calls, _ := f.up.Calls("ticket_task"); calls != 2 {
		t.Fatalf("upstream tools/call count %d, want 2", calls)
	}
	f.up.Finish(ids[0], "completed", `{"content":[{"type":"text","text":"done"}]}`)
	s.request("3", "tasks/result", fmt.Sprintf(`{"taskId":%q}`, ids[0]))
	f.waitState(journal.StateExecuted, 1)
	if taskIDOf(t, s.request("4", "tools/call", `{"name":"ticket_task","arguments":{"n":2},"task":{}}`)) == "" {
		t.Fatal("no place freed by a recorded outcome")
	}
}
