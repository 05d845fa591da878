package sink

import (
	"context"
	"encoding/json"

	"github.com/actgate/actgate/internal/receipt"
)

// ReceiptLog is what the gate needs of *receipt.Log: Append on the hot path (in-memory chain,
// group-committed later) and AppendDurable before a consumed authority is dispatched (returns
// after the fsync of the batch holding the receipt).
type ReceiptLog interface {
	Append(r receipt.Receipt) (receipt.Receipt, error)
	AppendDurable(ctx context.Context, r receipt.Receipt) (receipt.Receipt, error)
}

var _ ReceiptLog = (*receipt.Log)(nil)

// Receipt codes the sink writes for outcomes (receipt.Receipt.Code holds "the EF code of a deny
// or escalation, or the reason of an outcome").
const (
	// ReceiptCodeReplayed: a retry answered with the recorded outcome; nothing was invoked.
	ReceiptCodeReplayed = "replayed"
	// ReceiptCodeDispatch: the durable receipt of a consumed authority, written before invoking.
	ReceiptCodeDispatch = "dispatch"
)

// receiptBytes is a receipt as JSON, for the journal commit that consumes an authority.
func receiptBytes(r receipt.Receipt) []byte {
	b, err := json.Marshal(r)
	if err != nil { // strings, ints and a time: cannot fail
		return nil
	}
	return b
}
