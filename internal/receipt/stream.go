package receipt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
)

// The receipt stream: a copy of a log's lines on a writer the process does not own after it
// exits, such as a container's stdout collected by the cluster's log pipeline, so that the
// receipts outlive the pod that wrote them (docs/operations.md "Receipts that outlive the
// pod"). Each line of the log becomes one stream record, a JSON object on a line of its own:
//
//	{"actgate_receipt_log":"<key id>","line":<the log line's JSON object>}
//
// The record names its log by the key ID its checkpoints carry, so that streams of several
// sinks can be read together. The line member is the receipt or checkpoint object itself, not
// a string, so a pipeline that parses and re-serializes JSON (reordering members, changing
// whitespace or escapes) keeps it verifiable: VerifyStream restores its RFC 8785 canonical
// form, the bytes the digests and signatures cover.

// StreamKey is the member that marks a stream record and names its log.
const StreamKey = "actgate_receipt_log"

// MaxStreamLineBytes bounds one line of a stream VerifyStream reads: a record and what a log
// pipeline or kubectl puts before it (a timestamp, a pod prefix).
const MaxStreamLineBytes = 2*MaxLineBytes + 4096

// maxRecent bounds the (seq, digest) pairs a stream verification remembers to recognise a
// re-emitted line (Open re-emits the last signed segment, at most one commit's receipts).
const maxRecent = DefaultMaxPending

// appendStreamRecords appends one stream record per line of lines (complete log lines, each
// ending in a newline) to dst.
func appendStreamRecords(dst []byte, logID string, lines []byte) ([]byte, error) {
	prefix, err := jcs.AppendString([]byte(`{"`+StreamKey+`":`), logID)
	if err != nil {
		return dst, err
	}
	prefix = append(prefix, `,"line":`...)
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n')
		if i < 0 {
			return dst, fmt.Errorf("%w: a log line without its newline", ErrInvalid)
		}
		dst = append(dst, prefix...)
		dst = append(dst, lines[:i]...)
		dst = append(dst, "}\n"...)
		lines = lines[i+1:]
	}
	return dst, nil
}

// StreamReport summarises a receipt stream.
type StreamReport struct {
	// Report is the verification of the log's records, as Verify reports a file.
	Report
	// LogID is the log whose records were verified.
	LogID string
	// Ignored counts the lines that are not stream records: the process's other output.
	Ignored int
	// OtherLogs counts the records of other logs (another key ID).
	OtherLogs int
	// Repeated counts records identical to one read before (the last signed segment, which a
	// log re-emits when it is opened again), skipped.
	Repeated int
}

// StreamOptions tune VerifyStream.
type StreamOptions struct {
	// LogID selects the records to verify; default KeyID of the verifier's public key.
	LogID string
	// Anchors are checked as VerifyAnchored checks them.
	Anchors []Anchor
}

// marker is what a stream record's line contains: its StreamKey member's name.
var marker = []byte(`"` + StreamKey + `"`)

type streamRecord struct {
	Log  *string         `json:"actgate_receipt_log"`
	Line json.RawMessage `json:"line"`
}

// VerifyStream reads a receipt stream (a log pipeline's copy of a process's output, e.g. the
// output of `kubectl logs`) and verifies the records of one log as Verify verifies a file.
// Lines that are not records are counted and skipped; so are records of other logs, and
// records repeating one already read. Whatever stands before a record's opening brace on its
// line (a timestamp, a prefix) is ignored. A record that cannot be decoded is RECEIPT_SYNTAX.
//
// A stream carries only committed batches, each ending in its checkpoint, so receipts after
// the last checkpoint mean the stream lost its end or a checkpoint was removed: they are a
// problem here (RECEIPT_UNSIGNED_TAIL), not only a count. Everything else Verify detects is
// detected the same way: altered, removed, reordered or re-chained receipts, removed or forged
// checkpoints. What the stream does not hold (its start, if the pipeline lost it) is
// RECEIPT_REMOVED.
func VerifyStream(r io.Reader, v signature.Verifier, o StreamOptions) (StreamReport, error) {
	rep := StreamReport{LogID: o.LogID}
	if v == nil {
		return rep, fmt.Errorf("%w: no verifier", ErrInvalid)
	}
	if rep.LogID == "" {
		pub, err := v.PublicKey()
		if err != nil {
			return rep, fmt.Errorf("%w: verifier public key: %v", ErrInvalid, err)
		}
		if rep.LogID, err = KeyID(pub); err != nil {
			return rep, err
		}
	}
	s := newVerifyState(v, o.Anchors)
	s.recent = map[uint64]string{}
	br := bufio.NewReaderSize(r, MaxStreamLineBytes)
	for !s.stopped {
		line, err := br.ReadSlice('\n')
		long, marked := false, false
		for errors.Is(err, bufio.ErrBufferFull) {
			// Far longer than a record: skip to its end, noting whether it bore the marker.
			long = true
			marked = marked || bytes.Contains(line, marker)
			line, err = br.ReadSlice('\n')
		}
		marked = marked || (long && bytes.Contains(line, marker))
		if err != nil && err != io.EOF {
			return rep, fmt.Errorf("receipt: reading stream: %w", err)
		}
		if len(line) == 0 && !long {
			break
		}
		s.line++
		if long {
			// Too long for a record; only a record's marker makes it one.
			if marked {
				s.add(CodeSyntax, 0, "stream line longer than %d bytes", MaxStreamLineBytes)
				s.unreadable++
			} else {
				rep.Ignored++
			}
		} else {
			rep.readStreamLine(s, bytes.TrimRight(line, "\r\n"))
		}
		if err == io.EOF {
			break
		}
	}
	s.finish()
	if s.rep.Receipts == 0 && s.rep.Checkpoints == 0 && !s.stopped {
		s.problems = append(s.problems, Problem{Code: CodeStreamEmpty,
			Detail: fmt.Sprintf("no record of log %s in the stream (%d other lines, %d records of other logs)", rep.LogID, rep.Ignored, rep.OtherLogs)})
	}
	if s.rep.UnsignedTail > 0 {
		s.problems = append(s.problems, Problem{Code: CodeUnsignedTail, Seq: s.rep.SignedSeq + 1,
			Detail: fmt.Sprintf("%d receipts after the last checkpoint: the stream's end or a checkpoint is missing", s.rep.UnsignedTail)})
	}
	rep.Report = s.rep
	rep.Repeated = s.repeated
	if len(s.problems) > 0 {
		return rep, &VerifyError{Problems: s.problems}
	}
	return rep, nil
}

func (rep *StreamReport) readStreamLine(s *verifyState, line []byte) {
	i := bytes.IndexByte(line, '{')
	if i < 0 || !bytes.Contains(line[i:], marker) {
		rep.Ignored++
		return
	}
	var rec streamRecord
	dec := json.NewDecoder(bytes.NewReader(line[i:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || rec.Log == nil || len(rec.Line) == 0 || dec.More() {
		if err == nil && rec.Log == nil {
			// The marker appears only inside another value: not a record.
			rep.Ignored++
			return
		}
		s.add(CodeSyntax, 0, "a stream record that does not decode")
		s.unreadable++
		return
	}
	if *rec.Log != rep.LogID {
		rep.OtherLogs++
		return
	}
	canon, err := jcs.Canonicalize(rec.Line, jcs.Strict)
	if err != nil || len(canon) > MaxLineBytes {
		s.add(CodeSyntax, 0, "a stream record whose line is not a JSON object of at most %d bytes", MaxLineBytes)
		s.unreadable++
		return
	}
	s.readLine(canon)
}
