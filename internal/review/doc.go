// Package review is the wire protocol between an enforcing sidecar and the authority service
// (`actgate-controlplane authority`): the ActReview object of review.actgate.io/v1alpha1, its strict decoder,
// and a client.
//
// Sidecars call the service the way the API server calls an admission webhook
// (docs/architecture.md "In a pod"): they POST an ActReview whose `request` carries a uid and the
// operation, and the service answers with the same object whose `response` echoes the uid:
//
//	{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview",
//	 "request":{"uid":"…","operation":"Review","server":"payments",
//	            "act":{…AgentCandidateAct…},"arguments":{…}}}
//
//	{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview",
//	 "response":{"uid":"…","allowed":true,"decision":"Allowed","act":"act-…",
//	             "authority":{"id":"authz-…","payload":"…","signature":"…","expiresAt":"…"}}}
//
// There are three calls per protected act:
//
//   - Review (policy, evidence requirement, issuance): the service evaluates the ToolPolicy that
//     governs the caller's pod and answers allow (the hot path, no authority), allow with a
//     signed single-use authority to consume, deny with an EF code, or escalate with the
//     BindingMoment the principal must resolve.
//   - Consume (the compare-and-swap, right before the sidecar invokes): the service consumes
//     the authority's Lease for the binding the sidecar expects, once.
//   - Report (after the dispatch): the sidecar reports the outcome it journaled, EXECUTED,
//     FAILED or INDETERMINATE, with the evidence digest and never the result; the service
//     records it on the Act, which sidecars have no RBAC to write.
//
// The caller authenticates with its pod's service-account token as a bearer token; the
// namespace of every Lease and object comes from that identity, never from the request.
//
// Everything here fails closed: a response the client cannot decode, a uid that does not match,
// a transport error or a non-200 answer is an error (deny) or a response with allowed false,
// never an allow.
package review
