package mcpproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// tokenSession is a raw 2025-11-25 session of the agent whose bearer token is tok.
type tokenSession struct {
	t                 *testing.T
	url, tok, session string
}

func openTokenSession(t *testing.T, url, tok string) *tokenSession {
	t.Helper()
	s := &tokenSession{t: t, url: url, tok: tok}
	_, hdr := s.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"list":{},"cancel":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if s.session = hdr.Get("Mcp-Session-Id"); s.session == "" {
		t.Fatal("initialize: no session id")
	}
	s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// post sends one message and returns the answer's JSON-RPC message (JSON or the last data
// event of a stream).
func (s *tokenSession) post(body string) (map[string]any, http.Header) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.tok)
	if s.session != "" {
		req.Header.Set("Mcp-Session-Id", s.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("POST %s: HTTP %d %s", body, resp.StatusCode, raw)
	}
	data := string(raw)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = ""
		for _, ev := range parseEvents(string(raw)) {
			if ev.data != "" {
				data = ev.data
			}
		}
	}
	var m map[string]any
	if data != "" {
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			s.t.Fatalf("answer %q: %v", data, err)
		}
	}
	return m, resp.Header
}

func (s *tokenSession) request(id int, method, params string) map[string]any {
	s.t.Helper()
	m, _ := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return m
}

// noSuchTask reports whether m is the gate's -32602 "no such task".
func isNoSuchTask(m map[string]any) bool {
	e, _ := m["error"].(map[string]any)
	return e["code"] == float64(wire.CodeInvalidParams) && e["message"] == "actgate: no such task"
}

// TestTaskOwners2025: on MCP 2025-11-25, two agents' sessions in front of an upstream whose
// tasks are not scoped to a session. Agent a creates a task on the hot path (get_balance: no
// journal, never followed) and one by a journaled dispatch (ticket_task), whose outcome its
// tasks/result settles. Agent b, given the ids, gets -32602 (no such task) for tasks/get,
// tasks/result and tasks/cancel of either, from the gate: the upstream saw none of them (the
// hot-path task is still working, no tasks/result reached it), and b's tasks/list leaves both
// out. Agent a still reads its own. Before, the gate relayed every one of them.
func TestTaskOwners2025(t *testing.T) {
	up, err := mcptest.StartTasks("ticket_task", "get_balance")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	agents, err := NewBearerAgents(map[string][]byte{"agent-a": []byte(tokenA), "agent-b": []byte(tokenB)})
	if err != nil {
		t.Fatal(err)
	}
	store, gate := newGateOf(t, up.URL)
	_, _, url := serveProxy(t, Config{Server: "bank", URL: up.URL, Gate: gate, Agent: agentName, Agents: agents, CallTimeout: 5 * time.Second})
	f := &taskFixture{t: t, store: store}
	a, b := openTokenSession(t, url, tokenA), openTokenSession(t, url, tokenB)

	taskOf := func(m map[string]any) string {
		r, _ := m["result"].(map[string]any)
		task, _ := r["task"].(map[string]any)
		id, _ := task["taskId"].(string)
		if id == "" {
			t.Fatalf("not a CreateTaskResult: %v", m)
		}
		return id
	}
	hot := taskOf(a.request(1, "tools/call", `{"name":"get_balance","arguments":{},"task":{"ttl":60000}}`))
	followed := taskOf(a.request(2, "tools/call", `{"name":"ticket_task","arguments":{"t":1},"task":{"ttl":60000}}`))
	f.waitState(journal.StateInvoked, 1)
	up.Finish(followed, "completed", `{"content":[{"type":"text","text":"filed"}]}`)
	if r := a.request(3, "tasks/result", fmt.Sprintf(`{"taskId":%q}`, followed)); r["result"] == nil {
		t.Fatalf("agent a's tasks/result: %v", r)
	}
	f.waitState(journal.StateExecuted, 1)
	_, results := up.Calls("")

	for i, id := range []string{hot, followed} {
		for j, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if m := b.request(10+3*i+j, method, fmt.Sprintf(`{"taskId":%q}`, id)); !isNoSuchTask(m) {
				t.Fatalf("agent b's %s of agent a's task %s: %v, want the gate's -32602", method, id, m)
			}
		}
	}
	if _, n := up.Calls(""); n != results {
		t.Fatalf("agent b's tasks/result reached the upstream (%d tasks/result, want %d)", n, results)
	}
	list := b.request(20, "tasks/list", `{}`)
	if raw, _ := json.Marshal(list); strings.Contains(string(raw), hot) || strings.Contains(string(raw), followed) || list["result"] == nil {
		t.Fatalf("agent b's tasks/list: %s, want neither of agent a's tasks", raw)
	}
	st := a.request(21, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, hot))
	if r, _ := st["result"].(map[string]any); r["status"] != "working" {
		t.Fatalf("agent a's tasks/get of its hot-path task: %v, want working (agent b's tasks/cancel never reached it)", st)
	}
	list = a.request(22, "tasks/list", `{}`)
	if raw, _ := json.Marshal(list); !strings.Contains(string(raw), hot) || !strings.Contains(string(raw), followed) {
		t.Fatalf("agent a's tasks/list: %s, want both its tasks", raw)
	}
}

// TestTaskOwners2026: on MCP 2026-07-28, a task a hot-path tools/call created (never followed)
// and a followed task after its outcome was recorded are agent a's: agent b's tasks/get,
// tasks/update and tasks/cancel of them are answered -32602 by the gate and never reach the
// upstream. Before, the gate relayed them (it knew only the tasks it still followed).
func TestTaskOwners2026(t *testing.T) {
	f := newTasks2026Fixture(t)
	hot := resultOf(t, f.post(tokenA, 1, "tools/call", "get_balance", `"name":"get_balance","arguments":{}`))
	if hot["taskId"] != "task-1" {
		t.Fatalf("hot-path call: %v, want task-1", hot)
	}
	if len(f.records(journal.StateInvoked)) != 0 {
		t.Fatal("the hot-path call was journaled")
	}
	resultOf(t, f.post(tokenA, 2, "tools/call", "ticket_task", `"name":"ticket_task","arguments":{}`))
	f.waitState(journal.StateInvoked, 1)
	f.up.finish("task-2", `{"content":[{"type":"text","text":"ok"}]}`)
	resultOf(t, f.post(tokenA, 3, "tasks/get", "task-2", `"taskId":"task-2"`))
	f.waitState(journal.StateExecuted, 1)
	_, gets := f.up.counts()
	for _, id := range []string{"task-1", "task-2"} {
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			params := fmt.Sprintf(`"taskId":%q`, id)
			if method == "tasks/update" {
				params += `,"inputResponses":{}`
			}
			if m := f.post(tokenB, 4, method, id, params); !isNoSuchTask(m) {
				t.Fatalf("agent b's %s of agent a's %s: %v, want the gate's -32602", method, id, m)
			}
		}
	}
	if _, n := f.up.counts(); n != gets {
		t.Fatalf("agent b's tasks/get reached the upstream (%d gets, want %d)", n, gets)
	}
	if got := resultOf(t, f.post(tokenA, 5, "tasks/get", "task-1", `"taskId":"task-1"`)); got["status"] != "working" {
		t.Fatalf("agent a's own hot-path task: %v, want working (agent b's tasks/cancel never reached it)", got)
	}
}

// TestTaskOwnersBound: the task owners the proxy remembers are bounded per agent and in all,
// calls that may create a task included; a call beyond a bound is refused with EF_TASK_LIMIT
// before anything is decided or sent, another agent is not limited by one agent's tasks, and a
// place frees when a task's ttl passes.
func TestTaskOwnersBound(t *testing.T) {
	defer func(a, b int) { maxTaskOwners, maxTaskOwnersPerAgent = a, b }(maxTaskOwners, maxTaskOwnersPerAgent)
	maxTaskOwners, maxTaskOwnersPerAgent = 3, 2
	f := newTasks2026Fixture(t)
	for i := range 2 {
		resultOf(t, f.post(tokenA, i+1, "tools/call", "get_balance", fmt.Sprintf(`"name":"get_balance","arguments":{"n":%d}`, i)))
	}
	r := resultOf(t, f.post(tokenA, 3, "tools/call", "get_balance", `"name":"get_balance","arguments":{"n":3}`))
	meta, _ := r["_meta"].(map[string]any)
	if r["isError"] != true || meta[MetaEFCode] != string(ef.EFTaskLimit) {
		t.Fatalf("agent a's third task: %v, want EF_TASK_LIMIT", r)
	}
	if d, _ := f.up.counts(); d != 2 {
		t.Fatalf("upstream dispatched %d times, want 2", d)
	}
	if got := resultOf(t, f.post(tokenB, 1, "tools/call", "get_balance", `"name":"get_balance","arguments":{"b":1}`)); got["resultType"] != "task" {
		t.Fatalf("agent b limited by agent a's tasks: %v", got)
	}
	r = resultOf(t, f.post(tokenB, 2, "tools/call", "get_balance", `"name":"get_balance","arguments":{"b":2}`))
	if meta, _ := r["_meta"].(map[string]any); meta[MetaEFCode] != string(ef.EFTaskLimit) {
		t.Fatalf("a fourth task in all: %v, want EF_TASK_LIMIT", r)
	}

	// On 2025-11-25: a task-augmented call beyond the bound, the same refusal.
	tf := newTaskFixture(t)
	sess, _ := tf.session()
	for i := range 2 {
		if id := taskIDOf(t, sess.request(strconv.Itoa(i+1), "tools/call", fmt.Sprintf(`{"name":"get_balance","arguments":{"n":%d},"task":{}}`, i))); id == "" {
			t.Fatalf("task %d not created", i)
		}
	}
	third := result(t, sess.request("3", "tools/call", `{"name":"get_balance","arguments":{"n":3},"task":{}}`))
	if !strings.Contains(string(third["_meta"]), string(ef.EFTaskLimit)) || string(third["isError"]) != "true" {
		t.Fatalf("a third task-augmented call on 2025-11-25: %v, want EF_TASK_LIMIT", third)
	}
	if calls, _ := tf.up.Calls("get_balance"); calls != 2 {
		t.Fatalf("upstream ran %d calls, want 2", calls)
	}

}
