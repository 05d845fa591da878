package receipt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpenRecoversCrashTail: what a crash can leave after the last checkpoint is saved aside
// and cut, and the chain continues from that checkpoint.
func TestOpenRecoversCrashTail(t *testing.T) {
	sv := testKey(t, "torn")
	dir := t.TempDir()
	_, good := buildLog(t, dir, "src", sv, 0, 4, 4, 4)
	ls := lines(good)
	signed8 := join(ls[:lnCP8+1])

	for _, tt := range []struct {
		name      string
		tail      []byte // appended to the log up to checkpoint 8
		torn      int64
		unsigned  int
		problems  int
		wantSaved bool
	}{
		{"nothing after the checkpoint", nil, 0, 0, 0, false},
		{"torn receipt line", ls[10][:50], 50, 0, 0, true},
		{"complete receipts, torn checkpoint", append(join(ls[10:14]), ls[14][:30]...), 30, 4, 0, true},
		{"complete receipts, no checkpoint", join(ls[10:14]), 0, 4, 0, true},
		{"zeros from an unwritten block", make([]byte, 4096), 4096, 0, 0, true},
		{"receipts, then zeros and a newline", append(join(ls[10:12]), append(make([]byte, 100), '\n')...), 0, 2, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			file := append(slices.Clone(signed8), tt.tail...)
			if err := os.WriteFile(path, file, 0o600); err != nil {
				t.Fatal(err)
			}
			l := openTest(t, path, sv, nil)
			rec := l.Recovered()
			if rec.TornBytes != tt.torn || rec.UnsignedReceipts != tt.unsigned || len(rec.Problems) != tt.problems ||
				(rec.SavedTo != "") != tt.wantSaved || rec.Report.Receipts != 8 || rec.Report.SignedSeq != 8 || rec.Report.UnsignedTail != 0 {
				t.Fatalf("recovery %+v", rec)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, signed8) {
				t.Fatalf("after Open the log is %d bytes, want the %d up to checkpoint 8", len(got), len(signed8))
			}
			if tt.wantSaved {
				saved, err := os.ReadFile(rec.SavedTo)
				if err != nil || !bytes.HasPrefix(saved, tt.tail) || len(saved) > len(tt.tail)+1 {
					t.Fatalf("saved %q (%v), want the cut tail", saved, err)
				}
			}
			r, err := l.AppendDurable(t.Context(), sample(99))
			if err != nil {
				t.Fatal(err)
			}
			if r.Seq != 9 {
				t.Fatalf("seq after recovery %d, want 9", r.Seq)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if rep, err := Verify(mustOpen(t, path), sv); err != nil || rep.Receipts != 9 || rep.UnsignedTail != 0 {
				t.Fatalf("after recovery and append: %+v %v", rep, err)
			}
		})
	}
}

// TestOpenRefuses: a log that was tampered with, or signed with another key, is not extended,
// and Open leaves its bytes alone.
func TestOpenRefuses(t *testing.T) {
	sv := testKey(t, "refuse")
	dir := t.TempDir()
	_, good := buildLog(t, dir, "src", sv, 0, 4, 4, 4)
	for _, tt := range []struct {
		name string
		log  func([][]byte) [][]byte
		seed string // of the key Open is given; "" for the log's own
		want Code
	}{
		{"altered receipt before a checkpoint", func(ls [][]byte) [][]byte {
			ls[lnR6] = editReceipt(t, ls[lnR6], func(r *Receipt) { r.Decision = DecisionAllow }, false)
			return ls
		}, "", CodeAltered},
		{"removed receipt", func(ls [][]byte) [][]byte { return slices.Delete(ls, lnR6, lnR6+1) }, "", CodeRemoved},
		{"bad last checkpoint", func(ls [][]byte) [][]byte {
			ls[lnCP12] = editCheckpoint(t, ls[lnCP12], nil, nil, true)
			return ls
		}, "", CodeCheckpointBadSignature},
		{"another key", func(ls [][]byte) [][]byte { return ls }, "another", CodeCheckpointBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			b := join(tt.log(slices.Clone(lines(good))))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			key := sv
			if tt.seed != "" {
				key = testKey(t, tt.seed)
			}
			_, err := Open(Options{Path: path, Signer: key})
			var ve *VerifyError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ve) || !ve.Has(tt.want) {
				t.Fatalf("Open: %v, want ErrCorrupt with %s", err, tt.want)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, b) {
				t.Fatal("Open changed a log it refused")
			}
			if _, err := os.Stat(path + RecoveredSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("Open saved a tail of a log it refused")
			}
		})
	}
}
