package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReceiptAnchorSpec names the pod whose receipt log is anchored and the public key its
// checkpoints are signed with. It is written once, when the anchor is created, and never
// changes: a log keeps its key for its life, and a new pod (a new UID) gets a new anchor.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a receipt log keeps its key"
type ReceiptAnchorSpec struct {
	// PodName is the name of the pod the anchor's log belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName"`

	// PodUID is the UID of that pod; the anchor's name is the same UID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	PodUID string `json:"podUID"`

	// PublicKey is the PEM public key (Ed25519 or ECDSA P-256) the log's checkpoints are
	// signed with: what `actgate receipts verify --anchor` verifies the stream under.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	PublicKey string `json:"publicKey"`

	// KeyID is the key ID the log's checkpoints carry and its stream records name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	KeyID string `json:"keyID"`
}

// AnchoredCheckpoint is a signed receipt checkpoint as the log wrote it (internal/receipt):
// receipts prevSeq+1..seq follow the previous checkpoint, and receipt seq has digest head.
// The fields are kept exactly, so the signed canonical bytes can be rebuilt and verified.
type AnchoredCheckpoint struct {
	// Seq is the number of receipts the log held at this checkpoint (its size).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9007199254740991
	Seq int64 `json:"seq"`

	// PrevSeq is the seq of the checkpoint before it (0 for the first).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9007199254740991
	PrevSeq int64 `json:"prevSeq"`

	// Head is the digest of receipt seq, which commits to every receipt before it.
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Head string `json:"head"`

	// Time is the checkpoint's time exactly as signed (RFC 3339, UTC, nanoseconds).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Time string `json:"time"`

	// KeyID is the key ID inside the signed checkpoint.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	KeyID string `json:"keyID"`

	// Signature is the standard base64 signature over the canonical checkpoint.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Signature string `json:"signature"`
}

// ReceiptAnchorStatus is the newest checkpoint the authority service verified and anchored.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.checkpoint) || (has(self.checkpoint) && self.checkpoint.seq >= oldSelf.checkpoint.seq)",message="the anchored checkpoint's seq never decreases"
type ReceiptAnchorStatus struct {
	// Checkpoint is the newest anchored checkpoint.
	// +optional
	Checkpoint *AnchoredCheckpoint `json:"checkpoint,omitempty"`
}

// ReceiptAnchor records, outside the pod, the receipt log of one pod's sidecar: its public key
// and its newest signed checkpoint. The authority service writes it on behalf of the pod whose
// bound token calls it, and only that pod's; it outlives the pod, so that the pod's receipt
// stream (its log output) can be verified after the pod is gone and a stream cut before the
// anchored checkpoint is detected (docs/operations.md "Receipts that outlive the pod"). Its
// name is the pod's UID.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ranchor,categories=actgate
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.podName`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.checkpoint.seq`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Head",type=string,JSONPath=`.status.checkpoint.head`,priority=1
// +kubebuilder:printcolumn:name="Anchored",type=string,JSONPath=`.status.checkpoint.time`,priority=1
type ReceiptAnchor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ReceiptAnchorSpec `json:"spec"`
	// +optional
	Status ReceiptAnchorStatus `json:"status,omitempty"`
}

// ReceiptAnchorList is a list of ReceiptAnchors.
// +kubebuilder:object:root=true
type ReceiptAnchorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReceiptAnchor `json:"items"`
}
