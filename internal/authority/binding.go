package authority

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Binding is everything an authority is bound to (docs/architecture.md "Authority";
// tool-use-binding §16). The sink builds the Binding it expects from the live call and its own
// configuration, never from values the agent supplies, and Verify compares it field by field.
type Binding struct {
	// ActID is the AgentCandidateAct the authority was issued for.
	ActID string
	// ArgumentsDigest is the digest of the canonical arguments ("sha256:" + 64 hex).
	ArgumentsDigest string
	// ActionDigest is the digest of {"tool":…,"args":…} (docs/architecture.md "The action an option
	// authorises").
	ActionDigest string
	// Tool is the tool name.
	Tool string
	// Destination is the MCP server identity or origin the call goes to; not part of the action
	// material, so bound here (docs/architecture.md "The action an option authorises", §22 T-D).
	Destination string
	// SinkID identifies the finality sink allowed to consume the authority.
	SinkID string
	// PolicyEpoch is the policy epoch the issuing decision was made under; compared for equality.
	PolicyEpoch string
	// Namespace is the Kubernetes namespace of the agent (and of the Lease); empty in embedded mode.
	Namespace string
}

// Bounds on binding fields.
const (
	MaxIDLength    = 253  // act ID, sink ID, policy epoch
	MaxFieldLength = 2048 // tool, destination
	MaxNamespace   = 63   // a Kubernetes namespace is a DNS label
)

// IDPrefix starts every authority ID. The rest is 64 lowercase hex digits, so an ID is a valid
// Kubernetes object name (the Lease of the authority is named by it).
const IDPrefix = "authz-"

// Type markers inside the canonical objects, so a signature or ID over one kind of object can
// never be replayed as another.
const (
	payloadType = "actgate.dev/authority/v1"
	idType      = "actgate.dev/authority-id/v1"
)

// Validate checks that every required field is present, well formed and within bounds.
func (b Binding) Validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"act_id", b.ActID, MaxIDLength},
		{"tool", b.Tool, MaxFieldLength},
		{"destination", b.Destination, MaxFieldLength},
		{"sink_id", b.SinkID, MaxIDLength},
		{"policy_epoch", b.PolicyEpoch, MaxIDLength},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: binding %s is empty", ErrInvalid, f.name)
		}
		if len(f.v) > f.max {
			return fmt.Errorf("%w: binding %s longer than %d bytes", ErrInvalid, f.name, f.max)
		}
	}
	if len(b.Namespace) > MaxNamespace {
		return fmt.Errorf("%w: binding namespace longer than %d bytes", ErrInvalid, MaxNamespace)
	}
	if !IsDigest(b.ArgumentsDigest) {
		return fmt.Errorf("%w: binding arguments_digest is not sha256:<64 lowercase hex>", ErrInvalid)
	}
	if !IsDigest(b.ActionDigest) {
		return fmt.Errorf("%w: binding action_digest is not sha256:<64 lowercase hex>", ErrInvalid)
	}
	return nil
}

func (b Binding) members() []member {
	return []member{
		str("act_id", b.ActID),
		str("action_digest", b.ActionDigest),
		str("arguments_digest", b.ArgumentsDigest),
		str("destination", b.Destination),
		str("namespace", b.Namespace),
		str("policy_epoch", b.PolicyEpoch),
		str("sink_id", b.SinkID),
		str("tool", b.Tool),
	}
}

// DeriveID returns the deterministic ID of the authority for b: IDPrefix + hex SHA-256 of the
// JCS bytes of the binding (with a type marker). Issue and expiry times are not part of it, so
// issuing twice for the same act and binding names the same authority, and the second Issue
// fails with ErrAlreadyIssued instead of creating a second single-use authority for one act.
func DeriveID(b Binding) (string, error) {
	if err := b.Validate(); err != nil {
		return "", err
	}
	c, err := canonicalObject(append(b.members(), str("type", idType)))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return IDPrefix + hex.EncodeToString(sum[:]), nil
}

// IsDigest reports whether s is "sha256:" followed by 64 lowercase hex digits (docs/architecture.md
// "Digests").
func IsDigest(s string) bool {
	const prefix = "sha256:"
	if len(s) != len(prefix)+64 || s[:len(prefix)] != prefix {
		return false
	}
	for _, c := range s[len(prefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidID reports whether id has the shape DeriveID produces.
func ValidID(id string) bool {
	if len(id) != len(IDPrefix)+64 || id[:len(IDPrefix)] != IDPrefix {
		return false
	}
	for _, c := range id[len(IDPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
