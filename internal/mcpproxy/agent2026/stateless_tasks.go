package agent2026

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// MCP 2026-07-28's tasks extension (io.modelcontextprotocol/tasks, SEP-2663): the server alone
// decides that a tools/call runs as a task and answers it with a CreateTaskResult, the task's
// fields at the top level ({"resultType": "task", "taskId", "status", "ttlMs", ...}); the client
// follows it with tasks/get, whose answer inlines the tool's result once completed (or the error
// of a failed task), answers its inputRequests with tasks/update and may cancel it with
// tasks/cancel. There is no tasks/result or tasks/list.
//
// Through the gate (docs/architecture.md "Tasks"): a tools/call is one act whether or not the
// server makes a task of it. A journaled dispatch answered with a CreateTaskResult is INVOKED
// (sink.OutcomeAccepted), the CreateTaskResult is the agent's answer and a retry's, and the
// proxy follows the task under the agent's authenticated identity until the agent's tasks/get
// answer tells its outcome, which it records with sink.Gate.Settle as the 2025 path does
// (tasks.RecordOutcome):
//   - status completed: the inlined result, a CallToolResult, is EXECUTED, or FAILED when
//     isError (tasks.ResultOutcome);
//   - status failed (a protocol error after the task was accepted), cancelled, a tasks/get the
//     upstream answers with -32602 (no such task), the task's ttlMs passing, the proxy closing:
//     INDETERMINATE.
//
// There is no session to hold the task: it is bound to the agent that created it. Another
// agent's tasks/get, tasks/update or tasks/cancel of a followed task's id is answered -32602
// (no such task) without reaching the upstream, so it neither reads nor settles nor steers the
// act. Tasks the gate does not follow (calls it did not journal, settled tasks) stay bound to
// the agent that created them (taskowners.go); the creator's requests pass through as written.

// slTaskKey names a followed task: the agent that created it and the upstream's task id.
type slTaskKey struct{ agent, id string }

// slTaskTable is the running tasks of dispatched calls the stateless path follows. Each agent
// follows at most tasks.MaxFollowed, reservations of tools/calls in flight included: on 2026-07-28 any
// tools/call may create a task, so a tools/call of an agent at the bound is refused with
// EF_TASK_LIMIT before anything is decided or sent.
type slTaskTable struct {
	mu      sync.Mutex
	byKey   map[slTaskKey]*tasks.Running
	byID    map[string]string // task id → the agent following it
	inUse   map[string]int    // agent → tasks followed + calls reserved
	stopped bool
}

// reserve takes a place for one of agent's tools/calls; false at the bound.
func (t *slTaskTable) reserve(agent string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inUse[agent] >= tasks.MaxFollowed {
		return false
	}
	if t.inUse == nil {
		t.inUse = make(map[string]int)
	}
	t.inUse[agent]++
	return true
}

// release gives back a reservation (or a followed task's place).
func (t *slTaskTable) release(agent string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(agent)
}

func (t *slTaskTable) releaseLocked(agent string) {
	if t.inUse[agent] <= 1 {
		delete(t.inUse, agent)
		return
	}
	t.inUse[agent]--
}

// owner returns the agent following task id, "" for a task not followed.
func (t *slTaskTable) owner(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// take stops following agent's task id and returns it (rt, when given, must be the one
// followed); nil when it is not followed.
func (t *slTaskTable) take(agent, id string, rt *tasks.Running) *tasks.Running {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := slTaskKey{agent, id}
	have := t.byKey[k]
	if have == nil || (rt != nil && have != rt) {
		return nil
	}
	delete(t.byKey, k)
	delete(t.byID, id)
	have.Timer.Stop()
	t.releaseLocked(agent)
	return have
}

// taskLimited2026 is the refusal of a tools/call of an agent that follows tasks.MaxFollowed tasks.
func (p *Handler) taskLimited2026(id jsonrpc.ID) *jsonrpc.Response {
	p.log.Info("MCP 2026-07-28 call refused: the agent follows too many running tasks", "code", ef.EFTaskLimit, "limit", tasks.MaxFollowed)
	r, err := toolcall.RefusalFor(sink.Result{Code: ef.EFTaskLimit}, false)
	var raw json.RawMessage
	if err == nil {
		raw, err = r.MarshalJSON()
	}
	if err != nil {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: result could not be rendered"}}
	}
	return &jsonrpc.Response{ID: id, Result: stateless.WithResultType(raw)}
}

// followTask2026 starts following the task a journaled dispatch of agent's created (res: its
// acceptance, first answer only) and reports whether it took the call's reservation.
func (p *Handler) followTask2026(agent string, res sink.Result) bool {
	settler, ok := p.cfg.Gate.(tasks.Settler)
	if !ok || res.Replayed || res.State != journal.StateInvoked || len(res.Accepted) == 0 {
		return false
	}
	id, ttl, _ := tasks.ParseCreated2026(res.Accepted)
	if id == "" {
		return false
	}
	t := &p.sl.tasks
	rt := &tasks.Running{OperationID: res.OperationID}
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		tasks.RecordOutcome(p.log, settler, id, rt, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, "the proxy closed")
		return false
	}
	if t.byKey == nil {
		t.byKey = make(map[slTaskKey]*tasks.Running)
		t.byID = make(map[string]string)
	}
	var prev *tasks.Running
	prevAgent := t.byID[id]
	if prevAgent != "" {
		k := slTaskKey{prevAgent, id}
		prev = t.byKey[k]
		delete(t.byKey, k)
		prev.Timer.Stop()
		t.releaseLocked(prevAgent)
	}
	t.byKey[slTaskKey{agent, id}] = rt
	t.byID[id] = agent
	rt.Timer = time.AfterFunc(ttl, func() { p.abandonTask2026(agent, id, rt, "the task's ttl passed") })
	t.mu.Unlock()
	if prev != nil {
		// The upstream gave the same id to another task: the earlier one cannot be told apart.
		tasks.RecordOutcome(p.log, settler, id, prev, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, "the upstream reused the task id")
	}
	p.log.V(1).Info("Task followed", "task", logfield.Bound(id), "operation", res.OperationID, "act", res.ActID)
	return true
}

// abandonTask2026 settles a followed task INDETERMINATE when its outcome can no longer be
// learnt.
func (p *Handler) abandonTask2026(agent, id string, rt *tasks.Running, why string) {
	p.settleTask2026(agent, id, rt, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, why)
}

func (p *Handler) settleTask2026(agent, id string, rt *tasks.Running, out sink.InvokeResult, why string) {
	settler, ok := p.cfg.Gate.(tasks.Settler)
	if !ok {
		return
	}
	if rt = p.sl.tasks.take(agent, id, rt); rt != nil {
		tasks.RecordOutcome(p.log, settler, id, rt, out, why)
	}
}

// abandonTasks2026 settles every followed task INDETERMINATE and follows no more (the proxy
// closes).
func (p *Handler) abandonTasks2026() {
	t := &p.sl.tasks
	t.mu.Lock()
	t.stopped = true
	keys := make(map[slTaskKey]*tasks.Running, len(t.byKey))
	for k, rt := range t.byKey {
		keys[k] = rt
	}
	t.mu.Unlock()
	for k, rt := range keys {
		p.abandonTask2026(k.agent, k.id, rt, "the proxy closed")
	}
}

// foreignTask reports whether a tasks/get, tasks/update or tasks/cancel of agent (or a
// tasks/result, which a 2025 upstream answers) names a task another agent follows or created
// (taskowners.go): such a request is answered as one for a task that does not exist.
func (p *Handler) foreignTask(agent string, sr *stateless.Request) *jsonrpc.Response {
	id := sr.Name
	switch sr.Req.Method {
	case wire.MethodTasksGet, wire.MethodTasksUpdate, wire.MethodTasksCancel:
	case wire.MethodTasksResult:
		id = tasks.IDParam(sr.Req.Params)
	default:
		return nil
	}
	if owner := p.sl.tasks.owner(id); (owner == "" || owner == agent) && !p.owners.Foreign(agent, id) {
		return nil
	}
	p.log.Info("MCP 2026-07-28 task request refused: the task is another agent's", "method", sr.Req.Method)
	return tasks.NoSuchTask(sr.Req.ID)
}

// observeTask2026 learns what it can of agent's followed task from the upstream's answer to
// the agent's tasks/get.
func (p *Handler) observeTask2026(agent string, sr *stateless.Request, answer *jsonrpc.Response) {
	if sr.Req.Method != wire.MethodTasksGet || p.sl.tasks.owner(sr.Name) != agent {
		return
	}
	id := sr.Name
	if answer.Error != nil {
		if we, ok := answer.Error.(*jsonrpc.Error); ok && we.Code == wire.CodeInvalidParams {
			p.abandonTask2026(agent, id, nil, "the upstream has no such task")
		}
		return
	}
	var st struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	if wire.Unmarshal(answer.Result, &st) != nil {
		return
	}
	switch st.Status {
	case "completed":
		p.settleTask2026(agent, id, nil, tasks.ResultOutcome(&jsonrpc.Response{Result: st.Result}), "the agent's tasks/get")
	case "failed":
		p.abandonTask2026(agent, id, nil, "the task failed")
	case "cancelled":
		p.abandonTask2026(agent, id, nil, "the task was cancelled")
	}
}
