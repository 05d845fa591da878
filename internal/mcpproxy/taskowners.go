package mcpproxy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// Task owners (docs/architecture.md "Tasks"): the proxy remembers the agent that created each
// task it sees created — the CreateTaskResult answering a tools/call of either revision, a
// journaled dispatch's (followed until its outcome, and after) or a hot-path call's (never
// followed) — until the task's ttl passes (at most maxTaskTTL). Another agent's tasks/get,
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

// taskOwnerSweep is how often, at most, a full table is swept of expired entries.
const taskOwnerSweep = time.Second

type taskOwnerKey [sha256.Size]byte

func ownerKey(id string) taskOwnerKey { return sha256.Sum256([]byte(id)) }

type taskOwner struct {
	agent   string
	expires time.Time
}

// taskOwners is the table. inUse counts, per agent, its entries and its reservations.
type taskOwners struct {
	mu    sync.Mutex
	byID  map[taskOwnerKey]taskOwner
	inUse map[string]int
	total int
	swept time.Time
}

// reserve takes a place for a call of agent that may create a task; false at a bound.
func (t *taskOwners) reserve(agent string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total >= maxTaskOwners || t.inUse[agent] >= maxTaskOwnersPerAgent {
		t.sweepLocked(time.Now())
		if t.total >= maxTaskOwners || t.inUse[agent] >= maxTaskOwnersPerAgent {
			return false
		}
	}
	if t.inUse == nil {
		t.inUse = make(map[string]int)
	}
	t.inUse[agent]++
	t.total++
	return true
}

// settle ends a reservation of agent: when the call created a task (id not ""), its place is
// the task's until ttl passes; else it is given back.
func (t *taskOwners) settle(agent, id string, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id == "" {
		t.releaseLocked(agent)
		return
	}
	k := ownerKey(id)
	if prev, ok := t.byID[k]; ok {
		// The same id again (a replayed answer, or an upstream that reused it): one entry, the
		// latest creator's, for the later of the two ttls.
		t.releaseLocked(prev.agent)
		if agent == prev.agent && prev.expires.After(time.Now().Add(ttl)) {
			ttl = time.Until(prev.expires)
		}
	}
	if t.byID == nil {
		t.byID = make(map[taskOwnerKey]taskOwner)
	}
	t.byID[k] = taskOwner{agent: agent, expires: time.Now().Add(ttl)}
}

func (t *taskOwners) releaseLocked(agent string) {
	t.total--
	if t.inUse[agent] <= 1 {
		delete(t.inUse, agent)
		return
	}
	t.inUse[agent]--
}

// sweepLocked forgets the entries whose ttl passed, at most once per taskOwnerSweep.
func (t *taskOwners) sweepLocked(now time.Time) {
	if now.Sub(t.swept) < taskOwnerSweep {
		return
	}
	t.swept = now
	for k, o := range t.byID {
		if now.After(o.expires) {
			delete(t.byID, k)
			t.releaseLocked(o.agent)
		}
	}
}

// owner returns the agent that created task id, "" for a task the proxy did not see created
// (or whose ttl passed).
func (t *taskOwners) owner(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := ownerKey(id)
	o, ok := t.byID[k]
	if !ok {
		return ""
	}
	if time.Now().After(o.expires) {
		delete(t.byID, k)
		t.releaseLocked(o.agent)
		return ""
	}
	return o.agent
}

// foreign reports whether task id was created by an agent other than agent.
func (t *taskOwners) foreign(agent, id string) bool {
	owner := t.owner(id)
	return owner != "" && owner != agent
}

// createdTaskOf reads the task a tools/call's answer created: its id and lifetime; "" when the
// answer is not a CreateTaskResult with a string task id (2025-11-25: {"task": {"taskId",
// "ttl"}}; 2026-07-28: {"resultType": "task", "taskId", "ttlMs"} at the top level). Unlike
// parseCreated, any id length is read: the table keeps a digest.
func createdTaskOf(raw json.RawMessage, rev2026 bool) (string, time.Duration) {
	var c struct {
		ResultType string `json:"resultType"`
		TaskID     any    `json:"taskId"`
		TTLMs      any    `json:"ttlMs"`
		Task       *struct {
			TaskID any `json:"taskId"`
			TTL    any `json:"ttl"`
		} `json:"task"`
	}
	if len(raw) == 0 || wire.Unmarshal(raw, &c) != nil {
		return "", 0
	}
	idv, ttlv := c.TaskID, c.TTLMs
	if !rev2026 {
		if c.Task == nil {
			return "", 0
		}
		idv, ttlv = c.Task.TaskID, c.Task.TTL
	} else if c.ResultType != wire.ResultTypeTask {
		return "", 0
	}
	id, _ := idv.(string)
	if id == "" {
		return "", 0
	}
	ttl := maxTaskTTL
	if ms, ok := ttlv.(float64); ok {
		ttl = taskTTL(ms)
	}
	return id, ttl
}

// learnCreated ends agent's reservation (taskOwners.reserve) with what the call's result res
// says: the task it created, if any.
func (p *Proxy) learnCreated(agent string, res sink.Result, rev2026 bool) {
	raw := res.Accepted
	if len(raw) == 0 && res.Allowed {
		raw = res.Upstream
	}
	id, ttl := createdTaskOf(raw, rev2026)
	p.owners.settle(agent, id, ttl)
}

// handleTask runs a session's call through the gate (detached from the agent's cancellation:
// the invocation has its own bound). A task-augmented one (task not nil) first takes a place
// among the agent's task owners, and its answer's task is remembered as the agent's; at the
// bound the result is the refusal EF_TASK_LIMIT, nothing decided or sent.
func (b *bridge) handleTask(ctx context.Context, call sink.Call, inv sink.Invoker, task json.RawMessage) (sink.Result, error) {
	if task != nil && !b.p.owners.reserve(b.agent) {
		b.p.log.Info("Task-augmented call refused: the agent's tasks are at the bound", "session", b.ss.ID(), "code", ef.EFTaskLimit,
			"limit", maxTaskOwnersPerAgent, "total", maxTaskOwners)
		return sink.Result{Code: ef.EFTaskLimit}, nil
	}
	res, err := b.p.cfg.Gate.Handle(context.WithoutCancel(ctx), call, inv)
	if task != nil {
		b.p.learnCreated(b.agent, res, false)
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
	if !b.p.owners.foreign(b.agent, taskIDParam(req.Params)) {
		return nil
	}
	b.p.log.Info("Task request refused: the task is another agent's", "method", req.Method, "session", b.ss.ID())
	return noSuchTask(req.ID)
}

// noSuchTask answers a request naming a task of another agent's as one naming no task (-32602),
// on either revision.
func noSuchTask(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "actgate: no such task"}}
}

// ownTasksOnly removes from a tasks/list answer the tasks another agent created; the rest of
// the answer is kept as written (its members in the upstream's order are re-encoded only when
// an entry is removed).
func (p *Proxy) ownTasksOnly(agent, method string, answer *jsonrpc.Response) {
	if method != wire.MethodTasksList || answer == nil || answer.Error != nil {
		return
	}
	var l map[string]json.RawMessage
	if wire.Unmarshal(answer.Result, &l) != nil {
		return
	}
	var tasks []json.RawMessage
	if wire.Unmarshal(l["tasks"], &tasks) != nil {
		return
	}
	kept := tasks[:0:0]
	for _, raw := range tasks {
		var t struct {
			TaskID any `json:"taskId"`
		}
		_ = wire.Unmarshal(raw, &t)
		if id, ok := t.TaskID.(string); ok && p.owners.foreign(agent, id) {
			continue
		}
		kept = append(kept, raw)
	}
	if len(kept) == len(tasks) {
		return
	}
	l["tasks"], _ = wire.MarshalNoEscape(kept)
	if raw, err := wire.MarshalNoEscape(l); err == nil {
		answer.Result = raw
	}
}
