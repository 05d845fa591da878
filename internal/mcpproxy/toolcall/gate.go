package toolcall

import (
	"context"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// _meta keys and annotation names the proxy reads or writes (mcpproxy re-exports them).
const (
	// MetaOperationID carries the sink's operation id to the upstream in tools/call
	// params._meta: the upstream's idempotency key (sink.Invoker).
	MetaOperationID = "actgate.io/operation-id"
	// MetaProvenance is where an MCP client may declare the instruction provenance of a
	// tools/call (params._meta), honoured only with Config.TrustDeclaredProvenance.
	MetaProvenance = "actgate.io/instruction-provenance"
	// MetaEFCode carries the EF code of a refused call in the result's _meta (tool-use-binding
	// §23: copied into the vendor payload as a machine-readable string).
	MetaEFCode = wire.MetaEFCode
	// MetaActID carries the act id the gate assigned, when known.
	MetaActID = "actgate.io/act-id"
	// MetaState carries the dispatch lifecycle state of the act, when known.
	MetaState = "actgate.io/state"
	// MetaMomentID carries the id of the binding moment an escalation registered.
	MetaMomentID = "actgate.io/moment-id"
	// MetaEnvelopeDigest carries that moment's envelope digest.
	MetaEnvelopeDigest = "actgate.io/envelope-digest"
	// MetaResolutions carries the binding-moment resolutions delivered to the session with
	// this result (sink.Result.Resolutions).
	MetaResolutions = "actgate.io/resolutions"
	// MetaRetryAfter is, on an EF_RATE_LIMITED refusal, the seconds until the rule's rate limit
	// lets a call through again.
	MetaRetryAfter = "actgate.io/retry-after"
	// AnnotationEmitsBindingMoment is the advisory tools/list annotation of envelope-04 §8.2
	// (its RECOMMENDED name), carried in a tool's "annotations" and "_meta".
	AnnotationEmitsBindingMoment = "emits_binding_moment"
)

// Gate is what the proxy needs of the finality sink; *sink.Gate implements it.
type Gate interface {
	// Handle is the whole flow of one tools/call; it never calls inv on deny.
	Handle(ctx context.Context, c sink.Call, inv sink.Invoker) (sink.Result, error)
	// RequestMoment is the virtual request_binding_moment tool.
	RequestMoment(ctx context.Context, session, agent string, p sink.Proposal) (sink.Result, error)
	// CanEscalate reports whether a call of tool on server may escalate (the tools/list
	// emits_binding_moment annotation).
	CanEscalate(server, tool string) bool
}

var _ Gate = (*sink.Gate)(nil)
