package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
)

func newReceiptsCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "Verify the sink's signed, hash-chained receipt log (LAVR)",
		Long: `Commands over the receipt log the sink writes: one Ledger-Anchored Validation Receipt per
allow, deny, escalation and outcome, hash-chained and signed in batches by checkpoints
(internal/receipt).`,
		Args: cobra.NoArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(newReceiptsVerifyCmd(s))
	return cmd
}

func newReceiptsVerifyCmd(s streams) *cobra.Command {
	var (
		keyFile       string
		anchors       []string
		requireSigned bool
		stream        bool
		logID         string
	)
	cmd := &cobra.Command{
		Use:   "verify (--key PUBKEY.pem | --anchor ANCHOR.json) [--anchor SEQ=DIGEST]... [--require-signed] [--stream [--log ID]] [FILE]",
		Short: "Check a receipt log: every digest, the chain, and every checkpoint signature",
		Long: `Read a receipt log from FILE, or stdin, and check every line: canonical form, each
receipt's digest, seq numbers 1, 2, 3, ... without gaps, each receipt's prev against the
receipt before it, and each checkpoint's signature under the public key in --key (PEM,
Ed25519 or ECDSA P-256), its seq, head and prev_seq.

Exit 0 with one summary line when the log verifies. Otherwise exit 1 with one line per
problem on stderr, beginning with its code: RECEIPT_ALTERED, RECEIPT_REMOVED,
RECEIPT_REORDERED, RECEIPT_CHAIN_BROKEN, CHECKPOINT_BAD_SIGNATURE, RECEIPT_SYNTAX, ...

The log alone cannot show that lines were cut off its end, or that receipts after its last
checkpoint (the summary's unsigned_tail) were rewritten. --require-signed rejects a log with
an unsigned tail; --anchor SEQ=DIGEST, a receipt digest or a checkpoint's seq and head
recorded elsewhere earlier, requires the log to hold that receipt, which pins everything up
to it.

--stream reads a receipt stream instead of a log file: the records a sink mirrors to its
stdout (one {"actgate_receipt_log":KEY_ID,"line":{...}} object per line), as a cluster's log
pipeline keeps them after the pod is gone, e.g. the output of ` + "`kubectl logs POD -c actgate-sidecar`" + `
(--timestamps and --prefix are fine). Lines that are not records are ignored and counted;
records of other logs (another key ID; --log picks one, default the --key's) are skipped and
counted; a record repeated verbatim (a restarted sink re-emits its last signed segment) is
skipped. Every record is checked as a log line is; a stream must also end with a checkpoint
(receipts after it: RECEIPT_UNSIGNED_TAIL), and one without any record of the log is
RECEIPT_STREAM_EMPTY.

--anchor ANCHOR.json is a pod's ReceiptAnchor as ` + "`kubectl get receiptanchor POD_UID -o json`" + ` prints
it (the authority service records there, outside the pod, the key of the pod's receipt log and
its newest signed checkpoint). The log is verified under the anchored key (--key is then
optional; given, it must be the same key), its records are those of the anchored key ID, and
it must hold the anchored checkpoint's receipt with its head digest: a stream or log that ends
before it lost receipts (RECEIPT_ANCHOR_MISSING), one with another receipt there is another
chain (RECEIPT_ANCHOR_MISMATCH). An anchor whose checkpoint does not verify under its own key
is CHECKPOINT_BAD_SIGNATURE. Receipts after the anchored checkpoint are checked as any are, but
a cut after it is not detectable from the anchor (docs/operations.md "Receipts that outlive the
pod").`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if logID != "" && !stream {
				return usageError("--log needs --stream")
			}
			pins, anchorFile, err := parseAnchors(anchors)
			if err != nil {
				return err
			}
			var obj *anchor.Object
			if anchorFile != "" {
				if obj, err = loadAnchor(anchorFile); err != nil {
					return err
				}
			}
			var v signature.Verifier
			switch {
			case keyFile != "":
				if v, err = loadVerifyKey(keyFile); err != nil {
					return err
				}
				if obj != nil && !sameKey(v, obj.Key) {
					return usageError("--key %s is not the key anchored in %s", keyFile, anchorFile)
				}
			case obj != nil:
				v = obj.Key.Verifier
			default:
				return usageError("--key or --anchor ANCHOR.json is required")
			}
			if obj != nil {
				pins = append(pins, receipt.Anchor{Seq: obj.Checkpoint.Seq, Digest: obj.Checkpoint.Head})
				if logID == "" {
					logID = obj.Anchor.Spec.KeyID
				}
			}
			in, source := s.in, ""
			if len(args) == 1 {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError("%v", err)
				}
				defer f.Close()
				in, source = f, args[0]
			}
			if stream {
				rep, err := receipt.VerifyStream(in, v, receipt.StreamOptions{LogID: logID, Anchors: pins})
				if ps := receipt.ProblemsOf(err); len(ps) > 0 {
					return fail(exitRejected, receiptProblemLines(ps, source)...)
				}
				if err != nil {
					return usageError("%v", err)
				}
				_, err = fmt.Fprintf(s.out, "verified stream log=%s receipts=%d checkpoints=%d head=%s signed_seq=%d signed_head=%s ignored_lines=%d other_logs=%d repeated=%d\n",
					rep.LogID, rep.Receipts, rep.Checkpoints, orDash(rep.Head), rep.SignedSeq, orDash(rep.SignedHead), rep.Ignored, rep.OtherLogs, rep.Repeated)
				return err
			}
			rep, err := receipt.VerifyAnchored(in, v, pins...)
			if ps := receipt.ProblemsOf(err); len(ps) > 0 {
				return fail(exitRejected, receiptProblemLines(ps, source)...)
			}
			if err != nil {
				return usageError("%v", err)
			}
			if requireSigned && rep.UnsignedTail > 0 {
				p := receipt.Problem{Code: receipt.CodeUnsignedTail, Seq: rep.SignedSeq + 1,
					Detail: strconv.Itoa(rep.UnsignedTail) + " receipts after the last checkpoint are not signed"}
				return fail(exitRejected, p.String())
			}
			_, err = fmt.Fprintf(s.out, "verified receipts=%d checkpoints=%d unsigned_tail=%d head=%s signed_seq=%d signed_head=%s\n",
				rep.Receipts, rep.Checkpoints, rep.UnsignedTail, orDash(rep.Head), rep.SignedSeq, orDash(rep.SignedHead))
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "PEM public key the checkpoints are signed with (required without --anchor ANCHOR.json)")
	cmd.Flags().StringArrayVar(&anchors, "anchor", nil,
		"SEQ=DIGEST: the receipt with this seq must have this digest; or ANCHOR.json: a ReceiptAnchor "+
			"(kubectl get receiptanchor POD_UID -o json) (repeatable; one file)")
	cmd.Flags().BoolVar(&requireSigned, "require-signed", false, "reject receipts after the last checkpoint")
	cmd.Flags().BoolVar(&stream, "stream", false, "the input is a receipt stream (a sink's stdout as its log pipeline kept it), not a log file")
	cmd.Flags().StringVar(&logID, "log", "", "with --stream: the key ID of the log to verify (default: the --key's)")
	return cmd
}

// receiptProblemLines renders verification problems, one line each, naming source when set.
func receiptProblemLines(ps []receipt.Problem, source string) []string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
		if source != "" {
			lines[i] += " (in " + source + ")"
		}
	}
	return lines
}

// loadVerifyKey reads a PEM public key; an unreadable or unsupported key is a usage error.
func loadVerifyKey(path string) (signature.Verifier, error) {
	pemBytes, err := readFile(path, "key")
	if err != nil {
		return nil, err
	}
	v, err := receipt.NewVerifierPEM(pemBytes)
	if err != nil {
		return nil, usageError("--key %s: %v", path, err)
	}
	return v, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseAnchors reads --anchor values: SEQ=DIGEST pins, and at most one ReceiptAnchor file. A
// value is a pin when it starts with digits and "="; anything else names a file.
func parseAnchors(vals []string) (pins []receipt.Anchor, file string, err error) {
	for _, v := range vals {
		seqStr, digest, ok := strings.Cut(v, "=")
		if !ok || seqStr == "" || strings.Trim(seqStr, "0123456789") != "" {
			if file != "" {
				return nil, "", usageError("--anchor %s: only one ReceiptAnchor file (already %s)", v, file)
			}
			file = v
			continue
		}
		seq, err := strconv.ParseUint(seqStr, 10, 64)
		if err != nil || seq == 0 || !jcs.IsDigest(digest) {
			return nil, "", usageError("--anchor %q: want SEQ=sha256:<64 hex>, SEQ at least 1, or a ReceiptAnchor file", v)
		}
		pins = append(pins, receipt.Anchor{Seq: seq, Digest: digest})
	}
	return pins, file, nil
}

// loadAnchor reads a ReceiptAnchor file: a malformed one is a usage error, one whose
// checkpoint does not verify under its own key a rejection.
func loadAnchor(path string) (*anchor.Object, error) {
	data, err := readFile(path, "anchor")
	if err != nil {
		return nil, err
	}
	obj, err := anchor.ParseObject(data)
	if errors.Is(err, receipt.ErrBadSignature) {
		p := receipt.Problem{Code: receipt.CodeCheckpointBadSignature, Detail: "the anchored checkpoint in " + path + " does not verify under the anchored key"}
		return nil, fail(exitRejected, p.String())
	}
	if err != nil {
		return nil, usageError("--anchor %s: %v", path, err)
	}
	return obj, nil
}

// sameKey reports whether v verifies with the anchored key k.
func sameKey(v signature.Verifier, k anchor.PublicKey) bool {
	pub, err := v.PublicKey()
	if err != nil {
		return false
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	return err == nil && bytes.Equal(der, k.DER)
}
