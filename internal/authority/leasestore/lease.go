package leasestore

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/actgate/actgate/internal/authority"
)

// Labels on every authority Lease, for the operator's list and cleanup.
const (
	// LabelManagedBy is the standard managed-by label; its value is ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "actgate"
	// LabelComponent is the standard component label; its value is Component.
	LabelComponent = "app.kubernetes.io/component"
	// Component is the value of LabelComponent on authority Leases.
	Component = "authority"
	// LabelActID holds ActLabelValue(act ID): the act itself when it fits a label value, else a
	// digest of it (an actgate act ID is 69 characters, a label value at most 63).
	LabelActID = "actgate.io/act-id"
	// LabelState is StateIssued or StateConsumed. It is informative (for selectors); the state
	// the store decides on is spec.holderIdentity.
	LabelState = "actgate.io/authority-state"
)

// Values of LabelState.
const (
	StateIssued   = "issued"
	StateConsumed = "consumed"
)

// Annotations holding the binding, times and signature of the authority
// (docs/architecture.md "Authority"). Times are RFC 3339 in UTC with exactly three fractional
// digits (the signed millisecond precision).
const (
	AnnotationActID           = "actgate.io/act-id"
	AnnotationArgumentsDigest = "actgate.io/arguments-digest"
	AnnotationActionDigest    = "actgate.io/action-digest"
	AnnotationTool            = "actgate.io/tool"
	AnnotationDestination     = "actgate.io/destination"
	AnnotationSinkID          = "actgate.io/sink-id"
	AnnotationPolicyEpoch     = "actgate.io/policy-epoch"
	AnnotationIssuedAt        = "actgate.io/issued-at"
	AnnotationExpiresAt       = "actgate.io/expires-at"
	AnnotationKeyID           = "actgate.io/key-id"
	// AnnotationSignature is the signature over authority.Authority.Payload(), standard base64.
	AnnotationSignature = "actgate.io/signature"
	// AnnotationConsumedBy and AnnotationConsumedAt repeat spec.holderIdentity and
	// spec.acquireTime for readers of `kubectl get -o yaml`.
	AnnotationConsumedBy = "actgate.io/consumed-by"
	AnnotationConsumedAt = "actgate.io/consumed-at"
)

// timeLayout is how times are written in annotations.
const timeLayout = "2006-01-02T15:04:05.000Z"

// actLabelDigestPrefix starts a LabelActID value that is a digest of the act ID.
const actLabelDigestPrefix = "sha256-"

// ActLabelValue is the LabelActID value for an act ID: the ID itself when it is a valid label
// value, else "sha256-" + the first 56 hex digits of its SHA-256. Select the Leases of an act
// with LabelActID=ActLabelValue(id); the exact ID is in AnnotationActID.
func ActLabelValue(actID string) string {
	if len(validation.IsValidLabelValue(actID)) == 0 {
		return actID
	}
	sum := sha256.Sum256([]byte(actID))
	return actLabelDigestPrefix + hex.EncodeToString(sum[:])[:56]
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// parseTime accepts only what formatTime writes.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, err
	}
	if formatTime(t) != s {
		return time.Time{}, fmt.Errorf("%q is not in the form %s", s, timeLayout)
	}
	return t.UTC(), nil
}

// leaseFor builds the Lease of a signed authority in state ISSUED. The binding's namespace is
// the Lease's namespace.
func leaseFor(a authority.Authority) *coordinationv1.Lease {
	b := a.Binding
	ttl := int32(min((a.ExpiresAt.Sub(a.IssuedAt)+time.Second-1)/time.Second, 1<<31-1))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      a.ID,
			Namespace: b.Namespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedBy,
				LabelComponent: Component,
				LabelActID:     ActLabelValue(b.ActID),
				LabelState:     StateIssued,
			},
			Annotations: map[string]string{
				AnnotationActID:           b.ActID,
				AnnotationArgumentsDigest: b.ArgumentsDigest,
				AnnotationActionDigest:    b.ActionDigest,
				AnnotationTool:            b.Tool,
				AnnotationDestination:     b.Destination,
				AnnotationSinkID:          b.SinkID,
				AnnotationPolicyEpoch:     b.PolicyEpoch,
				AnnotationIssuedAt:        formatTime(a.IssuedAt),
				AnnotationExpiresAt:       formatTime(a.ExpiresAt),
				AnnotationKeyID:           a.KeyID,
				AnnotationSignature:       base64.StdEncoding.EncodeToString(a.Signature),
			},
		},
		// leaseDurationSeconds is informative (the authority's lifetime, rounded up); expiry is
		// decided from the signed expires-at.
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &ttl},
	}
}

// markConsumed sets the consumption fields on a copy of l read from the API server; the copy
// keeps l's resourceVersion, which makes the Update a compare-and-swap.
func markConsumed(l *coordinationv1.Lease, operationID string, now time.Time) *coordinationv1.Lease {
	c := l.DeepCopy()
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	at := metav1.NewMicroTime(now)
	op := operationID
	c.Spec.HolderIdentity = &op
	c.Spec.AcquireTime = &at
	c.Spec.RenewTime = &at
	c.Labels[LabelState] = StateConsumed
	c.Annotations[AnnotationConsumedBy] = operationID
	c.Annotations[AnnotationConsumedAt] = at.UTC().Format(time.RFC3339Nano)
	return c
}

// consumed reports whether l records a consumption. Any sign of one counts (holder, label or
// annotation): a Lease whose markers disagree is treated as spent, never as usable.
func consumed(l *coordinationv1.Lease) bool {
	return (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") ||
		l.Labels[LabelState] == StateConsumed ||
		l.Annotations[AnnotationConsumedBy] != ""
}

// decode rebuilds the authority a Lease holds and its state, and checks the signature with v.
// Every failure — a missing or malformed annotation, a binding that no longer derives the
// Lease's name, a signature that does not verify — wraps authority.ErrBadSignature: the stored
// authority is not one the issuer signed, whatever was changed.
func decode(l *coordinationv1.Lease, v *authority.Verifier) (authority.Record, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: lease %s/%s: %s", authority.ErrBadSignature, l.Namespace, l.Name, fmt.Sprintf(format, args...))
	}
	ann := l.Annotations
	get := func(key string) (string, error) {
		s, ok := ann[key]
		if !ok || s == "" {
			return "", bad("annotation %s missing", key)
		}
		return s, nil
	}
	var fields [11]string
	for i, key := range []string{
		AnnotationActID, AnnotationArgumentsDigest, AnnotationActionDigest, AnnotationTool,
		AnnotationDestination, AnnotationSinkID, AnnotationPolicyEpoch, AnnotationIssuedAt,
		AnnotationExpiresAt, AnnotationKeyID, AnnotationSignature,
	} {
		s, err := get(key)
		if err != nil {
			return authority.Record{}, err
		}
		fields[i] = s
	}
	issued, err := parseTime(fields[7])
	if err != nil {
		return authority.Record{}, bad("annotation %s: %v", AnnotationIssuedAt, err)
	}
	expires, err := parseTime(fields[8])
	if err != nil {
		return authority.Record{}, bad("annotation %s: %v", AnnotationExpiresAt, err)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(fields[10])
	if err != nil {
		return authority.Record{}, bad("annotation %s is not base64", AnnotationSignature)
	}
	a := authority.Authority{
		ID: l.Name,
		Binding: authority.Binding{
			ActID:           fields[0],
			ArgumentsDigest: fields[1],
			ActionDigest:    fields[2],
			Tool:            fields[3],
			Destination:     fields[4],
			SinkID:          fields[5],
			PolicyEpoch:     fields[6],
			Namespace:       l.Namespace,
		},
		IssuedAt:  issued,
		ExpiresAt: expires,
		KeyID:     fields[9],
		Signature: sig,
	}
	if err := v.VerifySignature(a); err != nil {
		return authority.Record{}, bad("stored authority does not verify: %v", err)
	}
	rec := authority.Record{Authority: a, State: authority.StateIssued}
	if consumed(l) {
		rec.State = authority.StateConsumed
		if l.Spec.HolderIdentity != nil {
			rec.ConsumedBy = *l.Spec.HolderIdentity
		}
		if rec.ConsumedBy == "" {
			rec.ConsumedBy = ann[AnnotationConsumedBy]
		}
		if l.Spec.AcquireTime != nil {
			rec.ConsumedAt = l.Spec.AcquireTime.UTC()
		}
	}
	return rec, nil
}
