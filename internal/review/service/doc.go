// Package service is the authority service of `actgate-controlplane authority`: the Kubernetes-mode
// counterpart of the embedded gate's policy, issue and consume steps (internal/sink), served to
// sidecars over HTTPS in the style of an admission webhook (internal/review has the wire
// types).
//
// # One review
//
//  1. Authenticate: the bearer token is checked with a TokenReview for the service's audience
//     (Options.Audiences). The caller must be a service account and the token bound to a pod:
//     its authentication.kubernetes.io/pod-name and pod-uid extras name the pod, which must
//     exist with that UID and run as that service account. A token without them (minted with
//     serviceaccounts/token create and no Pod boundObjectRef) proves no pod and is refused.
//     Failure is HTTP 401 (Unauthenticated, UnboundToken) or 403 (PodNotFound).
//  2. Find the policy: exactly one ToolPolicy in the pod's namespace must select the pod
//     (spec.podSelector); none is NotGoverned, several is AmbiguousPolicy, both HTTP 403. The
//     policy is served only when its Accepted condition is True for its current generation and
//     it has a policy epoch; otherwise every call is denied (PolicyNotReady). Policies and pods
//     are read from informers when the service has a Cache (NewCache, package kubecache; the
//     API server until it has synced, and for a pod it does not hold yet), else from the API
//     server on every review; policies are compiled once per generation. TokenReview answers
//     are reused by token hash for Options.TokenReviewTTL (package tokenreview).
//  3. Review: the act (internal/act) is parsed strictly and its arguments digest recomputed
//     from the arguments the sidecar will send (a difference is EF_SCOPE_MISMATCH); the
//     destination is the server's URL from the policy and the sink is the policy's sink.id (or
//     the act's when the policy names none). The policy decides (internal/policy) with the
//     caller's service-account user as the agent. An Act object named by the act id records
//     the frozen action and the decision. Then:
//     - Allow: allowed, no authority (the hot path).
//     - Permit: a signed single-use authority bound to act id, arguments and action digests,
//     tool, destination, sink, policy epoch, namespace and expiry is issued as a Lease
//     (internal/authority/leasestore) and returned to the sidecar to verify and consume.
//     - Escalate: see "Binding moments".
//     - Deny: the decision's EF code.
//     Audit mode lets everything through as allowed and records AuditDenied with the code
//     enforcement would have returned; it is never called enforcement.
//  4. Permit (a pod's machine Permit in one request): the act is checked and policy evaluated
//     as for a Review; anything but Permit, or an act decided under another epoch, is refused.
//     The Act is created carrying its permit record: the signed authority, consumed by the
//     sidecar's operation (v1alpha1.AnnotationActPermit*). The Act's name is derived from the act
//     id, so its create is the compare-and-swap of the consumption, and no Lease is stored; a
//     second Permit of the act is refused with EF_005 unless it is the same operation's retry,
//     which gets the recorded authority again. The Act's status is written by the outcome's
//     Report: a permitted call costs two writes in all. Refusal records a call the sidecar
//     refused by its own policy: the Act, Denied with the sidecar's code, two writes. Propose
//     registers an agent-authored moment (see "Binding moments").
//  5. Consume: the authority's Lease is consumed by compare-and-swap for the binding the
//     sidecar expects, in the caller's namespace, under the policy's current epoch; the Act
//     moves to CONSUMED with the operation id.
//  6. Report: after the sidecar journaled the dispatch's outcome, it reports EXECUTED, FAILED or
//     INDETERMINATE with the act id and the evidence digest (never the result). A permitted
//     act's record must name that authority and operation; otherwise the authority's Lease in
//     the caller's namespace must be CONSUMED by that operation, and the Act it names must
//     record the same authority and operation. The Act moves from CONSUMED (or, for a permitted
//     act, from no status) to the reported state, with
//     the Settled condition (a repeated report of the same state is answered as recorded; any
//     other move is refused). A report never changes what the agent got.
//
// # Binding moments
//
// An escalated call gets a gate-authored envelope (as internal/sink builds one: a factual
// briefing with digests and no argument values, the requested call and the rule's declared
// alternatives as options) and one BindingMoment per eligible principal in the agent's
// namespace, labelled with the session. A later review of an action in the same session, by
// the same agent and pod, to the same server and destination, looks at the moments whose
// envelope offers that action, newest first:
//   - declined: EF_MOMENT_DECLINED, in this session from then on;
//   - question: deliberation is reopened for the agent (EF_ESCALATION_REQUIRED, state
//     Reopened), and the action is not escalated again in this session;
//   - answer: the answer is returned once (state Answered); the next call escalates anew;
//   - option: when minPrincipals eligible principals chose the option whose action digest is
//     this exact call (recomputed from the live arguments, envelope.AuthorizeCall), authority
//     is issued for it — once: the grant is recorded on the escalated Act by compare-and-swap,
//     so of several replicas and several calls exactly one act receives it. A Review that
//     names its dispatch's operation (request.permit) gets it consumed by that operation: the
//     permit record is written on the call's Act by compare-and-swap on the resourceVersion
//     it was recorded at, no Lease is stored and no Consume follows (an Act the service had
//     already answered keeps its status and gets a Lease for a Consume);
//   - pending: EF_ESCALATION_REQUIRED with the same moments;
//   - expired unresolved: the act is denied once (EF_002, state Expired); the next call
//     escalates anew.
//
// When the session has none of these, the moments other sessions of the same agent (service
// account and pod UID) raised for exactly this action, server and destination (label
// LabelEscalation) are looked at: an unspent grant for exactly this call goes to it, once, by
// the same compare-and-swap; while they are pending the call gets the same moments. Only
// then is a new moment created, so an agent retrying from new sessions raises one pending
// moment per action, and another pod never shares one.
//
// An agent-authored moment (Propose) is registered the same way, with the agent's envelope once
// every option's action digest is its call's and every call passed the policy on the option's
// own server; its Act is named by the session and envelope, the moments' annotations carry the
// first option that needs a human as their call, and their calls each option's server and
// destination. The options may call different servers: a Review finds a moment only when the
// option offering the call's action is on the call's server and destination.
//
// A moment counts as resolved only when the controller has recorded it (status.state
// Resolved, status.resolvedBy equal to spec.principal) and its resolution names its envelope:
// spec.resolution is written by the principal, admitted by the BindingMoment webhook.
//
// # Reads
//
// ToolPolicies and Pods, which only find the caller and its policy, and the session's
// BindingMoments come from the Cache's informers when there is one (a pod it does not hold is
// read by name; moments are indexed by session and escalation label). Without a Cache, before
// a namespace's moment informer has synced, and to decide again an escalation the informer's
// view leaves pending or would raise anew, lists are served from the API server's watch cache
// (resourceVersion "0"), milliseconds behind etcd, because a consistent list waits for etcd's
// progress notification (tens of milliseconds a review, measured on envtest). What single use
// rests on is written by create or compare-and-swap and read by quorum: the Act a Permit
// creates, the Lease a consume spends (internal/authority/leasestore), and the escalated Act
// whose annotation records, by compare-and-swap, the one call a resolution was granted to.
//
// # The pod's policy
//
// PolicyHandler serves GET review.PolicyPath: the PodPolicy of the calling pod, found by the
// same authenticate-and-govern steps as a review, and as a long poll (watch=true) answered when
// its version changes. The Cache wakes the watches of a namespace on every change of its
// ToolPolicies or pods; a watch also looks again every 5 seconds.
//
// # Fail closed
//
// Every review runs under Options.ReviewTimeout. An API server that is slow or unreachable
// gives EF_060 (reason Timeout); another API or store failure gives EF_STORE_UNAVAILABLE; an
// invalid or ambiguous input or configuration gives a deny with its code. Nothing turns an
// error into an allow.
//
// # What the service needs
//
// PolicyRules lists the RBAC rules of the service's ClusterRole, bound cluster-wide;
// NamespacePolicyRules those it holds only in governed namespaces, through the RoleBindings the
// manager keeps there (controllers.NamespaceAccessReconciler).
package service
