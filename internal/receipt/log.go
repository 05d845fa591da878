package receipt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
)

// Defaults of Options. A hot-path receipt (Append) reaches the disk within DefaultMaxDelay, or
// sooner in the commit of a protected act's AppendDurable; a crash loses at most that window
// of hot-path receipts (the next Open recovers the chain to its last checkpoint). The batch
// size bounds how often the log fsyncs under load: each fsync's completion interrupts the CPU
// the block device's interrupt is bound to, and a hot-path call running there waits it out, so
// fewer, larger commits keep the hot path's tail short (docs/performance.md "Receipt batching").
const (
	DefaultMaxBatch   = 2048
	DefaultMaxDelay   = 10 * time.Millisecond
	DefaultMaxPending = 64 * 1024
)

// Options configure a Log.
type Options struct {
	// Path of the JSON-lines file. It is created (mode 0600) if missing.
	Path string
	// Signer signs checkpoints: Ed25519, or ECDSA P-256 with SHA-256.
	Signer signature.Signer
	// KeyID names the key in checkpoints; default KeyID(Signer's public key).
	KeyID string
	// MaxBatch pending receipts start a commit at once (before MaxDelay). A commit takes every
	// receipt pending when it starts, so one checkpoint covers at least one receipt and, when
	// the committer fell behind, more than MaxBatch. Default DefaultMaxBatch.
	MaxBatch int
	// MaxDelay is the longest a receipt from Append waits before its group commit starts.
	// Default DefaultMaxDelay. AppendDurable and Flush do not wait for it.
	MaxDelay time.Duration
	// MaxPending bounds receipts appended but not yet taken by a commit; past it Append and
	// AppendDurable fail with ErrBacklog. Default DefaultMaxPending.
	MaxPending int
	// Now is the clock for receipt and checkpoint times; default time.Now. (Batching delays
	// run on the runtime's timers, not on this clock.)
	Now func() time.Time
	// Mirror, when set, receives a copy of the log as a receipt stream (stream.go): after each
	// group commit's fsync, its receipts and checkpoints as stream records, in one Write. Open
	// first re-emits the file's last signed segment, which a crash between a commit's fsync
	// and its Write would otherwise leave out of the stream (VerifyStream skips the repeat).
	// The writer must be the log's alone (lines of other writers could interleave with a
	// record), e.g. the stdout of a process that logs to stderr, collected by a cluster's log
	// pipeline so the receipts outlive the pod. The committer waits for each Write: a writer
	// that blocks holds up the commits behind it, and past MaxPending appends fail
	// (ErrBacklog). A failed Write does not fail the log, whose file stays the durable copy:
	// it is kept (MirrorErr) and the stream then shows a gap (RECEIPT_REMOVED).
	Mirror io.Writer
	// OnCheckpoint, when set, is called with the last checkpoint of each group commit after
	// its fsync (and its Mirror Write), and once by Open with the file's last checkpoint, so
	// that a reopened log offers again what an earlier process may not have anchored. It runs
	// on the committer goroutine: it must return at once (hand the checkpoint to another
	// goroutine, keeping only the newest), or it holds up every commit behind it.
	OnCheckpoint func(SignedCheckpoint)
}

// file is what the committer needs of the log file; tests wrap *os.File to watch or fail it.
type file interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

// Log is an append-only, hash-chained, group-committed receipt log. It is safe for concurrent
// use. See the package documentation for the file format and the durability contract.
type Log struct {
	path       string
	f          file
	signer     signature.Signer
	keyID      string
	now        func() time.Time
	maxBatch   int
	maxDelay   time.Duration
	maxPending int
	recovery   Recovery

	kick chan struct{} // wakes the committer; capacity 1
	done chan struct{} // closed when the committer exits

	mu         sync.Mutex
	seq        uint64 // last assigned seq
	head       string // digest of receipt seq
	pending    []byte // lines appended and not yet taken by the committer
	entries    []entry
	firstAt    time.Time // when entries became non-empty (monotonic)
	urgent     uint64    // highest seq an AppendDurable or Flush caller waits for
	durable    uint64    // highest seq written, checkpointed and fsync'ed
	committed  chan struct{}
	spare      []byte // the committer's previous batch buffer, for reuse
	spareEnt   []entry
	closing    bool
	err        error  // sticky failure (wraps ErrFailed)
	signedSeq  uint64 // seq of the last checkpoint written; the committer's alone after Open
	sigScratch []byte
	out        []byte // the committer's interleaving buffer for a batch of several checkpoints

	mirror    io.Writer
	mirrorBuf []byte // the committer's stream records of a batch
	mirrorErr error  // the first failed Write to mirror, under mu

	onCheckpoint func(SignedCheckpoint)
	lastSigned   SignedCheckpoint // the committer's last signed checkpoint, for onCheckpoint
}

type entry struct {
	end    int // offset in pending just past this receipt's line
	seq    uint64
	digest string
}

// Recovery says what Open found and repaired.
type Recovery struct {
	// Report is the verification of the file as found (after a torn line was cut).
	Report Report
	// lastSegment is the offsets of the file's last signed segment: the lines after the
	// checkpoint before the last, through the last.
	lastSegment [2]int64
	// TornBytes is the length of a partial last line that Open cut.
	TornBytes int64
	// UnsignedReceipts is the number of complete receipts after the last checkpoint that Open
	// cut. Every group commit writes its receipts and checkpoint in one write, so these are
	// what a crash left of a batch whose fsync never returned: no AppendDurable caller was
	// told they were durable.
	UnsignedReceipts int
	// Problems are what verification found in the cut bytes (unreadable or torn lines).
	Problems []Problem
	// SavedTo names the file the cut bytes were appended to (Path + ".recovered"), or "".
	SavedTo string
}

// Open opens or creates the log at opts.Path and starts its committer.
//
// An existing file is recovered, then verified under the signer's own public key; Open refuses
// (ErrCorrupt) to extend a log that does not verify. Recovery cuts what a crash can leave
// after the last checkpoint: a torn last line (no newline) and complete receipts that no
// checkpoint covers. They are cut rather than adopted because their digests are unkeyed: the
// next checkpoint would sign whatever stands there, including receipts someone appended to the
// file while the sink was down. The cut bytes are first appended and fsync'ed to
// Path + ".recovered" for inspection, then the log is truncated and fsync'ed. The chain then
// continues from the last checkpoint's seq and head.
func Open(opts Options) (*Log, error) {
	return open(opts, func(f *os.File) file { return f })
}

func open(opts Options, wrap func(*os.File) file) (*Log, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("%w: no path", ErrInvalid)
	}
	if opts.Signer == nil {
		return nil, fmt.Errorf("%w: no signer", ErrInvalid)
	}
	pub, err := opts.Signer.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: signer public key: %v", ErrInvalid, err)
	}
	v, err := NewVerifier(pub)
	if err != nil {
		return nil, err
	}
	l := &Log{
		path:         opts.Path,
		signer:       opts.Signer,
		keyID:        opts.KeyID,
		now:          opts.Now,
		maxBatch:     opts.MaxBatch,
		maxDelay:     opts.MaxDelay,
		maxPending:   opts.MaxPending,
		mirror:       opts.Mirror,
		onCheckpoint: opts.OnCheckpoint,
		kick:         make(chan struct{}, 1),
		done:         make(chan struct{}),
		committed:    make(chan struct{}),
		head:         ZeroDigest,
	}
	if l.keyID == "" {
		if l.keyID, err = KeyID(pub); err != nil {
			return nil, err
		}
	}
	if len(l.keyID) > MaxFieldBytes {
		return nil, fmt.Errorf("%w: key ID longer than %d bytes", ErrInvalid, MaxFieldBytes)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.maxBatch <= 0 {
		l.maxBatch = DefaultMaxBatch
	}
	if l.maxDelay <= 0 {
		l.maxDelay = DefaultMaxDelay
	}
	if l.maxPending <= 0 {
		l.maxPending = DefaultMaxPending
	}
	l.maxPending = max(l.maxPending, l.maxBatch)

	f, err := openFile(opts.Path)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	if l.recovery, err = recoverFile(f, v); err != nil {
		f.Close()
		return nil, err
	}
	rep := l.recovery.Report
	l.seq, l.signedSeq, l.durable = rep.SignedSeq, rep.SignedSeq, rep.SignedSeq
	if rep.SignedSeq > 0 {
		l.head = rep.SignedHead
	}
	if seg := l.recovery.lastSegment; (l.mirror != nil || l.onCheckpoint != nil) && seg[1] > seg[0] {
		buf := make([]byte, seg[1]-seg[0])
		if _, err := f.ReadAt(buf, seg[0]); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: reading the last signed segment of %s: %v", ErrFailed, opts.Path, err)
		}
		l.mirrorLines(buf)
		if l.onCheckpoint != nil {
			// The segment ends with the checkpoint recovery verified.
			last := bytes.TrimSuffix(buf, []byte("\n"))
			last = last[bytes.LastIndexByte(last, '\n')+1:]
			c, sig, err := decodeCheckpoint(last)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%w: reading the last checkpoint of %s: %v", ErrFailed, opts.Path, err)
			}
			l.onCheckpoint(SignedCheckpoint{Checkpoint: c, Signature: sig})
		}
	}
	l.f = wrap(f)
	go l.run()
	return l, nil
}

// MirrorErr returns the first failed Write to Options.Mirror, or nil.
func (l *Log) MirrorErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mirrorErr
}

// mirrorLines writes lines (complete log lines) to the mirror as stream records. Only the
// committer (and Open, before it starts) calls it.
func (l *Log) mirrorLines(lines []byte) {
	if l.mirror == nil {
		return
	}
	var err error
	if l.mirrorBuf, err = appendStreamRecords(l.mirrorBuf[:0], l.keyID, lines); err == nil {
		_, err = l.mirror.Write(l.mirrorBuf)
	}
	if err != nil {
		l.mu.Lock()
		if l.mirrorErr == nil {
			l.mirrorErr = fmt.Errorf("receipt: writing the receipt stream: %w", err)
		}
		l.mu.Unlock()
	}
}

// Recovered reports what Open found and repaired.
func (l *Log) Recovered() Recovery { return l.recovery }

// KeyID returns the key ID the log's checkpoints carry.
func (l *Log) KeyID() string { return l.keyID }

// Append adds r to the chain and returns it with Seq, Prev, Digest (and Time, if r.Time was
// zero) filled in. This is the hot path: it encodes and hashes in memory and neither writes,
// signs nor fsyncs. The receipt becomes durable at the group commit that follows within
// MaxDelay (sooner when MaxBatch receipts are waiting); a crash before then loses it. Use
// AppendDurable where the receipt must be on disk before the caller acts.
func (l *Log) Append(r Receipt) (Receipt, error) {
	l.mu.Lock()
	out, wake, err := l.appendLocked(r)
	l.mu.Unlock()
	if wake {
		l.wake()
	}
	return out, err
}

// AppendDurable is Append, then waits until the batch holding the receipt is written, its
// checkpoint signed and the file fsync'ed. A protected act is not invoked before this returns
// nil (docs/architecture.md "Handle, step by step"; AEB "Consume or Reserve Before
// Invocation"). It does not wait for MaxDelay: a commit starts as soon as the committer is free,
// and concurrent callers share one commit.
//
// If ctx ends first the error wraps ctx.Err() and the returned receipt is still in the chain:
// it is committed with a later batch. The caller must treat the act as not durable (fail
// closed) and may not withdraw the receipt.
func (l *Log) AppendDurable(ctx context.Context, r Receipt) (Receipt, error) {
	if err := ctx.Err(); err != nil {
		return Receipt{}, fmt.Errorf("receipt: not appended: %w", err)
	}
	l.mu.Lock()
	out, _, err := l.appendLocked(r)
	if err == nil {
		l.urgent = max(l.urgent, out.Seq)
	}
	l.mu.Unlock()
	if err != nil {
		return out, err
	}
	l.wake()
	return out, l.waitDurable(ctx, out.Seq)
}

// Flush waits until every receipt appended before the call is durable.
func (l *Log) Flush(ctx context.Context) error {
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return err
	}
	target := l.seq
	l.urgent = max(l.urgent, target)
	l.mu.Unlock()
	l.wake()
	return l.waitDurable(ctx, target)
}

// Close commits every pending receipt, stops the committer and closes the file. It returns the
// log's failure, if any. Calls after the first return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closing = true
	l.mu.Unlock()
	l.wake()
	<-l.done
	cerr := l.f.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if cerr != nil {
		l.err = fmt.Errorf("%w: closing: %v", ErrFailed, cerr)
		return l.err
	}
	return nil
}

// appendLocked chains r in memory. wake reports that the committer must be told (the first
// pending receipt arms its MaxDelay timer; a full batch starts a commit).
func (l *Log) appendLocked(r Receipt) (out Receipt, wake bool, err error) {
	switch {
	case l.err != nil:
		return Receipt{}, false, l.err
	case l.closing:
		return Receipt{}, false, ErrClosed
	case len(l.entries) >= l.maxPending:
		return Receipt{}, false, fmt.Errorf("%w: %d receipts wait for a commit", ErrBacklog, len(l.entries))
	}
	if l.seq >= jcs.MaxSafeInteger {
		return Receipt{}, false, fmt.Errorf("%w: the log has reached seq 2^53-1; start a new one", ErrInvalid)
	}
	if r.Time.IsZero() {
		r.Time = l.now()
	}
	r.Time = r.Time.UTC()
	if err := validateContent(&r); err != nil {
		return Receipt{}, false, err
	}
	r.Seq = l.seq + 1
	r.Prev = l.head
	// Encode once, without the digest member, straight into pending; the digest is the hash of
	// exactly those bytes, and its member is then inserted where JCS order puts it.
	n := len(l.pending)
	buf, at, err := appendCanonicalAt(l.pending, &r, false)
	if err != nil {
		l.pending = buf[:n]
		return Receipt{}, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	r.Digest = jcs.Digest(buf[n:])
	var member [len(`,"digest":""`) + len(ZeroDigest)]byte
	m := append(append(append(member[:0], `,"digest":"`...), r.Digest...), '"')
	end := len(buf)
	buf = append(buf, m...)
	copy(buf[at+len(m):], buf[at:end])
	copy(buf[at:], m)
	l.pending = append(buf, '\n')
	l.seq, l.head = r.Seq, r.Digest
	l.entries = append(l.entries, entry{end: len(l.pending), seq: r.Seq, digest: r.Digest})
	if len(l.entries) == 1 {
		l.firstAt = time.Now()
		wake = true
	}
	return r, wake || len(l.entries) == l.maxBatch, nil
}

func (l *Log) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *Log) waitDurable(ctx context.Context, seq uint64) error {
	for {
		l.mu.Lock()
		if l.durable >= seq {
			l.mu.Unlock()
			return nil
		}
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			return err
		}
		c := l.committed
		l.mu.Unlock()
		select {
		case <-c:
		case <-ctx.Done():
			return fmt.Errorf("receipt: seq %d not durable: %w", seq, ctx.Err())
		}
	}
}

// batch is what one group commit writes.
type batch struct {
	buf     []byte  // receipt lines
	entries []entry // the receipts in buf
	lastSeq uint64
}

// run is the committer: the only goroutine that writes, signs and fsyncs.
func (l *Log) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		l.mu.Lock()
		for {
			b, ok := l.takeLocked()
			if !ok {
				break
			}
			l.mu.Unlock()
			err := l.commit(&b)
			l.mu.Lock()
			l.finishLocked(&b, err)
		}
		if l.closing && (len(l.entries) == 0 || l.err != nil) {
			l.mu.Unlock()
			return
		}
		wait := time.Duration(-1)
		if len(l.entries) > 0 && l.err == nil {
			wait = max(l.maxDelay-time.Since(l.firstAt), 0)
		}
		l.mu.Unlock()
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-l.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// takeLocked removes the next batch from pending if one is due: someone waits for it, the log
// is closing, MaxBatch receipts are waiting, or the oldest has waited MaxDelay.
func (l *Log) takeLocked() (batch, bool) {
	n := len(l.entries)
	if n == 0 || l.err != nil {
		return batch{}, false
	}
	due := l.closing || l.urgent >= l.entries[0].seq || n >= l.maxBatch || time.Since(l.firstAt) >= l.maxDelay
	if !due {
		return batch{}, false
	}
	// Take everything pending, swapping buffers: nothing is copied under the lock (appenders
	// wait on it), and a committer that fell behind catches up in one write and one fsync;
	// commit still signs a checkpoint every MaxBatch receipts.
	b := batch{buf: l.pending, entries: l.entries, lastSeq: l.entries[n-1].seq}
	l.pending, l.entries = l.spare[:0], l.spareEnt[:0]
	l.spare, l.spareEnt = nil, nil
	return b, true
}

// commit signs a checkpoint after every MaxBatch receipts of b (and after its last) and writes
// the receipts and checkpoints with one write and one fsync. It runs without the lock: appends
// continue into the other buffer meanwhile.
func (l *Log) commit(b *batch) error {
	if len(b.entries) <= l.maxBatch {
		// The common case: one checkpoint, appended to the batch's own buffer.
		var err error
		if b.buf, err = l.appendCheckpoint(b.buf, b.entries[len(b.entries)-1]); err != nil {
			return err
		}
		return l.write(b.buf, b.lastSeq)
	}
	out, start := l.out[:0], 0
	for lo := 0; lo < len(b.entries); lo += l.maxBatch {
		last := b.entries[min(lo+l.maxBatch, len(b.entries))-1]
		out = append(out, b.buf[start:last.end]...)
		start = last.end
		var err error
		if out, err = l.appendCheckpoint(out, last); err != nil {
			return err
		}
	}
	l.out = out
	return l.write(out, b.lastSeq)
}

// appendCheckpoint signs a checkpoint over the chain up to last and appends its line.
func (l *Log) appendCheckpoint(dst []byte, last entry) ([]byte, error) {
	cp := Checkpoint{
		Type:    CheckpointType,
		Seq:     last.seq,
		PrevSeq: l.signedSeq,
		Head:    last.digest,
		Time:    l.now().UTC(),
		KeyID:   l.keyID,
	}
	body, err := cp.appendCanonical(l.sigScratch[:0])
	l.sigScratch = body
	if err != nil {
		return dst, fmt.Errorf("%w: encoding checkpoint: %v", ErrFailed, err)
	}
	sig, err := l.signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return dst, fmt.Errorf("%w: signing checkpoint %d: %v", ErrFailed, cp.Seq, err)
	}
	l.signedSeq = cp.Seq
	l.lastSigned = SignedCheckpoint{Checkpoint: cp, Signature: sig}
	return appendCheckpointLine(dst, body, sig), nil
}

// write writes one commit's bytes and fsyncs them. On failure the log is failed for good (the
// signed checkpoints in memory no longer match the file), so signedSeq need not be restored.
func (l *Log) write(buf []byte, lastSeq uint64) error {
	if _, err := l.f.Write(buf); err != nil {
		return fmt.Errorf("%w: writing batch ending at %d: %v", ErrFailed, lastSeq, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync of batch ending at %d: %v", ErrFailed, lastSeq, err)
	}
	l.mirrorLines(buf)
	if l.onCheckpoint != nil {
		l.onCheckpoint(l.lastSigned)
	}
	return nil
}

func (l *Log) finishLocked(b *batch, err error) {
	if err != nil {
		l.err = err
	} else {
		l.durable = b.lastSeq
	}
	l.spare, l.spareEnt = b.buf[:0], b.entries[:0]
	close(l.committed)
	l.committed = make(chan struct{})
}

// openFile opens path for appending, creating it (and making its directory entry durable) if
// it does not exist.
func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: opening %s: %v", ErrFailed, path, err)
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return openFile(path) // created by a concurrent opener; the lock decides who writes
	}
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %v", ErrFailed, path, err)
	}
	if err := syncDir(path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
