// Package authority issues, verifies and defines the storage contract of single-use authority
// (docs/architecture.md "Authority"; tool-use-binding §16 enforce() contract, §22 T-C, T-G).
//
// An Authority is bound to an act ID, the canonical arguments digest, the action digest, the
// tool, the destination (MCP server identity or origin), the sink ID, the policy epoch, and
// (in Kubernetes) the namespace; it carries issue and expiry times and an ID derived
// deterministically from the act and binding. A Signer signs the RFC 8785 canonical bytes of
// all of that with Ed25519 or ECDSA P-256 through sigstore's signature package; a Verifier
// checks signature, every bound field and time, and reports each failure as a distinct sentinel
// error (ErrBadSignature, ErrArgumentsMismatch, ErrDestinationMismatch, ...).
//
// Store is the authority side of the state: Issue, Get and Consume, where Consume is a
// compare-and-swap that exactly one concurrent caller wins. It is kept apart from the dispatch
// journal (internal/journal) so that a sidecar can consume authorities held as Kubernetes
// Leases (consume = update with the resourceVersion of an uncached read; 409 = someone else
// consumed it) while journaling to a local file. A store that holds both in one transaction
// domain also implements ConsumeAndPender, which consumes and writes DISPATCH_PENDING in one
// commit, and IssueConsumeAndPender, which does the same for a freshly signed authority that it
// stores in the same commit (created consumed: a machine Permit pays one durable commit before
// its invoke instead of two). The embedded implementation is internal/authority/boltstore.
//
// Fail closed: a store that times out, fails, or answers ambiguously returns an error wrapping
// ErrStoreUnavailable; nothing in this package turns an error into an allow.
package authority
