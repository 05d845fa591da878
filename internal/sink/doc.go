// Package sink is actgate's finality sink: the flow of one tool call (map → policy → allow,
// permit, escalate or deny), enforce() (tool-use-binding §16), the dispatch journal around each
// invocation, and binding moments (DESIGN.md "Human decisions").
package sink
