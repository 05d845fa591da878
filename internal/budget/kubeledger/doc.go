// Package kubeledger keeps ToolPolicy budgets (internal/budget) in Kubernetes: one BudgetLedger
// object per ledger id — one budget of one rule, one key, one calendar window or one rolling
// window — in the policy's namespace, so every authority replica charges the same counters and
// every sidecar's calls are counted once (docs/architecture.md "Budgets in Kubernetes").
//
// # Compare-and-swap
//
// A charge, a refund and a settle read the ledger, apply internal/budget's rules to its usage
// (Usage.Apply, Refund, Settle: the same rules as the standalone ledger) and write the status
// back with Update on the resourceVersion they read; a 409 means another writer won, and the
// ledger is read again by quorum and the rules applied again, up to Options.MaxAttempts. The
// first charge of a ledger creates it (create-only; AlreadyExists is read back). The object a
// process wrote last is remembered (bounded), so an uncontended charge is one write and no
// read; a decision that refuses or changes nothing on a remembered object is made again on a
// quorum read before it is returned, so no stale copy ever refuses a call or skips a charge.
//
// # All or none
//
// Kubernetes writes one object at a time. The charges of one operation are applied in ledger-id
// order, and when one does not apply the ones already made are refunded before the error is
// returned. In between, a concurrent charge may see the transient charge and be refused although
// the two would have fit in the other order: the ledger may refuse a call that fits, never admit
// one that does not. A process that dies between two charges leaves the first charged (counted,
// never under-counted) until the window ages it out.
//
// # Bounds
//
// A ledger holds at most v1alpha1.MaxLedgerOps charges individually; the oldest is folded into
// the settled aggregates to make room, so a refund that comes later gives nothing back (counted
// more, never less). A budget has at most budget.MaxKeysPerBudget ledgers with spending
// (counted by label when a key's ledger is created); EF_BUDGET_LIMIT beyond.
//
// # Fail closed
//
// Every operation runs under Options.Timeout. An unreachable API server, a timeout, an answer
// that leaves unknown whether a write happened, or contention past MaxAttempts is
// ErrUnavailable: the call is refused (EF_STORE_UNAVAILABLE), never let through. A charge
// whose write was ambiguous may have been made; refunding the operation is always safe, since a
// refund gives back only what the ledger holds for that operation.
package kubeledger
