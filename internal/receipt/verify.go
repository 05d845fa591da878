package receipt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
)

// MaxProblems bounds the problems one verification reports; past it, verification stops with
// CodeTooManyProblems.
const MaxProblems = 1000

// maxTrackedGap bounds how many missing seq numbers of one gap are remembered so that a late
// receipt filling them is reported as reordered rather than the gap as removed.
const maxTrackedGap = 4096

var errSyntax = errors.New("receipt: syntax")

// Report summarises a log.
type Report struct {
	// Receipts is the number of receipt lines.
	Receipts int
	// Checkpoints is the number of checkpoint lines whose signature verified.
	Checkpoints int
	// UnsignedTail is the number of receipts after the last verified checkpoint. Nothing but
	// the hash chain protects them: they can be cut or rewritten without detection (see the
	// package documentation).
	UnsignedTail int
	// Head is the digest of the last receipt ("" for an empty log).
	Head string
	// SignedSeq and SignedHead are the seq and head of the last verified checkpoint: the pair
	// to record outside the log (an Anchor) so that a later truncation is detected.
	SignedSeq  uint64
	SignedHead string
}

// Anchor is a (seq, digest) pair recorded outside the log, such as the SignedSeq and SignedHead
// of an earlier Report, or the receipt digest an Act's status carries. A log verified against
// it must hold a receipt with that seq and digest; because every receipt's digest covers its
// prev, this pins the whole log up to Seq.
type Anchor struct {
	Seq    uint64
	Digest string
}

// Verify reads a receipt log and checks every line: syntax and canonical form, each receipt's
// digest, seq numbers contiguous from 1, the prev chain, and each checkpoint's signature (under
// v), seq, head and prev_seq. A log that verifies yields its Report and a nil error; otherwise
// the error is a *VerifyError listing every problem with its Code, and the Report covers what
// was read. An error reading r is returned as is. See the package documentation for what this
// cannot detect.
func Verify(r io.Reader, v signature.Verifier) (Report, error) {
	return VerifyAnchored(r, v)
}

// VerifyAnchored is Verify, and also checks each anchor: the receipt with the anchor's seq
// must exist (CodeAnchorMissing) and have its digest (CodeAnchorMismatch).
func VerifyAnchored(r io.Reader, v signature.Verifier, anchors ...Anchor) (Report, error) {
	s, err := verifyStream(r, v, anchors)
	if err != nil {
		return s.rep, err
	}
	if len(s.problems) > 0 {
		return s.rep, &VerifyError{Problems: s.problems}
	}
	return s.rep, nil
}

// gap is a run of missing seq numbers and the RECEIPT_REMOVED problem that reports it.
type gap struct {
	from, to uint64 // inclusive
	problem  int
	filled   map[uint64]bool // seqs that turned up later; nil when the gap is too long to track
}

type verifyState struct {
	v       signature.Verifier
	anchors map[uint64]string
	pinned  []uint64 // anchored seqs, ascending
	rep     Report

	problems []Problem
	line     int
	offset   int64 // bytes read so far
	// For Open's crash recovery: the offset just after the last verified checkpoint, the
	// number of problems found before it, and the checkpoint lines read after it.
	goodCpOffset     int64
	problemsAtGoodCp int
	cpAfterGood      int
	// prevGoodCpOffset is goodCpOffset before the last verified checkpoint: the last signed
	// segment (one commit's receipts and checkpoint) lies between the two.
	prevGoodCpOffset int64

	headSeq    uint64 // highest seq seen; a late (reordered) receipt does not move it
	headDigest string // digest of the receipt with seq headSeq, as stated by that receipt
	unreadable int    // unreadable lines since the last readable receipt
	gaps       []gap
	lastCpSeq  uint64 // seq of the last checkpoint line read

	scratch []byte
	stopped bool

	// A stream's state (VerifyStream): recent maps the seq of each recently read receipt and
	// checkpoint (offset by cpKey) to the digest of its line's bytes,
	// bounded by maxRecent in the order of recentSeqs; repeated counts the lines skipped as
	// repeats. recent is nil when verifying a file, where a repeat is a problem.
	recent     map[uint64]string
	recentSeqs []uint64
	repeated   int
}

// cpKey offsets a checkpoint's seq in verifyState.recent: seqs are below 2^53.
const cpKey = 1 << 62

// repeatOf reports whether the line of key (a receipt's seq, or cpKey plus a checkpoint's),
// whose bytes have digest d, is one read before, and remembers it otherwise. For a file
// (recent nil) it is always false: a repeat there is a problem.
func (s *verifyState) repeatOf(key uint64, d string) bool {
	if s.recent == nil {
		return false
	}
	if prev, ok := s.recent[key]; ok {
		if prev == d {
			s.repeated++
			return true
		}
		return false
	}
	if len(s.recentSeqs) >= maxRecent {
		delete(s.recent, s.recentSeqs[0])
		s.recentSeqs = s.recentSeqs[1:]
	}
	s.recent[key] = d
	s.recentSeqs = append(s.recentSeqs, key)
	return false
}

func (s *verifyState) add(c Code, seq uint64, format string, args ...any) {
	if s.stopped {
		return
	}
	if len(s.problems) >= MaxProblems {
		s.problems = append(s.problems, Problem{Code: CodeTooManyProblems, Line: s.line,
			Detail: "verification stopped after " + strconv.Itoa(MaxProblems) + " problems"})
		s.stopped = true
		return
	}
	s.problems = append(s.problems, Problem{Code: c, Line: s.line, Seq: seq, Detail: fmt.Sprintf(format, args...)})
}

func newVerifyState(v signature.Verifier, anchors []Anchor) *verifyState {
	s := &verifyState{v: v, headDigest: ZeroDigest}
	if len(anchors) > 0 {
		s.anchors = make(map[uint64]string, len(anchors))
		for _, a := range anchors {
			if _, dup := s.anchors[a.Seq]; !dup {
				s.pinned = append(s.pinned, a.Seq)
			}
			s.anchors[a.Seq] = a.Digest
		}
		slices.Sort(s.pinned)
	}
	return s
}

func verifyStream(r io.Reader, v signature.Verifier, anchors []Anchor) (*verifyState, error) {
	s := newVerifyState(v, anchors)
	if v == nil {
		return s, fmt.Errorf("%w: no verifier", ErrInvalid)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for !s.stopped {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		long := false
		for errors.Is(err, bufio.ErrBufferFull) {
			// Far longer than any line the writer produces: skip to its end.
			long = true
			line, err = br.ReadSlice('\n')
			n += int64(len(line))
		}
		if err != nil && err != io.EOF {
			return s, fmt.Errorf("receipt: reading log: %w", err)
		}
		if n == 0 {
			break
		}
		s.line++
		s.offset += n
		switch {
		case err == io.EOF:
			s.add(CodeTornTail, 0, "%d bytes after the last newline: a torn or cut line", n)
		case long:
			s.add(CodeSyntax, 0, "line longer than %d bytes", MaxLineBytes)
			s.unreadable++
		default:
			s.readLine(line[:len(line)-1])
		}
		if err == io.EOF {
			break
		}
	}
	s.finish()
	return s, nil
}

func (s *verifyState) readLine(line []byte) {
	switch {
	case len(line) == 0:
		s.add(CodeSyntax, 0, "empty line")
		s.unreadable++
	case len(line) > MaxLineBytes:
		s.add(CodeSyntax, 0, "line longer than %d bytes", MaxLineBytes)
		s.unreadable++
	case bytes.HasPrefix(line, []byte(`{"checkpoint":`)):
		s.readCheckpoint(line)
	default:
		s.readReceipt(line)
	}
}

func (s *verifyState) readReceipt(line []byte) {
	r, err := decodeReceipt(line)
	if err != nil {
		s.add(CodeSyntax, 0, "not a receipt or checkpoint")
		s.unreadable++
		return
	}
	if err := validateChained(&r); err != nil {
		// Not a receipt the writer could have produced; its seq and digests mean nothing.
		s.add(CodeInvalid, 0, "%s", trimPrefix(err))
		s.unreadable++
		return
	}
	if s.recent != nil && s.repeatOf(r.Seq, jcs.Digest(line)) {
		return
	}
	s.rep.Receipts++
	s.rep.UnsignedTail++

	canon, err := appendCanonical(s.scratch[:0], &r, true)
	s.scratch = canon
	if err != nil || !bytes.Equal(canon, line) {
		s.add(CodeNotCanonical, r.Seq, "receipt is not in canonical form")
	}
	if d, b, err := digestOf(s.scratch, &r); err == nil {
		s.scratch = b
		if d != r.Digest {
			s.add(CodeAltered, r.Seq, "digest member is not the digest of the receipt")
		}
	}
	if want, ok := s.anchors[r.Seq]; ok && want != r.Digest {
		s.add(CodeAnchorMismatch, r.Seq, "receipt digest differs from the anchor")
	}

	readable := s.unreadable
	s.unreadable = 0
	expected := s.headSeq + 1
	switch {
	case r.Seq == expected:
		if r.Prev != s.headDigest {
			s.add(CodeChainBroken, r.Seq, "prev is not the digest of receipt %d", s.headSeq)
		}
	case r.Seq > expected:
		missing := r.Seq - expected
		if missing > uint64(readable) {
			g := gap{from: expected, to: r.Seq - 1, problem: len(s.problems)}
			if missing <= maxTrackedGap {
				g.filled = map[uint64]bool{}
			}
			if g.from == g.to {
				s.add(CodeRemoved, r.Seq, "receipt %d is missing", g.from)
			} else {
				s.add(CodeRemoved, r.Seq, "receipts %d-%d are missing", g.from, g.to)
			}
			if !s.stopped {
				s.gaps = append(s.gaps, g)
			}
		}
		// Unreadable lines account for the gap: already reported; the chain cannot be checked.
	default: // r.Seq <= s.headSeq
		s.lateReceipt(r.Seq)
		return
	}
	s.headSeq, s.headDigest = r.Seq, r.Digest
}

// lateReceipt handles a receipt whose seq is not after the head: it fills a gap reported
// earlier (the receipt was moved down), or it repeats a seq already seen.
func (s *verifyState) lateReceipt(seq uint64) {
	for i := range s.gaps {
		g := &s.gaps[i]
		if seq >= g.from && seq <= g.to && g.filled != nil && !g.filled[seq] {
			g.filled[seq] = true
			s.add(CodeReordered, seq, "receipt %d appears after receipt %d", seq, s.headSeq)
			return
		}
	}
	s.add(CodeReordered, seq, "receipt %d is repeated or out of order after receipt %d", seq, s.headSeq)
}

func (s *verifyState) readCheckpoint(line []byte) {
	c, sig, err := decodeCheckpoint(line)
	if err == nil && s.recent != nil && s.repeatOf(cpKey+c.Seq, jcs.Digest(line)) {
		return
	}
	s.cpAfterGood++
	if err != nil {
		s.add(CodeSyntax, 0, "not a well-formed checkpoint")
		return
	}
	body, err := c.appendCanonical(s.scratch[:0])
	s.scratch = body
	if err != nil {
		s.add(CodeNotCanonical, c.Seq, "checkpoint is not in canonical form")
		return
	}
	want := appendCheckpointLine(nil, body, sig)
	if !bytes.Equal(want[:len(want)-1], line) {
		s.add(CodeNotCanonical, c.Seq, "checkpoint is not in canonical form")
	}
	ok := true
	if err := c.validate(); err != nil {
		s.add(CodeCheckpointInvalid, c.Seq, "%s", trimPrefix(err))
		ok = false
	}
	if err := s.v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body)); err != nil {
		s.add(CodeCheckpointBadSignature, c.Seq, "signature does not verify under the key")
		ok = false
	}
	if c.Seq != s.headSeq || c.Head != s.headDigest {
		s.add(CodeCheckpointMismatch, c.Seq, "checkpoint does not name the last receipt before it (seq %d)", s.headSeq)
		ok = false
	}
	switch {
	case c.PrevSeq > s.lastCpSeq:
		s.add(CodeCheckpointRemoved, c.Seq, "prev_seq %d is after the previous checkpoint's seq %d", c.PrevSeq, s.lastCpSeq)
		ok = false
	case c.PrevSeq < s.lastCpSeq:
		s.add(CodeCheckpointReordered, c.Seq, "prev_seq %d is before the previous checkpoint's seq %d", c.PrevSeq, s.lastCpSeq)
		ok = false
	}
	s.lastCpSeq = c.Seq
	if ok {
		s.rep.Checkpoints++
		s.rep.UnsignedTail = 0
		s.rep.SignedSeq, s.rep.SignedHead = c.Seq, c.Head
		s.prevGoodCpOffset = s.goodCpOffset
		s.goodCpOffset, s.problemsAtGoodCp, s.cpAfterGood = s.offset, len(s.problems), 0
	}
}

func (s *verifyState) finish() {
	// A gap every seq of which turned up later was a reordering, already reported at each
	// late receipt; drop its RECEIPT_REMOVED.
	drop := map[int]bool{}
	for _, g := range s.gaps {
		if g.filled == nil {
			continue
		}
		n := uint64(len(g.filled))
		switch {
		case n == g.to-g.from+1:
			drop[g.problem] = true
		case n > 0:
			s.problems[g.problem].Detail += fmt.Sprintf(" (%d of them appear later, out of order)", n)
		}
	}
	if len(drop) > 0 {
		kept := s.problems[:0]
		for i, p := range s.problems {
			if !drop[i] {
				kept = append(kept, p)
			}
		}
		s.problems = kept
	}
	for _, seq := range s.pinned {
		if seq > s.headSeq || seq == 0 {
			s.problems = append(s.problems, Problem{Code: CodeAnchorMissing, Seq: seq,
				Detail: "the log ends at receipt " + strconv.FormatUint(s.headSeq, 10) + " before the anchored receipt"})
		}
	}
	if s.rep.Receipts > 0 {
		s.rep.Head = s.headDigest
	}
}

// trimPrefix drops the sentinel's text from a validation error, leaving the reason.
func trimPrefix(err error) string {
	msg := err.Error()
	if p := ErrInvalid.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}
