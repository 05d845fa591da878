// Package receipt writes and verifies the sink's receipts: Ledger-Anchored Validation Receipts
// (LAVR, tool-use-binding-latest §1), one per allow, deny, escalation, audit-mode allow and
// classified outcome, each naming the act, its arguments digest, the decision and code, and
// never the arguments (docs/architecture.md "Privacy"). The receipts of one log form a hash chain
// and are signed in batches.
//
// # File format
//
// A log is an append-only file of lines, each the RFC 8785 canonical JSON of one object and a
// newline. A receipt line:
//
//	{"act_id":"…","arguments_digest":"sha256:…","decision":"deny","code":"EF_…",
//	 "digest":"sha256:…","prev":"sha256:…","seq":7,"time":"2026-…Z","tool":"…"}
//
// seq counts 1, 2, 3, … without gaps; prev is the digest of receipt seq-1 (ZeroDigest for
// seq 1); digest is "sha256:" + hex SHA-256 of the canonical form of the receipt without its
// digest member. Each group commit ends with a checkpoint line:
//
//	{"checkpoint":{"head":"sha256:…","key_id":"sha256:…","prev_seq":6,"seq":9,
//	 "time":"…","type":"actgate.dev/receipt-checkpoint/v1"},"signature":"<base64>"}
//
// whose signature (Ed25519, or ECDSA P-256 over SHA-256, through sigstore's signature package)
// covers the canonical checkpoint bytes exactly as they stand in the line: receipts
// prev_seq+1..seq were committed after the previous checkpoint, and the receipt with that seq
// has digest head. Since head commits to every earlier receipt through the prev chain, one
// signature covers the whole log up to it. The type member keeps a checkpoint signature from
// being mistaken for any other object signed with the same key.
//
// # Cost and durability
//
// Append is the hot path: it assigns seq and prev, encodes the canonical bytes directly (no
// reflection, no parse) once, hashes them and inserts the digest member, under a mutex, and
// returns. A single committer goroutine takes everything pending (a buffer swap, no copy under
// the mutex), signs a checkpoint after every MaxBatch receipts of it and after its last, and
// writes the receipts and checkpoints with one write and one fsync. A batch is taken when an AppendDurable or Flush caller waits for
// one of its receipts (at once, or as soon as the previous fsync returns, so that concurrent
// durable callers share one fsync), when MaxBatch receipts are pending, or when the oldest has
// waited MaxDelay. AppendDurable returns only after the fsync of the batch holding its receipt,
// whose checkpoint then covers it: the protected-act path does not invoke before that. A failed
// write, signature or fsync fails the log for good (ErrFailed): after a failed fsync nothing is
// known about what reached the disk, so the sink must fail closed until restarted.
//
// # Crash recovery
//
// A crash can interrupt a batch's write, leaving after the last checkpoint a torn last line
// (no newline) and possibly complete receipts that no checkpoint covers; nothing there was
// reported durable. Open verifies the file, appends everything after the last verified
// checkpoint to Path + ".recovered" (fsync'ed), truncates the log to that checkpoint, fsyncs,
// and continues the chain from it. Open refuses (ErrCorrupt) a log with any problem at or
// before its last verified checkpoint, or with a complete checkpoint line after it that fails:
// those are not what a crash leaves. It also takes an exclusive flock, so that two writers
// cannot fork one chain (ErrLocked).
//
// # What Verify detects
//
// Under the signer's public key Verify detects, with a stable Code each: any change to a
// receipt's bytes (RECEIPT_ALTERED, or RECEIPT_NOT_CANONICAL / RECEIPT_SYNTAX when the change
// breaks the form); a deleted receipt (RECEIPT_REMOVED: a seq gap, including a removed prefix);
// moved or repeated receipts (RECEIPT_REORDERED); a receipt replaced by one from another log or
// re-chained (RECEIPT_CHAIN_BROKEN at it or at its successor, or CHECKPOINT_MISMATCH when the
// checkpoint's head no longer matches); an altered or forged checkpoint
// (CHECKPOINT_BAD_SIGNATURE); a checkpoint moved away from the receipts it names
// (CHECKPOINT_MISMATCH); a removed or repeated checkpoint (CHECKPOINT_REMOVED,
// CHECKPOINT_REORDERED); a torn last line (RECEIPT_TORN_TAIL).
//
// What it cannot detect from the file alone:
//   - Truncation at a line boundary. Cutting whole lines off the end leaves a shorter log
//     that verifies; cutting inside a batch, or deleting the checkpoints after some point,
//     leaves receipts after the last checkpoint, which Report.UnsignedTail counts.
//   - Changes to the unsigned tail. Receipts after the last checkpoint are protected only by
//     the unkeyed hash chain: anyone who can write the file can rewrite or extend them with
//     valid digests. A log closed cleanly has no unsigned tail.
//   - Replacement of the whole log by another log signed with the same key: use one key (or
//     at least one log) per sink, and anchor.
//   - Anything about the world: a receipt proves what the sink decided and recorded, not that
//     a tool ran (AEB "Signature overclaiming").
//
// Truncation and wholesale replacement are caught by anchoring: record the (SignedSeq,
// SignedHead) of a Report, or the digest of any receipt, somewhere the log's writer cannot
// rewrite (an Act's status.receiptDigest, a transparency log, a ticket, another host), and
// verify later with VerifyAnchored (actgate receipts verify --anchor SEQ=DIGEST). A matching
// anchor pins every receipt up to its seq.
//
// # Streams
//
// A Log with Options.Mirror also writes each committed batch to a writer as stream records
// (stream.go), e.g. a container's stdout kept by a cluster's log pipeline after the pod is
// gone; VerifyStream verifies the records of one log in such a stream, skipping other output.
//
// Verification does not check times for monotonicity (clocks step) and does not interpret key
// IDs: the verifier's key alone decides whether a checkpoint is signed. Rotating the key starts
// a new log: Open refuses a log whose checkpoints another key signed.
package receipt
