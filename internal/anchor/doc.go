// Package anchor keeps a pod's receipt log anchored outside the pod: the public key its
// checkpoints are signed with and its newest signed checkpoint, in the pod's ReceiptAnchor
// (api/v1alpha1), which the authority service writes on the pod's behalf and which outlives
// the pod (docs/operations.md "Receipts that outlive the pod").
//
// An Anchorer takes the checkpoints a receipt log signs (receipt.Options.OnCheckpoint) and posts
// the newest to the authority service from its own goroutine: offering never blocks the call
// path, only the newest checkpoint waiting matters (a later one pins everything an earlier one
// does), and a failed post is retried with capped exponential backoff.
//
// The conversions between receipt.SignedCheckpoint and the API's AnchoredCheckpoint, and the
// reading of a ReceiptAnchor object as `kubectl get receiptanchor -o json` prints it, are here
// too, for the authority service and `actgate receipts verify --anchor` alike.
package anchor
