package receipt

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"
)

// RecoveredSuffix is appended to a log's path to name the file Open saves cut bytes to.
const RecoveredSuffix = ".recovered"

// recoverFile verifies the log in f and cuts what a crash can leave after its last verified
// checkpoint: a partial last line, complete receipts no checkpoint covers, and unreadable lines
// (a filesystem may expose unwritten blocks of an interrupted append as zeros). It refuses the
// file (ErrCorrupt) when any problem lies at or before the last verified checkpoint, or when a
// complete checkpoint line follows it that does not verify: neither is a crash artifact, and a
// wrong key must not get a log's signed history cut away.
func recoverFile(f *os.File, v signature.Verifier) (Recovery, error) {
	var rec Recovery
	fi, err := f.Stat()
	if err != nil {
		return rec, fmt.Errorf("%w: %v", ErrFailed, err)
	}
	size := fi.Size()
	complete, err := lastNewlineEnd(f, size)
	if err != nil {
		return rec, err
	}
	rec.TornBytes = size - complete

	s, err := verifyStream(io.NewSectionReader(f, 0, complete), v, nil)
	if err != nil {
		return rec, fmt.Errorf("%w: %v", ErrFailed, err)
	}
	if s.problemsAtGoodCp > 0 || s.cpAfterGood > 0 {
		return rec, fmt.Errorf("%w: %s: %w", ErrCorrupt, f.Name(), &VerifyError{Problems: s.problems})
	}
	rep := s.rep
	rec.UnsignedReceipts = rep.UnsignedTail
	rep.Receipts -= rep.UnsignedTail
	rep.UnsignedTail = 0
	rep.Head = rep.SignedHead
	rec.Report = rep
	rec.Problems = s.problems
	rec.lastSegment = [2]int64{s.prevGoodCpOffset, s.goodCpOffset}

	cut := s.goodCpOffset
	if cut == size {
		return rec, nil
	}
	rec.SavedTo = f.Name() + RecoveredSuffix
	if err := saveTail(f, cut, size, rec.SavedTo); err != nil {
		return rec, err
	}
	if err := f.Truncate(cut); err != nil {
		return rec, fmt.Errorf("%w: truncating %s to %d: %v", ErrFailed, f.Name(), cut, err)
	}
	if err := f.Sync(); err != nil {
		return rec, fmt.Errorf("%w: fsync after truncating %s: %v", ErrFailed, f.Name(), err)
	}
	return rec, nil
}

// lastNewlineEnd returns the offset just past the last '\n' in f's first size bytes (0 if none).
func lastNewlineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 4096)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == end-start) {
			return 0, fmt.Errorf("%w: reading %s: %v", ErrFailed, f.Name(), err)
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// saveTail appends f[from:to] to path (created 0600), ending it with a newline, and fsyncs it.
func saveTail(f *os.File, from, to int64, path string) error {
	_, statErr := os.Stat(path)
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%w: saving the cut tail: %v", ErrFailed, err)
	}
	defer out.Close()
	if _, err := io.Copy(out, io.NewSectionReader(f, from, to-from)); err != nil {
		return fmt.Errorf("%w: saving the cut tail: %v", ErrFailed, err)
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, to-1); err != nil || last[0] != '\n' {
		if _, err := out.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("%w: saving the cut tail: %v", ErrFailed, err)
		}
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("%w: fsync of %s: %v", ErrFailed, path, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		return syncDir(path)
	}
	return nil
}

// syncDir fsyncs the directory holding path, so that a newly created file's entry is durable.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("%w: opening directory of %s: %v", ErrFailed, path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: fsync of directory of %s: %v", ErrFailed, path, err)
	}
	return nil
}
