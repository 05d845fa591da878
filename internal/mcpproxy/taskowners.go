package mcpproxy

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
