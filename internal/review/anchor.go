package review

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/receipt"
)

// AnchorPath is where a sidecar POSTs its receipt log's newest checkpoint for the authority
// service to anchor in the pod's ReceiptAnchor (the pod its bearer token is bound to).
const AnchorPath = "/v1alpha1/receiptanchors"

// AnchorKind is the kind of an anchor request.
const AnchorKind = "ReceiptAnchorRequest"

// MaxAnchorBytes bounds an anchor request body: a PEM key and one checkpoint.
const MaxAnchorBytes = 16 << 10

// AnchorRequest is the body of a POST to AnchorPath.
type AnchorRequest struct {
	metav1.TypeMeta `json:",inline"`
	// PublicKey is the PEM public key the log's checkpoints are signed with. The first request
	// for a pod records it; every later one must carry the same key.
	PublicKey string `json:"publicKey"`
	// Checkpoint is the log's newest signed checkpoint, its fields exactly as signed.
	Checkpoint v1alpha1.AnchoredCheckpoint `json:"checkpoint"`
}

// Reasons of the anchor endpoint's answers (a metav1.Status: reason, message, code). Each is
// stable; a refusal's reason says why, and the client wraps anchor.ErrRefused for every 4xx.
const (
	// ReasonAnchored (200): the checkpoint is now the pod's anchored checkpoint.
	ReasonAnchored Reason = "Anchored"
	// ReasonAnchorUnchanged (200): the anchor already holds this very checkpoint.
	ReasonAnchorUnchanged Reason = "AnchorUnchanged"
	// ReasonAnchorKeyChanged (409): the pod's anchor holds another public key. A log keeps its
	// key (a restarted sidecar reopens the same key file); a new key is a new log, which only a
	// new pod may start.
	ReasonAnchorKeyChanged Reason = "AnchorKeyChanged"
	// ReasonAnchorSizeDecreased (409): the anchor holds a checkpoint with a higher seq: a log
	// never shrinks.
	ReasonAnchorSizeDecreased Reason = "AnchorSizeDecreased"
	// ReasonAnchorForked (409): the anchor holds another checkpoint with the same seq (another
	// head): two chains under one key.
	ReasonAnchorForked Reason = "AnchorForked"
	// ReasonAnchorBadSignature (400): the checkpoint's signature does not verify under the key.
	ReasonAnchorBadSignature Reason = "AnchorBadSignature"
)

// DecodeAnchorRequest decodes an anchor request strictly (unknown or duplicate members refused,
// at most MaxAnchorBytes) and checks it: kind and apiVersion, a public key a receipt log can
// sign with (Ed25519 or ECDSA P-256), and a checkpoint in canonical form signed by it. The signature is checked here, so nothing unsigned reaches the API server. Errors are a
// *FieldError wrapping ErrBadReview; a bad signature's Field is "checkpoint.signature" and
// Detail starts with ReasonAnchorBadSignature.
func DecodeAnchorRequest(body []byte) (*AnchorRequest, anchor.PublicKey, receipt.SignedCheckpoint, error) {
	var (
		req AnchorRequest
		key anchor.PublicKey
		sc  receipt.SignedCheckpoint
	)
	if len(body) > MaxAnchorBytes {
		return nil, key, sc, bad("$", "body of %d bytes exceeds %d", len(body), MaxAnchorBytes)
	}
	if err := decodeStrict(body, &req); err != nil {
		return nil, key, sc, err
	}
	if req.APIVersion != APIVersion || req.Kind != AnchorKind {
		return nil, key, sc, bad("kind", "must be %s of %s", AnchorKind, APIVersion)
	}
	key, err := anchor.ParsePublicKey(req.PublicKey)
	if err != nil {
		return nil, key, sc, bad("publicKey", "%s", clip(err.Error()))
	}
	if sc, err = anchor.FromAPI(req.Checkpoint); err != nil {
		return nil, key, sc, bad("checkpoint", "%s", clip(err.Error()))
	}
	if err := receipt.VerifyCheckpoint(key.Verifier, sc); err != nil {
		return nil, key, sc, bad("checkpoint.signature", "%s: does not verify under publicKey", ReasonAnchorBadSignature)
	}
	return &req, key, sc, nil
}
