package testutil

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/receipt"
)

// VerifiedReceipts reads the receipt log at path, requires it to verify under v
// (receipt.Verify: chain, seqs, checkpoint signatures) and returns its receipts in order,
// checkpoints left out.
func VerifiedReceipts(t testing.TB, path string, v signature.Verifier) []receipt.Receipt {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.Verify(bytes.NewReader(b), v); err != nil {
		t.Fatalf("receipt log %s does not verify: %v", path, err)
	}
	var out []receipt.Receipt
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 || bytes.HasPrefix(line, []byte(`{"checkpoint":`)) {
			continue
		}
		var r receipt.Receipt
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
