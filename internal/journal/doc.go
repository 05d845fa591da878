// Package journal defines the dispatch journal of the finality sink: one DispatchRecord per
// consumed authority, moving through the executor lifecycle of the Action Evidence Boundary
// (action-evidence-boundary "Non-Collapsing Decision and Lifecycle Vocabulary"):
//
//	CONSUMED ─▶ DISPATCH_PENDING ─▶ INVOKED ─▶ EXECUTED | FAILED | INDETERMINATE
//	                                             INDETERMINATE ─(authenticated reconciliation)─▶ EXECUTED | FAILED
//
// The package owns the records, the transition rules (Apply, Reconcile) and the Journal
// interface. It holds no storage: the embedded bbolt implementation lives in
// internal/authority/boltstore, where it can share one transaction with the consumption of the
// authority (ConsumeAndPend). A sidecar that consumes authorities as Kubernetes Leases uses the
// same Journal interface over a local file.
//
// The rules enforced here, each from the AEB text:
//   - dispatch happens only from a durable DISPATCH_PENDING record ("Invoke the Frozen Action");
//   - EXECUTED and FAILED need authoritative evidence; a local exception, timeout or connection
//     loss is never FAILED ("Classify the Effect Outcome");
//   - on restart every DISPATCH_PENDING or INVOKED record becomes INDETERMINATE (RecoverOnStart);
//   - INDETERMINATE leaves only through authenticated reconciliation matched to the operation,
//     action and provider ("Perform Authenticated Reconciliation"); nothing ever leaves EXECUTED
//     or FAILED, and no transition releases the consumed authority.
package journal
