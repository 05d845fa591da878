// Package tasks is what the MCP proxy reads of tasks, of both revisions (docs/architecture.md
// "Tasks"): the params.task of a task-augmented tools/call (Param, CallParams), the
// CreateTaskResult that accepts one (ParseCreated for 2025-11-25, ParseCreated2026 for
// 2026-07-28, Classify: an accepted dispatch is sink.OutcomeAccepted), the outcome a tasks/result
// answer records (ResultOutcome), and the table of the agents that created the tasks the proxy
// saw created (Owners, CreatedTaskOf), bounded in all and per agent. Following a task through a
// session or a 2026-07-28 exchange is the revisions' part. It imports the wire and nothing else
// of the proxy.
package tasks
