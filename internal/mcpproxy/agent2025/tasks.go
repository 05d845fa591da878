package agent2025

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// MCP tasks (2025-11-25, basic/utilities/tasks): a task-augmented tools/call carries
// params.task and is answered with a CreateTaskResult, {"task": {"taskId", "status", "ttl",
// ...}}; the requestor follows the task with tasks/get, tasks/list and
// notifications/tasks/status, fetches its result with tasks/result (what the tools/call would
// have answered: a CallToolResult or a JSON-RPC error) and may cancel it with tasks/cancel.
//
// Through the gate (docs/architecture.md "Tasks"): a task-augmented tools/call is one act like
// any other (policy, authority, DISPATCH_PENDING, sent once, with params.task as the agent wrote
// it). A journaled dispatch the upstream answers with a CreateTaskResult is INVOKED
// (sink.OutcomeAccepted), the CreateTaskResult is the agent's answer, and the session follows
// the task until its outcome is known, then records it (sink.Gate.Settle):
//   - the agent's tasks/result answer: a CallToolResult is EXECUTED, or FAILED when isError; a
//     JSON-RPC error is INDETERMINATE (it cannot be told from the tasks/result request's own
//     errors, and the call was accepted, so it had not been refused before execution);
//   - a terminal status the gate carries (a tasks/get, tasks/cancel or tasks/list answer, a
//     notifications/tasks/status on an answer stream): cancelled is INDETERMINATE; completed or
//     failed makes the gate ask tasks/result itself, once, and record that answer (the status
//     alone does not say whether the tool reported an error);
//   - a tasks/get or tasks/result the upstream answers with -32602 (no such task), the task's
//     ttl passing, the upstream session or the agent session ending: INDETERMINATE, as any
//     outcome that can no longer be learnt. The gate does not poll a working task: the agent's
//     own requests carry what the gate learns, so the upstream sees no traffic the agent did not
//     cause, and nothing of an input_required exchange (delivered on the agent's tasks/result
//     stream) is taken from the agent.
//
// The methods are the wire package's MethodTasks* and NotifyTaskStatus.

// taskKey is the context key of the agent's params.task of a task-augmented tools/call.
type taskKey struct{}

// withTask returns ctx carrying the agent's params.task.
func withTask(ctx context.Context, task json.RawMessage) context.Context {
	return context.WithValue(ctx, taskKey{}, task)
}

// taskOf returns the params.task of the tools/call of ctx, nil for a plain call.
func taskOf(ctx context.Context) json.RawMessage {
	t, _ := ctx.Value(taskKey{}).(json.RawMessage)
	return t
}

// taskTable is the running tasks of dispatched calls a session follows, by the upstream's task
// id; at most tasks.MaxFollowed, reservations of calls in flight included.
type taskTable struct {
	mu       sync.Mutex
	byID     map[string]*tasks.Running
	reserved int
}

// reserveTask takes a place for a task-augmented call about to be decided; false when the
// session follows tasks.MaxFollowed already.
func (b *bridge) reserveTask() bool {
	t := &b.tasks
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID)+t.reserved >= tasks.MaxFollowed {
		return false
	}
	t.reserved++
	return true
}

func (b *bridge) unreserveTask() {
	t := &b.tasks
	t.mu.Lock()
	t.reserved--
	t.mu.Unlock()
}

// taskLimited is the refusal of a task-augmented call beyond tasks.MaxFollowed: nothing was decided or
// sent.
func (b *bridge) taskLimited(tool string) (mcp.Result, error) {
	b.p.log.Info("Task-augmented call refused", "session", b.ss.ID(), "code", ef.EFTaskLimit, "limit", tasks.MaxFollowed)
	return b.render(toolcall.RefusalFor(sink.Result{Code: ef.EFTaskLimit}, !b.hasOutputSchema(tool)))
}

// taskAnswer is what the gate's answer to a task-augmented call (task not nil) holds: when the
// upstream runs the call as a task, its CreateTaskResult (the same one to a retry), and the
// session follows the task to its outcome. A plain call's answer is res as it is.
func (b *bridge) taskAnswer(task json.RawMessage, res sink.Result, upstreamSession string) sink.Result {
	if task == nil || !res.Allowed || len(res.Accepted) == 0 {
		return res
	}
	b.followTask(res, upstreamSession)
	res.Upstream = res.Accepted
	return res
}

// followTask starts following the task a journaled dispatch created (res: its acceptance).
func (b *bridge) followTask(res sink.Result, upstreamSession string) {
	settler, ok := b.p.cfg.Gate.(tasks.Settler)
	if !ok || res.Replayed || res.State != journal.StateInvoked || len(res.Accepted) == 0 {
		return
	}
	id, ttl, _ := tasks.ParseCreated(res.Accepted)
	if id == "" {
		return // tasks.Classify made such a call INDETERMINATE
	}
	rt := &tasks.Running{OperationID: res.OperationID, Upstream: upstreamSession}
	t := &b.tasks
	t.mu.Lock()
	prev := t.byID[id]
	if t.byID == nil {
		t.byID = make(map[string]*tasks.Running)
	}
	t.byID[id] = rt
	rt.Timer = time.AfterFunc(ttl, func() { b.abandonTask(id, rt, "the task's ttl passed") })
	t.mu.Unlock()
	if prev != nil {
		// The upstream gave the same id to another task: the earlier one cannot be told apart.
		prev.Timer.Stop()
		b.recordTask(settler, id, prev, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, "the upstream reused the task id")
	}
	b.p.log.V(1).Info("Task followed", "session", b.ss.ID(), "task", logfield.Bound(id), "operation", res.OperationID, "act", res.ActID)
}

// takeTask stops following a task and returns it; nil when it is not followed (or rt, when
// given, is no longer the one followed under id).
func (b *bridge) takeTask(id string, rt *tasks.Running) *tasks.Running {
	t := &b.tasks
	t.mu.Lock()
	defer t.mu.Unlock()
	have := t.byID[id]
	if have == nil || (rt != nil && have != rt) {
		return nil
	}
	delete(t.byID, id)
	have.Timer.Stop()
	return have
}

// settleTask records the outcome of a followed task.
func (b *bridge) settleTask(id string, out sink.InvokeResult, why string) {
	settler, ok := b.p.cfg.Gate.(tasks.Settler)
	if !ok {
		return
	}
	if rt := b.takeTask(id, nil); rt != nil {
		b.recordTask(settler, id, rt, out, why)
	}
}

// abandonTask settles a task INDETERMINATE when its outcome can no longer be learnt.
func (b *bridge) abandonTask(id string, rt *tasks.Running, why string) {
	settler, ok := b.p.cfg.Gate.(tasks.Settler)
	if !ok {
		return
	}
	if rt = b.takeTask(id, rt); rt != nil {
		b.recordTask(settler, id, rt, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, why)
	}
}

// abandonTasks settles every followed task INDETERMINATE (the session, or the upstream session
// the tasks belong to, ended).
func (b *bridge) abandonTasks(why string) {
	t := &b.tasks
	t.mu.Lock()
	ids := make(map[string]*tasks.Running, len(t.byID))
	for id, rt := range t.byID {
		ids[id] = rt
	}
	t.mu.Unlock()
	for id, rt := range ids {
		b.abandonTask(id, rt, why)
	}
}

func (b *bridge) recordTask(settler tasks.Settler, id string, rt *tasks.Running, out sink.InvokeResult, why string) {
	tasks.RecordOutcome(b.p.log, settler, id, rt, out, why, "session", b.ss.ID())
}

// followsTasks reports whether the session follows any task (the observation of tasks/*
// traffic costs nothing otherwise).
func (b *bridge) followsTasks() bool {
	t := &b.tasks
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID) > 0
}

// observeTaskAnswer learns what it can of a followed task from the upstream's answer to the
// agent's tasks/* request (relay).
func (b *bridge) observeTaskAnswer(req *jsonrpc.Request, answer *jsonrpc.Response) {
	if !b.followsTasks() {
		return
	}
	switch req.Method {
	case wire.MethodTasksResult:
		id := tasks.IDParam(req.Params)
		if id == "" {
			return
		}
		b.settleTask(id, tasks.ResultOutcome(answer), "the agent's tasks/result")
	case wire.MethodTasksGet, wire.MethodTasksCancel:
		id := tasks.IDParam(req.Params)
		if id == "" {
			return
		}
		if answer.Error != nil {
			if we, ok := answer.Error.(*jsonrpc.Error); ok && we.Code == wire.CodeInvalidParams && req.Method == wire.MethodTasksGet {
				b.settleTask(id, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, "the upstream has no such task")
			}
			return
		}
		var st struct {
			Status string `json:"status"`
		}
		if wire.Unmarshal(answer.Result, &st) == nil {
			b.taskStatus(id, st.Status)
		}
	case wire.MethodTasksList:
		if answer.Error != nil {
			return
		}
		var l struct {
			Tasks []struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"tasks"`
		}
		if wire.Unmarshal(answer.Result, &l) == nil {
			for _, t := range l.Tasks {
				b.taskStatus(t.TaskID, t.Status)
			}
		}
	}
}

// taskStatusNotified learns a followed task's status from the upstream's
// notifications/tasks/status on a stream the gate carries.
func (b *bridge) taskStatusNotified(params json.RawMessage) {
	if !b.followsTasks() {
		return
	}
	var st struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if wire.Unmarshal(params, &st) == nil {
		b.taskStatus(st.TaskID, st.Status)
	}
}

// taskStatus acts on a followed task's status: a cancelled task's outcome is unknown; a
// completed or failed one's is fetched (fetchTaskResult); a working one is left alone.
func (b *bridge) taskStatus(id, status string) {
	switch status {
	case "cancelled":
		b.settleTask(id, sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, "the task was cancelled")
	case "completed", "failed":
		b.fetchTaskResult(id)
	}
}

// fetchTaskResult asks the upstream for a terminal task's result, once, and records it. It runs
// in the background, bounded by the call timeout, on the upstream session the task belongs to.
func (b *bridge) fetchTaskResult(id string) {
	t := &b.tasks
	t.mu.Lock()
	rt := t.byID[id]
	if rt == nil || rt.Fetching {
		t.mu.Unlock()
		return
	}
	rt.Fetching = true
	t.mu.Unlock()
	b.mu.Lock()
	cs := b.cs
	b.mu.Unlock()
	go func() {
		if cs == nil || cs.ID() != rt.Upstream {
			b.abandonTask(id, rt, "the upstream session of the task ended")
			return
		}
		version, ok := directVersion(cs)
		if !ok {
			b.abandonTask(id, rt, "the upstream session of the task ended")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.p.cfg.CallTimeout)
		defer cancel()
		params, _ := json.Marshal(struct {
			TaskID string `json:"taskId"`
		}{id})
		upID, _ := jsonrpc.MakeID("actgate-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
		answer, err := b.exchange(ctx, cs, version, &jsonrpc.Request{ID: upID, Method: wire.MethodTasksResult, Params: params})
		if err != nil {
			b.p.log.Info("Task result not received", "task", logfield.Bound(id), "error", err.Error())
			b.abandonTask(id, rt, "the gate's tasks/result failed")
			return
		}
		if b.takeTask(id, rt) != nil {
			if settler, ok := b.p.cfg.Gate.(tasks.Settler); ok {
				b.recordTask(settler, id, rt, tasks.ResultOutcome(answer), "the gate's tasks/result")
			}
		}
	}()
}
