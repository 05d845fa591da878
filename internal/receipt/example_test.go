package receipt_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
)

func Example() {
	dir, _ := os.MkdirTemp("", "receipts")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "receipts.jsonl")
	key, _ := signature.LoadED25519SignerVerifier(ed25519.NewKeyFromSeed(make([]byte, 32)))
	at := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	log, err := receipt.Open(receipt.Options{Path: path, Signer: key, Now: func() time.Time { return at }})
	if err != nil {
		fmt.Println(err)
		return
	}
	args := jcs.Digest([]byte(`{"amount":100,"to":"acct-7"}`)) // the canonical arguments' digest, never the arguments

	// A deny: the hot path, durable at the next group commit.
	deny, _ := log.Append(receipt.Receipt{ActID: "act-1", Tool: "payment.release", ArgumentsDigest: args,
		Decision: receipt.DecisionDeny, Code: "EF_AUTHORITY_MISSING"})
	// An allow of a protected act: not invoked until its receipt is on disk.
	allow, err := log.AppendDurable(context.Background(), receipt.Receipt{ActID: "act-2", Tool: "payment.release",
		ArgumentsDigest: args, Decision: receipt.DecisionAllow, AuthorityID: "auth-2"})
	if err != nil {
		fmt.Println("fail closed:", err)
		return
	}
	fmt.Println(deny.Seq, allow.Seq, allow.Prev == deny.Digest)
	if err := log.Close(); err != nil {
		fmt.Println(err)
		return
	}

	f, _ := os.Open(path)
	defer f.Close()
	rep, err := receipt.Verify(f, key)
	fmt.Println(rep.Receipts, rep.UnsignedTail, rep.Head == allow.Digest, err)
	// Output:
	// 1 2 true
	// 2 0 true <nil>
}
