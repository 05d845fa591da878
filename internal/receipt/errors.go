package receipt

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors of the writing side (Open, Append, AppendDurable, Flush, Close). Every error
// those return wraps one of them, or a context error.
var (
	// ErrInvalid: the receipt or the options are malformed (a required field missing, a digest
	// not in "sha256:" + 64 lowercase hex form, a string that is not UTF-8 or too long). Nothing
	// was appended.
	ErrInvalid = errors.New("receipt: invalid")
	// ErrCorrupt: Open found a log that does not verify under the signer's own key; it refuses
	// to extend it. The error also wraps the *VerifyError that says why.
	ErrCorrupt = errors.New("receipt: log does not verify")
	// ErrLocked: another process holds the log open for writing.
	ErrLocked = errors.New("receipt: log is locked by another writer")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("receipt: log closed")
	// ErrBacklog: more receipts are waiting for a group commit than Options.MaxPending; the disk
	// is not keeping up. Nothing was appended; the caller must fail closed.
	ErrBacklog = errors.New("receipt: commit backlog full")
	// ErrFailed: a write, fsync or checkpoint signature failed. The failure is sticky: every
	// later call returns it, because after a failed fsync what reached the disk is unknown. A
	// process restart reopens the log, which cuts any partial batch (see Open).
	ErrFailed = errors.New("receipt: log failed")
	// ErrBadSignature: VerifyCheckpoint found a well-formed checkpoint whose signature does
	// not verify under the key.
	ErrBadSignature = errors.New("receipt: checkpoint signature does not verify")
)

// Code is the stable code of one verification problem. Callers and the CLI branch on it; the
// Detail of a Problem is for humans and may change.
type Code string

// Verification codes. Each names what the bytes show, not a guess at intent.
const (
	// CodeSyntax: a line is not a receipt or checkpoint: not JSON, unknown or missing members,
	// wrong types, empty, or longer than MaxLineBytes.
	CodeSyntax Code = "RECEIPT_SYNTAX"
	// CodeNotCanonical: a line decodes as a receipt or checkpoint but is not byte-identical to
	// its RFC 8785 canonical form as the writer produces it (reordered members, whitespace,
	// escapes, a non-UTC time, a base64 signature with stray bits, an empty optional member).
	CodeNotCanonical Code = "RECEIPT_NOT_CANONICAL"
	// CodeInvalid: a receipt whose fields break a rule Append enforces (unknown decision,
	// malformed digest, missing act ID, seq 0).
	CodeInvalid Code = "RECEIPT_INVALID"
	// CodeAltered: a receipt's digest member is not the digest of its other members.
	CodeAltered Code = "RECEIPT_ALTERED"
	// CodeRemoved: seq numbers skip: receipts are missing (deleted lines, or a removed
	// prefix: the first receipt of a log has seq 1).
	CodeRemoved Code = "RECEIPT_REMOVED"
	// CodeReordered: a receipt whose seq is not greater than an earlier one's: it was moved
	// or repeated.
	CodeReordered Code = "RECEIPT_REORDERED"
	// CodeChainBroken: a receipt's prev is not the digest of the receipt before it (a receipt
	// replaced by one from another log, or re-chained).
	CodeChainBroken Code = "RECEIPT_CHAIN_BROKEN"
	// CodeTornTail: the input ends inside a line (no final newline): a crash mid-write, or a
	// cut. Open repairs this; Verify reports it.
	CodeTornTail Code = "RECEIPT_TORN_TAIL"
	// CodeCheckpointInvalid: a checkpoint whose fields break the format (wrong type, seq not
	// after prev_seq, malformed head).
	CodeCheckpointInvalid Code = "CHECKPOINT_INVALID"
	// CodeCheckpointBadSignature: a checkpoint's signature does not verify under the key.
	CodeCheckpointBadSignature Code = "CHECKPOINT_BAD_SIGNATURE"
	// CodeCheckpointMismatch: a checkpoint's seq and head do not name the last receipt before
	// it.
	CodeCheckpointMismatch Code = "CHECKPOINT_MISMATCH"
	// CodeCheckpointRemoved: a checkpoint's prev_seq is after the previous checkpoint's seq: a
	// checkpoint between them is missing.
	CodeCheckpointRemoved Code = "CHECKPOINT_REMOVED"
	// CodeCheckpointReordered: a checkpoint's prev_seq is before the previous checkpoint's
	// seq: it was moved or repeated.
	CodeCheckpointReordered Code = "CHECKPOINT_REORDERED"
	// CodeAnchorMismatch: the receipt at an anchored seq has another digest.
	CodeAnchorMismatch Code = "RECEIPT_ANCHOR_MISMATCH"
	// CodeAnchorMissing: the log ends before an anchored seq: it was truncated.
	CodeAnchorMissing Code = "RECEIPT_ANCHOR_MISSING"
	// CodeUnsignedTail: receipts follow the last checkpoint. Verify does not report it (a log
	// read mid-write or cut by a crash has one); callers that require a fully signed log do.
	CodeUnsignedTail Code = "RECEIPT_UNSIGNED_TAIL"
	// CodeStreamEmpty: a receipt stream (VerifyStream) holds no record of the log: nothing
	// was verified. A stream exported in a wrapping format (each line a JSON string inside a
	// pipeline's own object) must be unwrapped to the process's lines first.
	CodeStreamEmpty Code = "RECEIPT_STREAM_EMPTY"
	// CodeTooManyProblems: verification stopped after MaxProblems problems.
	CodeTooManyProblems Code = "RECEIPT_TOO_MANY_PROBLEMS"
)

// Problem is one reason a log does not verify. Line is 1-based; Seq is the receipt's or
// checkpoint's seq when the line was readable, else 0. Detail never quotes the line's bytes.
type Problem struct {
	Code   Code
	Line   int
	Seq    uint64
	Detail string
}

// String formats as `RECEIPT_ALTERED line 7 seq 5: digest member is not the digest of the receipt`.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(string(p.Code))
	if p.Line > 0 {
		b.WriteString(" line ")
		b.WriteString(strconv.Itoa(p.Line))
	}
	if p.Seq > 0 {
		b.WriteString(" seq ")
		b.WriteString(strconv.FormatUint(p.Seq, 10))
	}
	b.WriteString(": ")
	b.WriteString(p.Detail)
	return b.String()
}

// VerifyError is a log that does not verify: every problem found, in line order.
type VerifyError struct {
	Problems []Problem
}

func (e *VerifyError) Error() string {
	if len(e.Problems) == 1 {
		return "receipt: " + e.Problems[0].String()
	}
	return "receipt: " + strconv.Itoa(len(e.Problems)) + " problems, first: " + e.Problems[0].String()
}

// Has reports whether any problem has code c.
func (e *VerifyError) Has(c Code) bool {
	for _, p := range e.Problems {
		if p.Code == c {
			return true
		}
	}
	return false
}

// Codes returns the code of every problem, in order.
func (e *VerifyError) Codes() []Code {
	cs := make([]Code, len(e.Problems))
	for i, p := range e.Problems {
		cs[i] = p.Code
	}
	return cs
}

// ProblemsOf returns the problems of the *VerifyError in err's chain, or nil.
func ProblemsOf(err error) []Problem {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	return nil
}
