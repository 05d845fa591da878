package tasks

import (
	"context"
	"time"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MaxFollowed bounds the running tasks of dispatched calls one session (on 2026-07-28: one agent) follows (the agent
// starts them): a task-augmented call beyond it is refused with EF_TASK_LIMIT before anything is
// decided or sent. A variable for tests.
var MaxFollowed = 256

// Running is one task a session (or, on 2026-07-28, an agent) follows until its outcome is recorded.
type Running struct {
	OperationID string
	Upstream    string      // the upstream session the task belongs to
	Timer       *time.Timer // its ttl
	Fetching    bool        // the gate's own tasks/result is under way
}

// NoSuchTask answers a request naming a task of another agent's as one naming no task (-32602),
// on either revision.
func NoSuchTask(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "actgate: no such task"}}
}

// RecordOutcome records the outcome of a followed task (a session's, or on 2026-07-28 an
// agent's) and logs it with kv.
func RecordOutcome(log logr.Logger, settler Settler, id string, rt *Running, out sink.InvokeResult, why string, kv ...any) {
	state, err := settler.Settle(context.Background(), rt.OperationID, out, nil)
	l := log.WithValues(kv...).WithValues("task", logfield.Bound(id), "operation", rt.OperationID, "state", state, "why", why)
	switch {
	case err != nil:
		l.Error(err, "Task outcome not recorded")
	case state == journal.StateIndeterminate:
		l.Info("Task outcome unknown")
	default:
		l.V(1).Info("Task outcome recorded")
	}
}
