package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// ParseCreated2026 reads a 2026-07-28 tools/call result: ok is false for a result that is not
// a CreateTaskResult (resultType "task"); id is "" for one whose task the gate cannot follow (no
// task id, one that is not a string, too long).
func ParseCreated2026(raw json.RawMessage) (id string, ttl time.Duration, ok bool) {
	var c struct {
		ResultType string          `json:"resultType"`
		TaskID     json.RawMessage `json:"taskId"`
		TTLMs      json.RawMessage `json:"ttlMs"`
	}
	if wire.Unmarshal(raw, &c) != nil || c.ResultType != wire.ResultTypeTask {
		return "", 0, false
	}
	if wire.Unmarshal(c.TaskID, &id) != nil || id == "" || len(id) > MaxID {
		return "", 0, true
	}
	ttl = MaxTTL
	var ms float64
	if wire.Unmarshal(c.TTLMs, &ms) == nil {
		ttl = TTL(ms)
	}
	return id, ttl, true
}

// MaxID bounds the upstream's task id the gate follows; MaxTTL bounds how long it
// follows a task whose ttl is longer (or null: until the session ends).
const (
	MaxID  = 256
	MaxTTL = 24 * time.Hour
)

// Settler is the part of the gate that records the outcome of an accepted dispatch
// (*sink.Gate implements it). A Gate without it has its tasks' acts left INVOKED, which the
// sink's recovery makes INDETERMINATE.
type Settler interface {
	Settle(ctx context.Context, operationID string, out sink.InvokeResult, err error) (journal.State, error)
}

// Param returns the params.task member of tools/call params, when there is one that is not
// null: the call is task-augmented. A substring test keeps it off a plain call's path.
func Param(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"task"`)) {
		return nil
	}
	var p struct {
		Task json.RawMessage `json:"task"`
	}
	if wire.Unmarshal(params, &p) != nil || len(p.Task) == 0 || bytes.Equal(p.Task, []byte("null")) {
		return nil
	}
	return p.Task
}

// taskCallParams are tools/call params with the agent's params.task, as forwarded.
type taskCallParams struct {
	*mcp.CallToolParams
	Task json.RawMessage `json:"task,omitempty"`
}

// CallParams returns what the invoker forwards: params, with task when the call is
// task-augmented.
func CallParams(params *mcp.CallToolParams, task json.RawMessage) any {
	if task == nil {
		return params
	}
	return &taskCallParams{CallToolParams: params, Task: task}
}

// createdTask is what the gate reads of a CreateTaskResult.
type createdTask struct {
	Task *struct {
		TaskID *string  `json:"taskId"`
		TTL    *float64 `json:"ttl"`
	} `json:"task"`
}

// ParseCreated reads a task-augmented call's result: ok is false for a result that is not a
// CreateTaskResult (the upstream ran the call as a plain one); id is "" for one whose task id
// the gate cannot follow.
func ParseCreated(raw json.RawMessage) (id string, ttl time.Duration, ok bool) {
	var c createdTask
	if wire.Unmarshal(raw, &c) != nil || c.Task == nil {
		return "", 0, false
	}
	if c.Task.TaskID == nil || *c.Task.TaskID == "" || len(*c.Task.TaskID) > MaxID {
		return "", 0, true
	}
	ttl = MaxTTL
	if c.Task.TTL != nil {
		ttl = TTL(*c.Task.TTL)
	}
	return *c.Task.TaskID, ttl, true
}

// TTL is a task's lifetime from the ttl in milliseconds its upstream gave: at most
// MaxTTL, and MaxTTL for a negative one.
func TTL(ms float64) time.Duration {
	if ms >= 0 && ms < float64(MaxTTL/time.Millisecond) {
		return time.Duration(ms) * time.Millisecond
	}
	return MaxTTL
}

// Classify is the outcome of a call's one attempt whose answer parse reads as a
// CreateTaskResult of its revision (ParseCreated, ParseCreated2026): one whose task the gate can
// follow is accepted (INVOKED; its result is the agent's answer), one whose task it cannot
// follow is INDETERMINATE; any other answer is classified as a plain call's (out).
func Classify(raw json.RawMessage, out sink.InvokeResult, parse func(json.RawMessage) (string, time.Duration, bool)) sink.InvokeResult {
	id, _, ok := parse(raw)
	switch {
	case !ok:
		return out
	case id == "":
		return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeIndeterminate}
	}
	return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeAccepted}
}

// IDParam reads params.taskId of tasks/get, tasks/result and tasks/cancel.
func IDParam(params json.RawMessage) string {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if wire.Unmarshal(params, &p) != nil {
		return ""
	}
	return p.TaskID
}

// ResultOutcome classifies a tasks/result answer of a task-augmented tools/call: the
// call's CallToolResult is EXECUTED, or FAILED when isError; anything else INDETERMINATE.
func ResultOutcome(answer *jsonrpc.Response) sink.InvokeResult {
	if answer == nil || answer.Error != nil {
		return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}
	}
	var r struct {
		IsError bool            `json:"isError"`
		Content json.RawMessage `json:"content"`
	}
	if wire.Unmarshal(answer.Result, &r) != nil || len(r.Content) == 0 {
		return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate, Result: answer.Result}
	}
	if r.IsError {
		return sink.InvokeResult{Result: answer.Result, Outcome: sink.OutcomeFailed}
	}
	return sink.InvokeResult{Result: answer.Result, Outcome: sink.OutcomeExecuted}
}
