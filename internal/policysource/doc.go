// Package policysource holds the compiled ToolPolicy that governs an injected sidecar's pod and
// follows its changes: the sidecar's sink.PolicyEvaluator.
//
// A Source long-polls the authority service's policy endpoint (review.PolicyPath; the service
// finds the policy with the same rule it applies to every review: exactly one Accepted
// ToolPolicy selecting the pod, with a policy epoch) and compiles what it gets with
// internal/policy, the compile `actgate serve` uses. The service answers a watch as soon as the
// policy or its state changes, so a change reaches a running sidecar within the round trip
// and a compile (docs/operations.md states what was measured).
//
// It fails closed. Until a policy has arrived, after the service answered that none governs
// the pod (not governed, ambiguous, not accepted at its current generation), after a refusal
// of the request itself (HTTP 4xx) or an answer that does not decode, and while the last policy
// received does not compile, every call is a PolicyDeny with EF_POLICY_UNAVAILABLE and Ready
// is false. When the service cannot be reached (transport errors, HTTP 5xx) the Source keeps
// the policy it holds, so calls the pod decides alone (the hot path) continue; calls that need
// authority fail at the service anyway.
//
// The package links no Kubernetes client: it speaks HTTPS to the service through
// internal/review, so cmd/actgate stays free of client-go.
package policysource
