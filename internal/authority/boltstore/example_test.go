package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/journal"
)

// The protected path of the embedded mode: issue an authority, then at the sink consume it and
// journal DISPATCH_PENDING in one durable commit, invoke, and record the outcome. A replay of
// the same authority is refused.
func Example() {
	dir, _ := os.MkdirTemp("", "actgate-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	now := time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)

	signer, err := authority.LoadOrCreateKey(filepath.Join(dir, "authority.pem"))
	if err != nil {
		panic(err)
	}
	store, err := boltstore.Open(filepath.Join(dir, "actgate.db"), boltstore.Options{
		Verifier: signer.Verifier(),
		Now:      func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.RecoverOnStart(ctx); err != nil {
		panic(err)
	}

	// Authority side: policy allowed the act; issue a single-use authority for it.
	bind := authority.Binding{
		ActID:           "act-1",
		ArgumentsDigest: "sha256:" + fmt.Sprintf("%064x", 1),
		ActionDigest:    "sha256:" + fmt.Sprintf("%064x", 2),
		Tool:            "payout",
		Destination:     "https://payments.example/mcp",
		SinkID:          "sink-a",
		PolicyEpoch:     "7",
	}
	a, err := signer.Sign(bind, now, time.Minute)
	if err != nil {
		panic(err)
	}
	if _, err := store.Issue(ctx, a); err != nil {
		panic(err)
	}

	// Sink side: the binding is rebuilt from the live call, never taken from the agent.
	rec := journal.DispatchRecord{
		OperationID: journal.NewOperationID(), ActID: bind.ActID, AuthorityID: a.ID,
		ActionDigest: bind.ActionDigest, ArgumentsDigest: bind.ArgumentsDigest,
		Upstream: bind.Destination, Tool: bind.Tool,
	}
	_, pending, err := store.ConsumeAndPend(ctx, a.ID, bind, rec, nil)
	if err != nil {
		panic(err) // deny: never invoke
	}
	fmt.Println(pending.State)

	// ... invoke upstream with pending.OperationID as the idempotency key ...
	done, err := store.Transition(ctx, pending.OperationID, journal.StateExecuted, journal.Outcome{
		Authoritative: true, EvidenceDigest: "sha256:" + fmt.Sprintf("%064x", 3), Result: []byte(`{"ok":true}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State)

	// A replay of the same authority (tool-use-binding §22 T-C).
	rec.OperationID = journal.NewOperationID()
	_, _, err = store.ConsumeAndPend(ctx, a.ID, bind, rec, nil)
	fmt.Println(errors.Is(err, authority.ErrConsumed), authority.CodeOf(err))
	// Output:
	// DISPATCH_PENDING
	// EXECUTED
	// true AUTHORITY_CONSUMED
}
