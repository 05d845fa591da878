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
// The sidecar decides every call with its pod's policy and asks the service only for
// authority:
//
//   - Permit (a call the policy permits, in one request): the service evaluates its own policy
//     for the act again and, for a Permit under the act's epoch, creates the Act carrying the
//     signed authority consumed by the operation the sidecar names (the create is the
//     compare-and-swap; no Lease is stored); it answers with the signed authority, which the
//     sidecar verifies before it journals and invokes.
//   - Review (a call the policy escalates): the BindingMoments the call awaits, a resolution to
//     deliver, or, when principals granted exactly this call, a signed authority to consume.
//   - Consume (the compare-and-swap, right before the sidecar invokes a grant): the service
//     consumes the authority's Lease for the binding the sidecar expects, once.
//   - Report (after the dispatch): the sidecar reports the outcome it journaled, EXECUTED,
//     FAILED or INDETERMINATE, with the act id and the evidence digest and never the result;
//     the service records it on the Act, which sidecars have no RBAC to write. Idempotent.
//   - Propose (request_binding_moment): an agent-authored moment the sidecar built; the service
//     checks every option's digest and call against its policy and creates the BindingMoments.
//   - Refusal (after a local deny): the record of a call the pod's policy refused; the service
//     records the Act Denied with the sidecar's code. It authorises nothing.
//
// The caller authenticates with its pod's service-account token as a bearer token; the
// namespace of every Lease and object comes from that identity, never from the request.
//
// Everything here fails closed: a response the client cannot decode, a uid that does not match,
// a transport error or a non-200 answer is an error (deny) or a response with allowed false,
// never an allow.
package review
