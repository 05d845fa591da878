package agent2025

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// A session's task owners are the proxy's (mcpproxy's taskowners.go, docs/architecture.md
// "Tasks"): a task-augmented call takes a place among its agent's, and another agent's task
// requests are answered as for a task that does not exist.

// handleTask runs a session's call through the gate (detached from the agent's cancellation:
// the invocation has its own bound). A task-augmented one (task not nil) first takes a place
// among the agent's task owners, and its answer's task is remembered as the agent's; at the
// bound the result is the refusal EF_TASK_LIMIT, nothing decided or sent.
func (b *bridge) handleTask(ctx context.Context, call sink.Call, inv sink.Invoker, task json.RawMessage) (sink.Result, error) {
	if task != nil && !b.p.owners.Reserve(b.agent) {
		b.p.log.Info("Task-augmented call refused: the agent's tasks are at the bound", "session", b.ss.ID(), "code", ef.EFTaskLimit,
			"limit", b.p.owners.MaxPerAgent, "total", b.p.owners.Max)
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
