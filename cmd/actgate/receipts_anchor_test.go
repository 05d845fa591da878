package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/receipt"
)

// anchorFile writes a ReceiptAnchor, as kubectl prints it, anchoring the checkpoint line cpLine
// under the PEM key in keyFile, after mod.
func anchorFile(t *testing.T, dir, name, keyFile, cpLine string, mod func(*v1alpha1.ReceiptAnchor)) string {
	t.Helper()
	var w struct {
		Checkpoint struct {
			Head    string    `json:"head"`
			KeyID   string    `json:"key_id"`
			PrevSeq uint64    `json:"prev_seq"`
			Seq     uint64    `json:"seq"`
			Time    time.Time `json:"time"`
			Type    string    `json:"type"`
		} `json:"checkpoint"`
		Signature []byte `json:"signature"`
	}
	if err := json.Unmarshal([]byte(cpLine), &w); err != nil {
		t.Fatal(err)
	}
	c := w.Checkpoint
	sc := receipt.SignedCheckpoint{Checkpoint: receipt.Checkpoint{Type: c.Type, Seq: c.Seq, PrevSeq: c.PrevSeq, Head: c.Head, Time: c.Time, KeyID: c.KeyID}, Signature: w.Signature}
	pemBytes, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cp := anchor.ToAPI(sc)
	ra := &v1alpha1.ReceiptAnchor{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ReceiptAnchor"},
		ObjectMeta: metav1.ObjectMeta{Name: "0b4e5d8a-uid", Namespace: "billing", ResourceVersion: "42"},
		Spec:       v1alpha1.ReceiptAnchorSpec{PodName: "agent-0", PodUID: "0b4e5d8a-uid", PublicKey: string(pemBytes), KeyID: c.KeyID},
		Status:     v1alpha1.ReceiptAnchorStatus{Checkpoint: &cp},
	}
	if mod != nil {
		mod(ra)
	}
	b, err := json.MarshalIndent(ra, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A stream verified against the pod's ReceiptAnchor: intact, it passes under the anchored key
// alone; cut after the anchored checkpoint, at a checkpoint (so it verifies on its own), it
// fails with RECEIPT_ANCHOR_MISSING.
func TestReceiptsVerifyStreamAnchor(t *testing.T) {
	dir, log, key, other, rep := receiptsFixture(t)
	good, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(string(good), "\n")[:8] // 3 receipts, checkpoint 3, 3 receipts, checkpoint 6
	pemBytes, _ := os.ReadFile(key)
	v, _ := receipt.NewVerifierPEM(pemBytes)
	pub, _ := v.PublicKey()
	keyID, _ := receipt.KeyID(pub)
	stream := func(upTo int) string {
		var b strings.Builder
		b.WriteString("actgate sidecar serving on http://127.0.0.1:15080\n")
		for _, l := range ls[:upTo] {
			fmt.Fprintf(&b, "{%q:%q,\"line\":%s}\n", receipt.StreamKey, keyID, strings.TrimSuffix(l, "\n"))
		}
		return b.String()
	}
	writeFile := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full, cut := writeFile("full.stream", stream(8)), writeFile("cut.stream", stream(4))
	truncatedLog := writeFile("truncated.jsonl", strings.Join(ls[:4], ""))
	at6 := anchorFile(t, dir, "anchor6.json", key, ls[7], nil)
	at3 := anchorFile(t, dir, "anchor3.json", key, ls[3], nil)
	forged := anchorFile(t, dir, "forged.json", key, ls[7], func(ra *v1alpha1.ReceiptAnchor) { ra.Status.Checkpoint.Seq = 9 })
	otherKey := anchorFile(t, dir, "otherkey.json", other, ls[7], nil)
	empty := anchorFile(t, dir, "empty.json", key, ls[7], func(ra *v1alpha1.ReceiptAnchor) { ra.Status.Checkpoint = nil })
	notAnchor := writeFile("list.json", `{"apiVersion":"v1","kind":"List","items":[]}`)
	summary := fmt.Sprintf("verified stream log=%s receipts=6 checkpoints=2 head=%s signed_seq=6 signed_head=%s ignored_lines=1 other_logs=0 repeated=0\n",
		keyID, rep.Head, rep.Head)
	for _, tt := range []struct {
		name  string
		args  []string
		exit  int
		codes []string
	}{
		{"intact, anchored key only", []string{"receipts", "verify", "--stream", "--anchor", at6, full}, exitOK, nil},
		{"intact, with the same --key", []string{"receipts", "verify", "--key", key, "--stream", "--anchor", at6, full}, exitOK, nil},
		{"an older anchor", []string{"receipts", "verify", "--stream", "--anchor", at3, full}, exitOK, nil},
		{"cut at a checkpoint: verifies alone", []string{"receipts", "verify", "--key", key, "--stream", cut}, exitOK, nil},
		{"cut at a checkpoint: the anchor catches it", []string{"receipts", "verify", "--stream", "--anchor", at6, cut}, exitRejected, []string{"RECEIPT_ANCHOR_MISSING"}},
		{"cut log file: the anchor catches it", []string{"receipts", "verify", "--anchor", at6, truncatedLog}, exitRejected, []string{"RECEIPT_ANCHOR_MISSING"}},
		{"an altered anchor", []string{"receipts", "verify", "--stream", "--anchor", forged, full}, exitRejected, []string{"CHECKPOINT_BAD_SIGNATURE"}},
		{"an anchor of another key", []string{"receipts", "verify", "--stream", "--anchor", otherKey, full}, exitRejected, []string{"CHECKPOINT_BAD_SIGNATURE"}},
		{"--key is not the anchored key", []string{"receipts", "verify", "--key", other, "--stream", "--anchor", at6, full}, exitUsage, []string{"USAGE"}},
		{"nothing anchored yet", []string{"receipts", "verify", "--stream", "--anchor", empty, full}, exitUsage, []string{"USAGE"}},
		{"not a ReceiptAnchor", []string{"receipts", "verify", "--stream", "--anchor", notAnchor, full}, exitUsage, []string{"USAGE"}},
		{"two anchor files", []string{"receipts", "verify", "--stream", "--anchor", at6, "--anchor", at3, full}, exitUsage, []string{"USAGE"}},
		{"anchor file missing", []string{"receipts", "verify", "--stream", "--anchor", filepath.Join(dir, "nope.json"), full}, exitUsage, []string{"USAGE"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if exit != tt.exit {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr:\n%s", exit, tt.exit, stdout.String(), stderr.String())
			}
			var codes []string
			for _, l := range strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n") {
				if l != "" {
					codes = append(codes, strings.TrimSuffix(strings.Fields(l)[0], ":"))
				}
			}
			if !slices.Equal(codes, tt.codes) {
				t.Errorf("stderr codes %q, want %q\nstderr:\n%s", codes, tt.codes, stderr.String())
			}
			if tt.exit == exitOK && slices.Contains(tt.args, "--stream") && !strings.Contains(tt.name, "cut") && stdout.String() != summary {
				t.Errorf("stdout %q, want %q", stdout.String(), summary)
			}
		})
	}
}
