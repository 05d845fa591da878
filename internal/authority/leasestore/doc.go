// Package leasestore is the Kubernetes implementation of authority.Store: every authority is a
// coordination.k8s.io/v1 Lease in the agent's namespace, and consuming it is a compare-and-swap
// on the Lease's resourceVersion in etcd (docs/architecture.md "Authority"). It is used by the
// authority service (`actgate-controlplane authority`), which may run several replicas; sidecars never get RBAC
// on Leases and reach it only through the service's consume review.
//
// # The Lease of an authority
//
// The Lease is named by the authority ID (authority.DeriveID: "authz-" + 64 hex, a
// deterministic function of the act and its binding), so issuing twice for one act and binding
// is a create conflict (authority.ErrAlreadyIssued). The binding and the signature live in
// annotations (AnnotationActID … AnnotationSignature); the namespace is the Lease's own. Nothing
// else is trusted: on every read the store rebuilds the signed payload from the Lease name,
// namespace and annotations and checks the signature, so a Lease whose annotations were edited,
// or copied into another namespace, no longer verifies and is refused (ErrBadSignature).
//
// Labels (LabelManagedBy, LabelComponent, LabelActID, LabelState) let the operator find the
// Leases; Collectable and Sweep say which may be deleted after the retention period.
//
// # Consume
//
// Consume is the pattern of client-go's leaselock.go and etcd's concurrency.Mutex: an uncached
// read (a quorum GET through a typed client, never an informer cache), verification of the
// stored authority against what the sink expects at the store's clock, then an Update that
// carries the resourceVersion of that read and sets spec.holderIdentity to the operation ID.
// The API server accepts the Update only if nothing changed the Lease since the read, so of any
// number of concurrent consumers, in any number of processes, exactly one succeeds. A 409
// conflict means someone else won: authority.ErrConsumed. A missing Lease is
// authority.ErrNotFound. Nothing is retried: a lost race is a deny.
//
// # Fail closed
//
// Every operation runs under a deadline (Options.Timeout). An API server that is stopped,
// unreachable, slow, forbids the request or answers anything unexpected gives an error wrapping
// authority.ErrStoreUnavailable (and the underlying error, so callers can tell a timeout),
// never a success. An Update whose answer is lost may have been applied: the authority is then
// spent and the caller was told "unavailable" — a deny, never a second dispatch.
package leasestore
