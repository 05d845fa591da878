package review

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
)

// PolicyPath is where the authority service answers GET with the PodPolicy of the calling pod
// (the pod its bearer token is bound to).
const PolicyPath = "/v1alpha1/podpolicy"

// PolicyKind is the kind of the policy endpoint's answer.
const PolicyKind = "PodPolicy"

// Query parameters of a GET of PolicyPath.
const (
	// PolicyWatchParam "true" makes the request a long poll: the service answers when the
	// answer's version differs from PolicyVersionParam, or when PolicyTimeoutParam passes
	// (with the unchanged answer).
	PolicyWatchParam = "watch"
	// PolicyVersionParam is the version the caller holds ("" holds nothing).
	PolicyVersionParam = "version"
	// PolicyTimeoutParam bounds a watch, in whole seconds, 1 to MaxPolicyWatchSeconds.
	PolicyTimeoutParam = "timeoutSeconds"
)

// Bounds of the policy endpoint.
const (
	// MaxPolicyBytes bounds a PodPolicy body. A ToolPolicy is an API object, which the API
	// server stores in at most 1.5 MiB.
	MaxPolicyBytes = 2 << 20
	// MaxPolicyWatchSeconds bounds one watch.
	MaxPolicyWatchSeconds = 300
	// DefaultPolicyWatchSeconds is a watch's length when the caller names none.
	DefaultPolicyWatchSeconds = 30
	// maxVersionLength bounds PodPolicy.version.
	maxVersionLength = 512
)

// PodPolicy is the authority service's answer to "which ToolPolicy governs my pod": exactly
// one of Policy and None is set. The service selects the policy with the same rule it applies
// to every review: exactly one ToolPolicy in the pod's namespace selects the pod's labels, it
// is Accepted at its current generation and it has a policy epoch.
type PodPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// version identifies the answer: it changes when the governing policy, its spec or its
	// epoch changes, or the reason there is none.
	// A watch returns when it differs from the version the caller holds.
	Version string `json:"version"`
	// policy is the governing ToolPolicy.
	Policy *GoverningPolicy `json:"policy,omitempty"`
	// none says why no policy governs the pod now: the sidecar refuses every call.
	None *NoPolicy `json:"none,omitempty"`
}

// GoverningPolicy is the ToolPolicy that governs a pod, as the sidecar compiles it.
type GoverningPolicy struct {
	// name and namespace name the ToolPolicy.
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// uid, generation and resourceVersion are the object's.
	UID             types.UID `json:"uid"`
	Generation      int64     `json:"generation"`
	ResourceVersion string    `json:"resourceVersion"`
	// epoch is status.policyEpoch: bound into every authority issued under the policy.
	Epoch int64 `json:"epoch"`
	// spec is the ToolPolicy's spec.
	Spec v1alpha1.ToolPolicySpec `json:"spec"`
	// toolPins is status.toolPins: the tool definition digests recorded on first use or
	// accepted by an operator (docs/api.md "Pinned tool definitions").
	ToolPins []v1alpha1.RecordedToolPin `json:"toolPins,omitempty"`
}

// NoPolicy is why no policy governs a pod.
type NoPolicy struct {
	// reason is NotGoverned, AmbiguousPolicy, PolicyNotReady or PodNotFound.
	Reason Reason `json:"reason"`
	// code is the EF code the sidecar refuses calls with.
	Code ef.EFCode `json:"code"`
	// message is safe to show the agent.
	Message string `json:"message"`
}

// DecodePodPolicy decodes a PodPolicy strictly (unknown or duplicate members are refused, so a
// field the sidecar does not know, which might have restricted a call, is never dropped) and
// checks it: the kind, a version, exactly one of policy and none, a policy's identity and
// epoch. Every error wraps ErrBadReview.
func DecodePodPolicy(body []byte) (*PodPolicy, error) {
	if len(body) > MaxPolicyBytes {
		return nil, bad("$", "body of %d bytes exceeds %d", len(body), MaxPolicyBytes)
	}
	var p PodPolicy
	if err := decodeStrict(body, &p); err != nil {
		return nil, err
	}
	switch {
	case p.APIVersion != APIVersion:
		return nil, bad("apiVersion", "must be %s", APIVersion)
	case p.Kind != PolicyKind:
		return nil, bad("kind", "must be %s", PolicyKind)
	case p.Version == "" || len(p.Version) > maxVersionLength:
		return nil, bad("version", "must be 1 to %d characters", maxVersionLength)
	case (p.Policy == nil) == (p.None == nil):
		return nil, bad("$", "exactly one of policy and none must be set")
	}
	if n := p.None; n != nil {
		if n.Reason == "" || !n.Code.Known() {
			return nil, bad("none", "a reason and a known EF code are required")
		}
		return &p, nil
	}
	g := p.Policy
	switch {
	case g.Name == "" || g.Namespace == "" || g.UID == "":
		return nil, bad("policy", "name, namespace and uid are required")
	case g.Epoch < 1:
		return nil, bad("policy.epoch", "must be at least 1")
	case g.Generation < 1:
		return nil, bad("policy.generation", "must be at least 1")
	}
	return &p, nil
}

// PolicyVersion is the version of an answer naming the policy uid at generation (its spec) and
// epoch. It leaves out the resourceVersion, which every status write changes, so a write that
// changes neither the spec nor the epoch wakes no watch.
func PolicyVersion(uid types.UID, generation, epoch int64) string {
	return fmt.Sprintf("policy/%s/%d/%d", uid, generation, epoch)
}

// PinnedPolicyVersion is PolicyVersion for a policy whose status holds tool pins: it also
// changes when the pins do, so a sidecar's watch returns when an operator accepts a digest.
func PinnedPolicyVersion(uid types.UID, generation, epoch int64, pins []v1alpha1.RecordedToolPin) string {
	v := PolicyVersion(uid, generation, epoch)
	if len(pins) == 0 {
		return v
	}
	h := sha256.New()
	for _, p := range pins {
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", p.Server, p.Tool, p.SHA256)
	}
	return v + "/pins-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// NoneVersion is the version of a "none" answer for reason.
func NoneVersion(reason Reason, detail string) string {
	if detail == "" {
		return "none/" + string(reason)
	}
	return "none/" + string(reason) + "/" + detail
}
