package tasks

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// taskOwnerSweep is how often, at most, a full table is swept of expired entries.
const taskOwnerSweep = time.Second

type taskOwnerKey [sha256.Size]byte

func ownerKey(id string) taskOwnerKey { return sha256.Sum256([]byte(id)) }

type taskOwner struct {
	agent   string
	expires time.Time
}

// Owners is the table. inUse counts, per agent, its entries and its reservations.
type Owners struct {
	// Max and MaxPerAgent bound the task owners remembered, in all and per agent.
	Max, MaxPerAgent int

	mu    sync.Mutex
	byID  map[taskOwnerKey]taskOwner
	inUse map[string]int
	total int
	swept time.Time
}

// Reserve takes a place for a call of agent that may create a task; false at a bound.
func (t *Owners) Reserve(agent string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total >= t.Max || t.inUse[agent] >= t.MaxPerAgent {
		t.sweepLocked(time.Now())
		if t.total >= t.Max || t.inUse[agent] >= t.MaxPerAgent {
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

// Settle ends a reservation of agent: when the call created a task (id not ""), its place is
// the task's until ttl passes; else it is given back.
func (t *Owners) Settle(agent, id string, ttl time.Duration) {
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

func (t *Owners) releaseLocked(agent string) {
	t.total--
	if t.inUse[agent] <= 1 {
		delete(t.inUse, agent)
		return
	}
	t.inUse[agent]--
}

// sweepLocked forgets the entries whose ttl passed, at most once per taskOwnerSweep.
func (t *Owners) sweepLocked(now time.Time) {
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

// Owner returns the agent that created task id, "" for a task the proxy did not see created
// (or whose ttl passed).
func (t *Owners) Owner(id string) string {
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

// Foreign reports whether task id was created by an agent other than agent.
func (t *Owners) Foreign(agent, id string) bool {
	owner := t.Owner(id)
	return owner != "" && owner != agent
}

// CreatedTaskOf reads the task a tools/call's answer created: its id and lifetime; "" when the
// answer is not a CreateTaskResult with a string task id (2025-11-25: {"task": {"taskId",
// "ttl"}}; 2026-07-28: {"resultType": "task", "taskId", "ttlMs"} at the top level). Unlike
// ParseCreated, any id length is read: the table keeps a digest.
func CreatedTaskOf(raw json.RawMessage, rev2026 bool) (string, time.Duration) {
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
	ttl := MaxTTL
	if ms, ok := ttlv.(float64); ok {
		ttl = TTL(ms)
	}
	return id, ttl
}

// LearnCreated ends agent's reservation (Reserve) with what the call's result res
// says: the task it created, if any.
func (t *Owners) LearnCreated(agent string, res sink.Result, rev2026 bool) {
	raw := res.Accepted
	if len(raw) == 0 && res.Allowed {
		raw = res.Upstream
	}
	id, ttl := CreatedTaskOf(raw, rev2026)
	t.Settle(agent, id, ttl)
}

// OwnOnly removes from a tasks/list answer the tasks another agent created; the rest of
// the answer is kept as written (its members in the upstream's order are re-encoded only when
// an entry is removed).
func (t *Owners) OwnOnly(agent, method string, answer *jsonrpc.Response) {
	if method != wire.MethodTasksList || answer == nil || answer.Error != nil {
		return
	}
	var l map[string]json.RawMessage
	if wire.Unmarshal(answer.Result, &l) != nil {
		return
	}
	var listed []json.RawMessage
	if wire.Unmarshal(l["tasks"], &listed) != nil {
		return
	}
	kept := listed[:0:0]
	for _, raw := range listed {
		var entry struct {
			TaskID any `json:"taskId"`
		}
		_ = wire.Unmarshal(raw, &entry)
		if id, ok := entry.TaskID.(string); ok && t.Foreign(agent, id) {
			continue
		}
		kept = append(kept, raw)
	}
	if len(kept) == len(listed) {
		return
	}
	l["tasks"], _ = wire.MarshalNoEscape(kept)
	if raw, err := wire.MarshalNoEscape(l); err == nil {
		answer.Result = raw
	}
}
