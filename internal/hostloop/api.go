package hostloop

import (
	"encoding/json"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// Paths of the host-loop endpoint.
const (
	EnforcePath  = "/v1/enforce"
	CompletePath = "/v1/complete"
)

// DefaultHostSession is the session of a host-loop call that names none: one session for the
// pod's host loop. Binding-moment resolutions are per session, so a host loop running several
// conversations should name each.
const DefaultHostSession = "host-loop"

// MaxHostBodyBytes bounds a host-loop request: a vendor block up to the act package's input
// bound, with room for the wrapper.
const MaxHostBodyBytes = act.DefaultMaxInputBytes + 64<<10

// HostVendor is the vendor shape of a host-loop block.
type HostVendor string

// Host vendors: which adapter maps the block (internal/act).
const (
	// HostAnthropic: a Messages API content block of type tool_use.
	HostAnthropic HostVendor = "anthropic"
	// HostOpenAI: one Chat Completions tool_calls[] entry.
	HostOpenAI HostVendor = "openai"
	// HostOpenAIResponses: one Responses API function_call output item.
	HostOpenAIResponses HostVendor = "openai-responses"
)

// EnforceRequest is the body of POST /v1/enforce.
type EnforceRequest struct {
	// Vendor is anthropic, openai or openai-responses. Required.
	Vendor HostVendor `json:"vendor"`
	// Block is the raw tool_use block, tool_calls entry or function_call item. Required.
	Block json.RawMessage `json:"block"`
	// Server is the ToolPolicy server the tool belongs to; optional when the gate protects one
	// server.
	Server string `json:"server,omitempty"`
	// Session is the host loop's conversation id; default DefaultHostSession.
	Session string `json:"session,omitempty"`
	// Provenance is where the instruction behind the call came from (user, system, retrieval,
	// tool_output), as the host attests it; default unknown (the worst source for policy).
	Provenance string `json:"provenance,omitempty"`
	// Destination is the URL the host is about to contact for the call: the URL its MCP client
	// is connected to, an HTTP API endpoint, or for computer use the live page's URL or origin
	// (tool-use-binding §11-§13: the live digest includes the destination). Optional: without
	// it the call's destination is the server's configured URL. When given it is the call's
	// live destination, which the policy must allow (the rule's destinations, else the server's
	// own URL; EF_DESTINATION_MISMATCH otherwise, §12 MCP_SERVER_SWAP and
	// COMPUTER_USE_ORIGIN_CHANGE, §22 T-D and T-E) and to which the authority is bound. An
	// absolute http or https URL of at most MaxDestinationBytes, without user information
	// (ParseDestination).
	Destination string `json:"destination,omitempty"`
}

// Decision is the answer of POST /v1/enforce: tool-use-binding §16's {allow, authority_id,
// code, message}, and what the host needs to continue.
type Decision struct {
	// Allow is true only when the host may run the tool now, once: the authority was verified
	// and consumed and the dispatch journaled, or the policy allows the call without one.
	Allow bool `json:"allow"`
	// AuthorityID is the consumed authority (allow under authority).
	AuthorityID string `json:"authority_id,omitempty"`
	// Code is the EF code of a refusal.
	Code ef.EFCode `json:"code,omitempty"`
	// Message is safe to show the model.
	Message string `json:"message,omitempty"`
	// Retryable is true only for EF_060.
	Retryable bool `json:"retryable,omitempty"`
	// RetryAfter is, for EF_RATE_LIMITED, the seconds until the rule's bucket holds a call
	// again; the HTTP answer carries it as Retry-After too.
	RetryAfter int64 `json:"retry_after,omitempty"`
	// OperationID is the journaled dispatch to report with /v1/complete, and the idempotency
	// key to give the tool if it takes one (allow under authority).
	OperationID string `json:"operation_id,omitempty"`
	// State is the dispatch's journal state (DISPATCH_PENDING on allow under authority).
	State journal.State `json:"state,omitempty"`
	// ActID is the act the gate built for the call.
	ActID string `json:"act_id,omitempty"`
	// BindingMoments name the BindingMoments of an escalation, EnvelopeDigest its envelope and
	// BindingMoment the envelope itself (envelope-04 §8.1's additive member).
	BindingMoments []string        `json:"binding_moments,omitempty"`
	EnvelopeDigest string          `json:"envelope_digest,omitempty"`
	BindingMoment  json.RawMessage `json:"binding_moment,omitempty"`
	// Resolutions are binding-moment resolutions delivered to the session (envelope-04 §7.3).
	Resolutions []sink.Delivery `json:"resolutions,omitempty"`
	// AuditCode is, in audit mode, the code enforcement would have returned.
	AuditCode ef.EFCode `json:"audit_code,omitempty"`
	// Replayed is true for a retry of a dispatch already settled in this session (Allow is
	// false: the tool must not run again); Result is the result recorded for it, the tool's
	// result to hand back to the model.
	Replayed bool            `json:"replayed,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	// Deny is the refusal in the block's vendor shape (tool_result with is_error, tool message,
	// function_call_output), to hand back to the model as the tool's result.
	Deny json.RawMessage `json:"deny,omitempty"`
}

// CompleteRequest is the body of POST /v1/complete.
type CompleteRequest struct {
	// OperationID is the Decision's operation_id. Required.
	OperationID string `json:"operation_id"`
	// Outcome is executed, failed or indeterminate. Required.
	Outcome HostOutcome `json:"outcome"`
	// Result is the tool's result (any JSON), kept for a retry and digested as evidence.
	Result json.RawMessage `json:"result,omitempty"`
}

// CompleteResponse is the answer of POST /v1/complete.
type CompleteResponse struct {
	OperationID string        `json:"operation_id"`
	State       journal.State `json:"state"`
}

// ErrorCode is the stable code of a host-loop request the endpoint refused as malformed.
type ErrorCode string

// Error codes of the host-loop endpoint.
const (
	CodeBadRequest       ErrorCode = "HOSTLOOP_BAD_REQUEST"
	CodeUnknownOperation ErrorCode = "HOSTLOOP_UNKNOWN_OPERATION"
	CodeSettled          ErrorCode = "HOSTLOOP_SETTLED"
	CodeUnavailable      ErrorCode = "HOSTLOOP_UNAVAILABLE"
	// CodeUnauthenticated: the request carries no agent's token, or a wrong one (401; serve).
	CodeUnauthenticated ErrorCode = "HOSTLOOP_UNAUTHENTICATED"
	// CodePendingLimit: the bound of host-loop calls under way, in total or for the agent, is
	// reached (429); nothing was enforced. Retry after completing calls under way.
	CodePendingLimit ErrorCode = "HOSTLOOP_PENDING_LIMIT"
	// CodeHostRefused: the request reached the loopback listener with a Host or an Origin that is
	// not loopback — a page of another site through DNS rebinding (403); nothing was read.
	CodeHostRefused ErrorCode = "HOSTLOOP_HOST_REFUSED"
)

// ErrorCodes are every ErrorCode the endpoint answers (api/openapi/hostloop.yaml lists them).
func ErrorCodes() []ErrorCode {
	return []ErrorCode{CodeBadRequest, CodeUnauthenticated, CodeUnknownOperation, CodeSettled, CodeUnavailable, CodePendingLimit,
		CodeHostRefused}
}

// Vendors are every HostVendor.
func Vendors() []HostVendor { return []HostVendor{HostAnthropic, HostOpenAI, HostOpenAIResponses} }

// ErrorResponse is the body of a refused host-loop request (not a refused tool call).
type ErrorResponse struct {
	Error struct {
		Code    ErrorCode `json:"code"`
		Message string    `json:"message"`
	} `json:"error"`
}

// HostOutcome is what a host loop reports about a tool it ran (POST /v1/complete).
type HostOutcome string

// Host outcomes.
const (
	// HostExecuted: the tool ran and returned its result.
	HostExecuted HostOutcome = "executed"
	// HostFailed: the tool refused or failed with an error of its own.
	HostFailed HostOutcome = "failed"
	// HostIndeterminate: the host does not know whether the tool took effect (it crashed, timed
	// out, lost the connection). Only authenticated reconciliation settles it.
	HostIndeterminate HostOutcome = "indeterminate"
)
