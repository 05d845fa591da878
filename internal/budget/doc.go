// Package budget holds the semantics of ToolPolicy budgets (spec.rules[].budgets; docs/api.md
// "Budgets"), free of Kubernetes and of any store: exact decimal amounts, the windows spending
// is counted over, the key that decides which calls share counters, and the ledger a
// deployment keeps — a Usage per ledger id that a Charge applies to, all or none, at the moment
// authority is consumed, and that a refund gives back.
//
// Both deployments implement Ledger: the standalone gate in its embedded store, in the same
// transaction that consumes the authority; Kubernetes in objects every sidecar and authority
// replica sees. The rules that make a budget hold under concurrency live here, so both apply
// the same ones: an enforced charge that no longer fits is refused (ErrExceeded), a charge is
// idempotent per operation, and a refund gives back exactly that operation's share.
package budget
