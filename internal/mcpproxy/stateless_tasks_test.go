package mcpproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// tasks2026Server is a 2026-07-28 server with the tasks extension, written to its wire
// (SEP-2663): every tools/call of a ticket_* tool creates a task (CreateTaskResult: resultType
// "task", the task's fields at the top level), which completes when the test says so; tasks/get
// answers it with the tool's result inlined once completed; tasks/cancel cancels it.
type tasks2026Server struct {
	mu         sync.Mutex
	dispatches int
	gets       int
	tasks      map[string]*task2026
}

type task2026 struct {
	status string
	result json.RawMessage
}

func (s *tasks2026Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			TaskID    string          `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.Params.TaskID != "" && r.Header.Get("Mcp-Name") != m.Params.TaskID {
		s.answer(w, m.ID, "", `{"code":-32020,"message":"Mcp-Name does not match params.taskId"}`)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Method {
	case "server/discover":
		s.answer(w, m.ID, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"serverInfo":{"name":"tasks2026","version":"1"},"resultType":"complete"}`, "")
	case "tools/list":
		s.answer(w, m.ID, `{"tools":[{"name":"ticket_task","inputSchema":{"type":"object"}}],"resultType":"complete"}`, "")
	case "tools/call":
		s.dispatches++
		id := fmt.Sprintf("task-%d", s.dispatches)
		s.tasks[id] = &task2026{status: "working"}
		s.answer(w, m.ID, `{"resultType":"task","taskId":"`+id+`","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":100}`, "")
	case "tasks/get":
		s.gets++
		t := s.tasks[m.Params.TaskID]
		if t == nil {
			s.answer(w, m.ID, "", `{"code":-32602,"message":"unknown task"}`)
			return
		}
		out := map[string]any{"resultType": "complete", "taskId": m.Params.TaskID, "status": t.status, "ttlMs": 60000}
		if t.status == "completed" {
			out["result"] = t.result
		}
		raw, _ := json.Marshal(out)
		s.answer(w, m.ID, string(raw), "")
	case "tasks/cancel":
		if t := s.tasks[m.Params.TaskID]; t != nil && t.status == "working" {
			t.status = "cancelled"
		}
		s.answer(w, m.ID, `{"resultType":"complete"}`, "")
	default:
		s.answer(w, m.ID, "", `{"code":-32601,"message":"Method not found"}`)
	}
}

func (s *tasks2026Server) answer(w http.ResponseWriter, id json.RawMessage, result, rpcErr string) {
	w.Header().Set("Content-Type", "application/json")
	if rpcErr != "" {
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id, rpcErr)
		return
	}
	_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// finish completes task id with the tool result raw.
func (s *tasks2026Server) finish(id, raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id].status, s.tasks[id].result = "completed", json.RawMessage(raw)
}

func (s *tasks2026Server) counts() (dispatches, gets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dispatches, s.gets
}

// tasks2026Fixture is a real gate behind a real proxy with two authenticated agents in front
// of a tasks2026Server.
type tasks2026Fixture struct {
	t     *testing.T
	up    *tasks2026Server
	store *boltstore.Store
	url   string
}

const (
	tokenA = "token-a-0123456789"
	tokenB = "token-b-0123456789"
)

func newTasks2026Fixture(t *testing.T) *tasks2026Fixture {
	t.Helper()
	up := &tasks2026Server{tasks: map[string]*task2026{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	agents, err := NewBearerAgents(map[string][]byte{"agent-a": []byte(tokenA), "agent-b": []byte(tokenB)})
	if err != nil {
		t.Fatal(err)
	}
	f := &tasks2026Fixture{t: t, up: up}
	var gate Gate
	f.store, gate = newGateOf(t, upSrv.URL)
	_, _, f.url = serveProxy(t, Config{Server: "bank", URL: upSrv.URL, Gate: gate, Agent: agentName, Agents: agents, CallTimeout: 5 * time.Second})
	return f
}

// post sends one 2026-07-28 request of the agent with token tok; name is its Mcp-Name.
func (f *tasks2026Fixture) post(tok string, id int, method, name, params string) map[string]any {
	f.t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	if params != "" {
		params += ","
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, meta)
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Authorization": "Bearer " + tok}
	if name != "" {
		hdr["Mcp-Name"] = name
	}
	_, m := post2026(f.t, f.url, body, hdr)
	return m
}

// records and waitState read the journal as taskFixture's do.
func (f *tasks2026Fixture) records(st journal.State) []journal.DispatchRecord {
	return (&taskFixture{t: f.t, store: f.store}).records(st)
}

func (f *tasks2026Fixture) waitState(st journal.State, n int) []journal.DispatchRecord {
	return (&taskFixture{t: f.t, store: f.store}).waitState(st, n)
}

func resultOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	return r
}

// TestStatelessTaskSettles: a 2026-07-28 tools/call of a protected tool that the upstream runs
// as a task is one act: dispatched once and INVOKED while the task works, the CreateTaskResult
// as the upstream gave it to the call and to its retry (no second dispatch); another agent's
// tasks/get of the task id is answered "no such task" without reaching the upstream and settles
// nothing; the owner's tasks/get of the completed task relays the inlined result and settles
// the act EXECUTED (FAILED for a tool error).
func TestStatelessTaskSettles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result string
		want   journal.State
	}{
		{"executed", `{"content":[{"type":"text","text":"ticket filed"}]}`, journal.StateExecuted},
		{"tool error", `{"content":[{"type":"text","text":"no"}],"isError":true}`, journal.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTasks2026Fixture(t)
			call := `"name":"ticket_task","arguments":{"title":"t"}`
			created := resultOf(t, f.post(tokenA, 1, "tools/call", "ticket_task", call))
			if created["resultType"] != "task" || created["taskId"] != "task-1" || created["status"] != "working" || created["ttlMs"] != float64(60000) {
				t.Fatalf("CreateTaskResult not as the upstream gave it: %v", created)
			}
			inv := f.waitState(journal.StateInvoked, 1)
			if inv[0].Tool != "ticket_task" {
				t.Fatalf("INVOKED record of %q", inv[0].Tool)
			}
			retry := resultOf(t, f.post(tokenA, 1, "tools/call", "ticket_task", call))
			if retry["taskId"] != "task-1" {
				t.Fatalf("retry: %v, want the same task", retry)
			}
			if d, _ := f.up.counts(); d != 1 {
				t.Fatalf("upstream dispatched %d times, want 1", d)
			}

			// Agent b's requests for agent a's task: refused by the gate, never relayed.
			for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
				params := `"taskId":"task-1"`
				if method == "tasks/update" {
					params += `,"inputResponses":{}`
				}
				m := f.post(tokenB, 2, method, "task-1", params)
				e, _ := m["error"].(map[string]any)
				if e["code"] != float64(wire.CodeInvalidParams) {
					t.Fatalf("agent b's %s of agent a's task: %v, want -32602", method, m)
				}
			}
			if _, gets := f.up.counts(); gets != 0 {
				t.Fatalf("agent b's tasks/get reached the upstream (%d gets)", gets)
			}
			f.up.finish("task-1", tc.result)
			if len(f.records(journal.StateInvoked)) != 1 {
				t.Fatal("another agent's requests settled the act")
			}

			working := resultOf(t, f.post(tokenA, 3, "tasks/get", "task-1", `"taskId":"task-1"`))
			if working["status"] != "completed" || working["result"] == nil {
				t.Fatalf("tasks/get: %v", working)
			}
			rec := f.waitState(tc.want, 1)
			if rec[0].Tool != "ticket_task" {
				t.Fatalf("%s record of %q", tc.want, rec[0].Tool)
			}
			f.waitState(journal.StateInvoked, 0)
			if d, _ := f.up.counts(); d != 1 {
				t.Fatalf("upstream dispatched %d times, want 1", d)
			}
		})
	}
}

// TestStatelessTaskCancelled: a followed task the agent cancels is INDETERMINATE once its
// tasks/get says cancelled (whether the tool acted is not known).
func TestStatelessTaskCancelled(t *testing.T) {
	f := newTasks2026Fixture(t)
	resultOf(t, f.post(tokenA, 1, "tools/call", "ticket_task", `"name":"ticket_task","arguments":{}`))
	f.waitState(journal.StateInvoked, 1)
	resultOf(t, f.post(tokenA, 2, "tasks/cancel", "task-1", `"taskId":"task-1"`))
	if got := resultOf(t, f.post(tokenA, 3, "tasks/get", "task-1", `"taskId":"task-1"`)); got["status"] != "cancelled" {
		t.Fatalf("tasks/get: %v", got)
	}
	f.waitState(journal.StateIndeterminate, 1)
	f.waitState(journal.StateInvoked, 0)
}

// TestStatelessTaskLimit: an agent that follows tasks.MaxFollowed running tasks has its next tools/call
// refused with EF_TASK_LIMIT before anything is decided or sent; another agent is not limited.
func TestStatelessTaskLimit(t *testing.T) {
	defer func(n int) { tasks.MaxFollowed = n }(tasks.MaxFollowed)
	tasks.MaxFollowed = 2
	f := newTasks2026Fixture(t)
	for i := range 2 {
		resultOf(t, f.post(tokenA, i+1, "tools/call", "ticket_task", fmt.Sprintf(`"name":"ticket_task","arguments":{"n":%d}`, i)))
	}
	r := resultOf(t, f.post(tokenA, 9, "tools/call", "ticket_task", `"name":"ticket_task","arguments":{"n":9}`))
	meta, _ := r["_meta"].(map[string]any)
	if r["isError"] != true || meta[MetaEFCode] != string(ef.EFTaskLimit) {
		t.Fatalf("third task: %v, want EF_TASK_LIMIT", r)
	}
	if d, _ := f.up.counts(); d != 2 {
		t.Fatalf("upstream dispatched %d times, want 2", d)
	}
	// (Another action: the same one in flight is refused EF_INDETERMINATE in every scope.)
	if got := resultOf(t, f.post(tokenB, 1, "tools/call", "ticket_task", `"name":"ticket_task","arguments":{"agent":"b"}`)); got["resultType"] != "task" {
		t.Fatalf("agent b limited by agent a's tasks: %v", got)
	}
	// A settled task frees its place.
	f.up.finish("task-1", `{"content":[{"type":"text","text":"ok"}]}`)
	resultOf(t, f.post(tokenA, 10, "tasks/get", "task-1", `"taskId":"task-1"`))
	f.waitState(journal.StateExecuted, 1)
	if got := resultOf(t, f.post(tokenA, 11, "tools/call", "ticket_task", `"name":"ticket_task","arguments":{"n":11}`)); got["resultType"] != "task" {
		t.Fatalf("after a task settled: %v", got)
	}
}
