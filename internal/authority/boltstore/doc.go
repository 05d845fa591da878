// Package boltstore is the embedded store of actgate: authorities (authority.Store), the
// dispatch journal (journal.Journal) and the gate's binding moments (PutMoment, LoadMoments:
// opaque records with their settled time, for the sink's MomentStore) in one bbolt file, so that consuming an authority and
// writing its DISPATCH_PENDING record (plus the sink's receipt) is one transaction
// (ConsumeAndPend), and so is storing a freshly signed authority already consumed with its
// record (IssueConsumeAndPend, the machine Permit's path). It is what `actgate serve` uses, and what a sidecar uses as its local journal
// when authorities live in Kubernetes Leases.
//
// # Durability
//
// Every write commits with fsync (bbolt's default; NoSync is never set): when a method returns
// nil, its effect survives a crash. Writes go through a group commit (committer, commit.go):
// concurrent callers share one transaction and one fsync, so the cost of durability is paid per
// group, not per caller (BenchmarkConsumeAndPend, BenchmarkIssueConsumeAndPend,
// BenchmarkBaselineCommit). It keeps the contract of bbolt's DB.Batch (a caller's function may
// run more than once; see local.batch for the rules every function here follows) but groups
// everyone who arrived during the previous commit instead of closing groups on a timer;
// commit.go says why, with measurements. The functions run one after another inside the one
// write transaction, so the hot ones (IssueConsumeAndPend, Transition) verify, decide and
// encode before they enter it and only check and write inside; Transition writes only if the
// stored record is byte for byte the one it decided on, and decides again otherwise.
//
// # Single use
//
// Consume verifies the stored authority (signature, every bound field, expiry) outside the
// write lock and then, inside the commit, checks that it is unchanged and still ISSUED and
// flips it to CONSUMED. bbolt has one writer at a time, so among any number of concurrent
// consumers exactly one sees ISSUED; the others get authority.ErrConsumed. IssueConsumeAndPend
// verifies the new authority once (signature, binding, expiry) and, inside the commit, creates
// it only if no authority with its ID exists, already CONSUMED: it is never ISSUED in the file,
// so nothing else can consume it, and of concurrent callers with the same authority exactly one
// creates it.
//
// # Several processes on one file
//
// bbolt takes an exclusive flock on the file, so only one process can open it. With
// Options.Shared, the first process to open the file owns it: it holds the lock, keeps the file
// open, and serves the other processes over a unix socket (path + ".sock", mode 0600, peers of
// another uid refused). Every other process's Store is a client that sends each operation to the
// owner, which executes it exactly as it executes its own: one linearization point, one group
// commit across all processes. This was chosen over opening and closing the file per operation
// (bbolt polls a held lock every 50 ms, and a per-operation open cannot group-commit) at the
// cost of a small protocol (net/rpc with gob, internal/wire).
//
// If the owner exits, its clients' in-flight operations fail as unavailable (and may or may not
// have committed: fail closed), and each client's next operation takes over the file or
// connects to whichever process did. Nothing is cached by clients; every decision is made by the
// process holding the lock, from the file.
//
// # Recovery
//
// Dispatch records carry the instance of the Store handle that wrote them. RecoverOnStart
// promotes DISPATCH_PENDING and INVOKED records to INDETERMINATE except those of live sessions
// (this handle and the clients connected to the owner), so a process restarting next to live
// ones does not declare their in-flight dispatches uncertain.
//
// # Timeouts
//
// A context that ends before an operation completes returns an error wrapping
// authority.ErrStoreUnavailable and journal.ErrUnavailable (and the context's error), never a
// success. A write whose caller has already given up is skipped if the group commit reaches it
// after the deadline; if the deadline passes during the commit, the write may be durable while
// its caller was told "unavailable" — a spent authority and a DISPATCH_PENDING record that
// recovery will make INDETERMINATE, never a second dispatch.
package boltstore
