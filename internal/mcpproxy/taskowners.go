package mcpproxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// Task owners (docs/architecture.md "Tasks"): the proxy remembers the agent that created each
// task it sees created — the CreateTaskResult answering a tools/call of either revision, a
// journaled dispatch's (followed until its outcome, and after) or a hot-path call's (never
// followed) — until the task's ttl passes (at most tasks.MaxTTL). Another agent's tasks/get,
// tasks/result, tasks/cancel or tasks/update naming such a task is answered -32602 (no such
// task) without reaching the upstream, and another agent's tasks are left out of a tasks/list
// answer, so that a task id, once learnt, neither reads nor steers another agent's task. The
// table is bounded per agent (maxTaskOwnersPerAgent) and in all (maxTaskOwners), calls in flight
// that may create a task included: a call that may create one beyond a bound is refused with
// EF_TASK_LIMIT before anything is decided or sent. The map is keyed by a digest of the task
// id, so that an id of any length costs the same.

// maxTaskOwners and maxTaskOwnersPerAgent bound the task owners one proxy remembers. Variables
// for tests.
var (
	maxTaskOwners         = 16384
	maxTaskOwnersPerAgent = 4096
)

// handleTask runs a session's call through the gate (detached from the agent's cancellation:
// the invocation has its own bound). A task-augmented one (task not nil) first takes a place
// among the agent's task owners, and its answer's task is remembered as the agent's; at the
// bound the result is the refusal EF_TASK_LIMIT, nothing decided or sent.
func (b *bridge) handleTask(ctx context.Context, call sink.Call, inv sink.Invoker, task json.RawMessage) (sink.Result, error) {
	if task != nil && !b.p.owners.Reserve(b.agent) {
		b.p.log.Info("Task-augmented call refused: the agent's tasks are at the bound", "session", b.ss.ID(), "code", ef.EFTaskLimit,
			"limit", maxTaskOwnersPerAgent, "total", maxTaskOwners)
		return sink.Result{Code: ef.EFTaskLimit}, nil
	}
	res, err := b.p.cfg.Gate.Handle(context.WithoutCancel(ctx), call, inv)
	if task != nil {
		b.p.owners.LearnCreated(b.agent, res, false)
	}
	return res, err
}

// foreignTaskRequest answers, on a session, an agent's tasks/get, tasks/result or tasks/cancel
// of a task another agent created as one for a task that does not exist; nil for any other
// request.
func (b *bridge) foreignTaskRequest(req *jsonrpc.Request) *jsonrpc.Response {
	switch req.Method {
	case wire.MethodTasksGet, wire.MethodTasksResult, wire.MethodTasksCancel, wire.MethodTasksUpdate:
	default:
		return nil
	}
	if !b.p.owners.Foreign(b.agent, tasks.IDParam(req.Params)) {
		return nil
	}
	b.p.log.Info("Task request refused: the task is another agent's", "method", req.Method, "session", b.ss.ID())
	return tasks.NoSuchTask(req.ID)
}
