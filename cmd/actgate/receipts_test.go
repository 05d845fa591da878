package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
)

// receiptsFixture writes a log of two batches of three receipts signed by a seeded key, the
// key's public PEM, and a PEM of another key, and returns their paths and the final report.
func receiptsFixture(t *testing.T) (dir, log, key, otherKey string, rep receipt.Report) {
	t.Helper()
	dir = t.TempDir()
	sv := func(seed string) *signature.ED25519SignerVerifier {
		s := sha256.Sum256([]byte(seed))
		k, err := signature.LoadED25519SignerVerifier(ed25519.NewKeyFromSeed(s[:]))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	writeKey := func(name string, k *signature.ED25519SignerVerifier) string {
		pub, _ := k.PublicKey()
		pem, err := cryptoutils.MarshalPublicKeyToPEM(pub)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := sv("cli")
	key, otherKey = writeKey("key.pem", k), writeKey("other.pem", sv("other"))
	log = filepath.Join(dir, "receipts.jsonl")
	clock := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	l, err := receipt.Open(receipt.Options{Path: log, Signer: k, MaxDelay: time.Hour,
		Now: func() time.Time { clock = clock.Add(time.Millisecond); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		r := receipt.Receipt{ActID: fmt.Sprintf("act-%d", i), Tool: "payment.release",
			ArgumentsDigest: jcs.Digest([]byte{byte(i)}), Decision: receipt.DecisionDeny, Code: "EF_AUTHORITY_MISSING"}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if err := l.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(log)
	defer f.Close()
	if rep, err = receipt.Verify(f, k); err != nil {
		t.Fatal(err)
	}
	return dir, log, key, otherKey, rep
}

func TestReceiptsVerify(t *testing.T) {
	dir, log, key, other, rep := receiptsFixture(t)
	good, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(string(good), "\n")[:8] // 3 receipts, checkpoint, 3 receipts, checkpoint
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	altered := write("altered", append(append([]string{}, ls[:1]...), append([]string{strings.Replace(ls[1], "act-1", "act-9", 1)}, ls[2:]...)...)...)
	removed := write("removed", append(append([]string{}, ls[:1]...), ls[2:]...)...)
	reordered := write("reordered", append([]string{ls[1], ls[0]}, ls[2:]...)...)
	unsigned := write("unsigned", ls[:7]...)
	truncated := write("truncated", ls[:4]...)
	summary := fmt.Sprintf("verified receipts=6 checkpoints=2 unsigned_tail=0 head=%s signed_seq=6 signed_head=%s\n", rep.Head, rep.Head)

	tests := []struct {
		name   string
		args   []string
		stdin  string
		exit   int
		stdout string
		codes  []string
	}{
		{"file", []string{"receipts", "verify", "--key", key, log}, "", exitOK, summary, nil},
		{"stdin", []string{"receipts", "verify", "--key", key}, string(good), exitOK, summary, nil},
		{"empty log", []string{"receipts", "verify", "--key", key}, "", exitOK,
			"verified receipts=0 checkpoints=0 unsigned_tail=0 head=- signed_seq=0 signed_head=-\n", nil},
		{"anchored", []string{"receipts", "verify", "--key", key, "--anchor", "6=" + rep.Head, log}, "", exitOK, summary, nil},
		{"unsigned tail", []string{"receipts", "verify", "--key", key, unsigned}, "", exitOK,
			fmt.Sprintf("verified receipts=6 checkpoints=1 unsigned_tail=3 head=%s signed_seq=3 signed_head=%s\n", rep.Head, sigHead(t, ls[3])), nil},

		{"altered", []string{"receipts", "verify", "--key", key, altered}, "", exitRejected, "", []string{"RECEIPT_ALTERED"}},
		{"removed", []string{"receipts", "verify", "--key", key, removed}, "", exitRejected, "", []string{"RECEIPT_REMOVED"}},
		{"reordered", []string{"receipts", "verify", "--key", key, reordered}, "", exitRejected, "", []string{"RECEIPT_REORDERED"}},
		{"other key", []string{"receipts", "verify", "--key", other, log}, "", exitRejected, "",
			[]string{"CHECKPOINT_BAD_SIGNATURE", "CHECKPOINT_BAD_SIGNATURE"}},
		{"unsigned tail required signed", []string{"receipts", "verify", "--key", key, "--require-signed", unsigned}, "", exitRejected, "",
			[]string{"RECEIPT_UNSIGNED_TAIL"}},
		{"truncated at a checkpoint: verifies alone", []string{"receipts", "verify", "--key", key, truncated}, "", exitOK,
			fmt.Sprintf("verified receipts=3 checkpoints=1 unsigned_tail=0 head=%s signed_seq=3 signed_head=%s\n", sigHead(t, ls[3]), sigHead(t, ls[3])), nil},
		{"truncated at a checkpoint: caught by an anchor", []string{"receipts", "verify", "--key", key, "--anchor", "6=" + rep.Head, truncated}, "", exitRejected, "",
			[]string{"RECEIPT_ANCHOR_MISSING"}},
		{"anchor mismatch", []string{"receipts", "verify", "--key", key, "--anchor", "2=" + rep.Head, log}, "", exitRejected, "",
			[]string{"RECEIPT_ANCHOR_MISMATCH"}},
		{"not a log", []string{"receipts", "verify", "--key", key}, "hello\n", exitRejected, "", []string{"RECEIPT_SYNTAX"}},

		{"no key", []string{"receipts", "verify", log}, "", exitUsage, "", []string{"USAGE"}},
		{"key file missing", []string{"receipts", "verify", "--key", filepath.Join(dir, "nope.pem"), log}, "", exitUsage, "", []string{"USAGE"}},
		{"key not PEM", []string{"receipts", "verify", "--key", log, log}, "", exitUsage, "", []string{"USAGE"}},
		{"log missing", []string{"receipts", "verify", "--key", key, filepath.Join(dir, "nope")}, "", exitUsage, "", []string{"USAGE"}},
		{"bad anchor", []string{"receipts", "verify", "--key", key, "--anchor", "six=x", log}, "", exitUsage, "", []string{"USAGE"}},
		{"two files", []string{"receipts", "verify", "--key", key, log, log}, "", exitUsage, "", []string{"USAGE", "Run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if exit != tt.exit {
				t.Errorf("exit %d, want %d\nstderr:\n%s", exit, tt.exit, stderr.String())
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			var codes []string
			for _, l := range strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n") {
				if l != "" {
					codes = append(codes, strings.Fields(l)[0])
				}
			}
			if !reflect.DeepEqual(codes, tt.codes) {
				t.Errorf("stderr codes %q, want %q\nstderr:\n%s", codes, tt.codes, stderr.String())
			}
		})
	}
}

// sigHead returns the head of a checkpoint line.
func sigHead(t *testing.T, line string) string {
	t.Helper()
	_, rest, ok := strings.Cut(line, `"head":"`)
	if !ok || len(rest) < 71 {
		t.Fatalf("not a checkpoint line: %s", line)
	}
	return rest[:71]
}

// TestReceiptsVerifyStream: --stream verifies a sink's mirrored receipts in a pod's output as
// `kubectl logs --timestamps` prints it (other lines between the records), and reports the
// codes of a removed receipt, a missing last checkpoint and a stream without the log.
func TestReceiptsVerifyStream(t *testing.T) {
	_, log, key, _, rep := receiptsFixture(t)
	good, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, _ := os.ReadFile(key)
	v, err := receipt.NewVerifierPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := v.PublicKey()
	keyID, _ := receipt.KeyID(pub)
	ls := strings.SplitAfter(string(good), "\n")[:8]
	stream := func(skip ...int) string {
		var b strings.Builder
		b.WriteString("2026-12-01T10:00:00.000000001Z actgate sidecar serving on http://127.0.0.1:15080\n")
		for i, l := range ls {
			if slices.Contains(skip, i) {
				continue
			}
			fmt.Fprintf(&b, "2026-12-01T10:00:0%d.000000001Z {%q:%q,\"line\":%s}\n", i, receipt.StreamKey, keyID, strings.TrimSuffix(l, "\n"))
		}
		return b.String()
	}
	summary := fmt.Sprintf("verified stream log=%s receipts=6 checkpoints=2 head=%s signed_seq=6 signed_head=%s ignored_lines=1 other_logs=0 repeated=0\n",
		keyID, rep.Head, rep.Head)
	for _, tt := range []struct {
		name   string
		args   []string
		stdin  string
		exit   int
		stdout string
		code   string
	}{
		{"stream", []string{"receipts", "verify", "--key", key, "--stream"}, stream(), exitOK, summary, ""},
		{"stream of its log", []string{"receipts", "verify", "--key", key, "--stream", "--log", keyID}, stream(), exitOK, summary, ""},
		{"a receipt removed", []string{"receipts", "verify", "--key", key, "--stream"}, stream(1), exitRejected, "", "RECEIPT_REMOVED"},
		{"the last checkpoint removed", []string{"receipts", "verify", "--key", key, "--stream"}, stream(7), exitRejected, "", "RECEIPT_UNSIGNED_TAIL"},
		{"another log's stream", []string{"receipts", "verify", "--key", key, "--stream", "--log", "sha256:other"}, stream(), exitRejected, "", "RECEIPT_STREAM_EMPTY"},
		{"a log file is not a stream", []string{"receipts", "verify", "--key", key, "--stream", log}, "", exitRejected, "", "RECEIPT_STREAM_EMPTY"},
		{"--log without --stream", []string{"receipts", "verify", "--key", key, "--log", keyID, log}, "", exitUsage, "", "USAGE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if exit != tt.exit || stdout.String() != tt.stdout {
				t.Errorf("exit %d, want %d; stdout %q, want %q\nstderr:\n%s", exit, tt.exit, stdout.String(), tt.stdout, stderr.String())
			}
			if tt.code != "" && !strings.HasPrefix(stderr.String(), tt.code) {
				t.Errorf("stderr does not begin with %s:\n%s", tt.code, stderr.String())
			}
		})
	}
}
