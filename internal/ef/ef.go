package ef

import "strings"

// EFCode is a machine-readable execution-finality error code, copied into vendor error payloads
// (tool-use-binding §23).
type EFCode string

// Codes named by tool-use-binding.
const (
	// EF002 — the authority for the act is missing, expired or already consumed
	// (tool-use-binding §30: `if not auth or auth.consumed or auth.expired(): Deny("EF_002")`).
	EF002 EFCode = "EF_002"
	// EF005 — the single-use compare-and-swap consume failed: another dispatch consumed the
	// authority first (§30 `consume_cas` → "EF_005"; §22 T-C replay).
	EF005 EFCode = "EF_005"
	// EF040 — the authority names another finality sink (§30 `auth.sink_id != sink_id` →
	// "EF_040"; §16 MUST 3 "sink-mismatched").
	EF040 EFCode = "EF_040"
	// EF060 — validation timed out; the act was not invoked. The only retryable code (§23), and
	// only for a bounded retry of validation, never one that skips enforce() (§16 MUST 5).
	EF060 EFCode = "EF_060"
	// EFScopeMismatch — the live arguments do not hash to the authorised digest (§16 MUST 1–2,
	// §17 host error object, §30).
	EFScopeMismatch EFCode = "EF_SCOPE_MISMATCH"
	// EFDestinationMismatch — the live destination (MCP server identity, origin) is not the
	// authorised one (§12 MCP_SERVER_SWAP and COMPUTER_USE_ORIGIN_CHANGE; §22 T-D, T-E).
	EFDestinationMismatch EFCode = "EF_DESTINATION_MISMATCH"
	// EFInstructionProvenanceFailure — the instruction provenance cannot support the act's
	// consequence class (§12 INJECTED_EMAIL_SEND; §22 T-A).
	EFInstructionProvenanceFailure EFCode = "EF_INSTRUCTION_PROVENANCE_FAILURE"
)

// actgate extensions: codes the binding does not name but actgate's decisions need
// (docs/architecture.md "Fail closed", "Human decisions", "Digests").
const (
	// EFActInvalid — the tool block could not be mapped to a valid AgentCandidateAct (invalid or
	// partial arguments, malformed block); tool-use-binding §9 keeps such a block non-effective.
	EFActInvalid EFCode = "EF_ACT_INVALID"
	// EFEscalationRequired — the tool is human-gated; a binding moment must resolve first
	// (docs/architecture.md "Human decisions": a direct call is denied with the escalation code).
	EFEscalationRequired EFCode = "EF_ESCALATION_REQUIRED"
	// EFPolicyDenied — policy refuses this act.
	EFPolicyDenied EFCode = "EF_POLICY_DENIED"
	// EFRateLimited — the governing rule's rate limit refuses this call now (docs/api.md "Rate
	// limits"); it was not registered, issued or sent.
	EFRateLimited EFCode = "EF_RATE_LIMITED"
	// EFBudgetExceeded — the call would pass a limit of one of its governing rule's budgets (a
	// count of calls or the sum of an argument over a window) and the budget's onExceed is Deny,
	// or its spending was charged by another call first between the check and the moment
	// authority is consumed (docs/api.md "Budgets"); nothing was dispatched.
	EFBudgetExceeded EFCode = "EF_BUDGET_EXCEEDED"
	// EFBudgetLimit — the budget's ledger holds as many keys per budget, or as many charged
	// operations per window, as the gate allows, or the call's amount or key cannot be read
	// (missing, negative, not a plain decimal, too long); the call was refused, nothing was
	// dispatched (docs/api.md "Budgets").
	EFBudgetLimit EFCode = "EF_BUDGET_LIMIT"
	// EFPolicyUnavailable — the sink holds no current policy to decide with: an injected
	// sidecar that has not received its pod's governing ToolPolicy from the authority service,
	// was told that none governs the pod, or holds one that does not compile. Every call is
	// refused until a policy arrives (docs/architecture.md "Fail closed").
	EFPolicyUnavailable EFCode = "EF_POLICY_UNAVAILABLE"
	// EFUnknownTool — the tool is not declared for a protected server (docs/architecture.md "Fail
	// closed").
	EFUnknownTool EFCode = "EF_UNKNOWN_TOOL"
	// EFArgumentsOutOfProfile — the arguments fall outside the strict JCS profile, so they
	// cannot be bound to a human decision (docs/architecture.md "Digests").
	EFArgumentsOutOfProfile EFCode = "EF_ARGUMENTS_OUT_OF_PROFILE"
	// EFStoreUnavailable — the authority store or dispatch journal failed, was closed or
	// answered ambiguously; nothing was invoked (docs/architecture.md "Fail closed"; AEB
	// "Atomically Consume or Reserve Before Invocation").
	EFStoreUnavailable EFCode = "EF_STORE_UNAVAILABLE"
	// EFIndeterminate — an earlier dispatch of this exact action may have taken effect and its
	// outcome is unknown (in flight, or INDETERMINATE until authenticated reconciliation); the
	// call is not invoked again (AEB "Classify the Effect Outcome", tool-use-binding §9).
	EFIndeterminate EFCode = "EF_INDETERMINATE"
	// EFMomentDeclined — a principal declined the binding moment that offered this action; it
	// is refused in this session until a new binding moment is resolved (envelope-04 §7.3).
	EFMomentDeclined EFCode = "EF_MOMENT_DECLINED"
	// EFMomentInvalid — a proposed binding moment was refused: malformed, identical to one
	// already emitted, or naming an action no principal can be asked about (envelope-04 §4,
	// §7.2, §12.5).
	EFMomentInvalid EFCode = "EF_MOMENT_INVALID"
	// EFUpstreamRedirect — the upstream answered the call with an HTTP redirect. The gate
	// contacts only the destination the authority binds and never follows one, so the call ran
	// nowhere; the dispatch is FAILED (the bound destination answered that it did not process
	// the call, as a 4xx refusal does; AEB "Classify the Effect Outcome").
	EFUpstreamRedirect EFCode = "EF_UPSTREAM_REDIRECT"
	// EFUpstreamIDPUnavailable — the gate (or sidecar) presents the upstream a token it obtains
	// from the organisation's identity provider (client credentials or token exchange), and
	// none could be obtained (the provider unreachable or refusing the gate's client, its
	// credential files unreadable): the request was not sent, so the dispatch is FAILED, never
	// INDETERMINATE (docs/identity.md "Gate → upstream").
	EFUpstreamIDPUnavailable EFCode = "EF_UPSTREAM_IDP_UNAVAILABLE"
	// EFAgentUnauthenticated — the request to the standalone gate's MCP endpoint did not carry
	// a configured agent's token (or named a session another agent opened); nothing was read.
	EFAgentUnauthenticated EFCode = "EF_AGENT_UNAUTHENTICATED"
	// EFAgentIDPUnavailable — the gate authenticates agents by the organisation's identity
	// provider (agent.authentication oauth) and cannot fetch its keys, and no key it holds
	// verifies the token: the agent is refused (HTTP 503), never admitted; nothing was read.
	EFAgentIDPUnavailable EFCode = "EF_AGENT_IDP_UNAVAILABLE"
	// EFSessionLimit — the gate holds as many agent sessions as it allows, in total or for this
	// agent; the session was not opened. Close idle sessions or raise the limit.
	EFSessionLimit EFCode = "EF_SESSION_LIMIT"
	// EFMomentLimit — the agent or the session already has as many pending binding moments as
	// the gate allows; the moment was not registered and the call was not invoked. Wait for
	// the principal to resolve (or let expire) the pending ones.
	EFMomentLimit EFCode = "EF_MOMENT_LIMIT"
	// EFMCPHeaderMismatch — an MCP 2026-07-28 request's Mcp-Method, Mcp-Name or
	// Mcp-Protocol-Version header is missing or says something other than its body: the gate
	// decides on the body and a server may route on the headers, so nothing is decided or
	// relayed.
	EFMCPHeaderMismatch EFCode = "EF_MCP_HEADER_MISMATCH"
	// EFTaskLimit — the session (on MCP 2026-07-28, the agent) already follows as many running
	// MCP tasks of dispatched calls as the gate allows, or the gate already remembers as many
	// unexpired tasks the agent created (or tasks in all) as it holds; the call was not invoked.
	// Fetch the results of the running ones (tasks/result; tasks/get on 2026-07-28) or let them
	// end.
	EFTaskLimit EFCode = "EF_TASK_LIMIT"
	// EFInputLimit — as many of the agent's MCP 2026-07-28 requests await its input (an
	// input_required round of a 2025 upstream's request) as the gate holds; the request was not
	// decided or sent. Answer or abandon the waiting ones.
	EFInputLimit EFCode = "EF_INPUT_LIMIT"
	// EFContinuationInvalid — an MCP 2026-07-28 continuation's requestState is not one the gate
	// issued for a request awaiting this agent's input in this round (tampered, expired,
	// answered, another agent's), or the continuation's method, name or arguments differ from
	// the request it continues; nothing was delivered, decided or dispatched.
	EFContinuationInvalid EFCode = "EF_CONTINUATION_INVALID"
	// EFListenInvalid — an MCP 2026-07-28 subscriptions/listen's params are not a notification
	// filter (notifications missing or not an object, a member of the wrong type); no
	// subscription was opened.
	EFListenInvalid EFCode = "EF_LISTEN_INVALID"
	// EFListenLimit — the agent already has as many subscriptions/listen streams open as the gate
	// allows, or the listen names more resources (or a longer URI) than one listen may; no
	// subscription was opened. Close a listen or name fewer resources.
	EFListenLimit EFCode = "EF_LISTEN_LIMIT"
	// EFEventIDInvalid — the agent's Last-Event-ID is longer than the gate accepts or holds a
	// byte no event id can (NUL, CR, LF); the stream was not resumed and nothing was relayed.
	EFEventIDInvalid EFCode = "EF_EVENT_ID_INVALID"
	// EFHostRefused — the request reached the gate's loopback listener with a Host or Origin
	// that is not a loopback address (a DNS rebinding); nothing was read, decided or relayed.
	EFHostRefused EFCode = "EF_HOST_REFUSED"
	// EFNotificationInvalid — an MCP notification (a message without an id) whose method is not
	// one the client may send in the request's revision (a request method sent without an id
	// included); nothing was decided or relayed.
	EFNotificationInvalid EFCode = "EF_NOTIFICATION_INVALID"
	// EFStreamLogLimit — the agent's Last-Event-ID names an event of an answer stream whose log
	// the gate dropped at its bounds (the bytes one stream's log, one session's logs or all the
	// gate's logs may hold); nothing was resumed. The call's outcome is journaled as usual: the
	// same call again gets the recorded result.
	EFStreamLogLimit EFCode = "EF_STREAM_LOG_LIMIT"
	// EFToolChanged — the tool's definition (name, title, description, input and output schema,
	// annotations) as the upstream lists it is not the one its governing rule pins, or the gate
	// has not seen it listed since it started; the tool is hidden from tools/list and its calls
	// are refused until an operator accepts the new digest (docs/api.md "Pinned tool
	// definitions"). Nothing was invoked.
	EFToolChanged EFCode = "EF_TOOL_CHANGED"
)

// Info describes one code.
type Info struct {
	Code EFCode
	// Description is a short, data-free sentence safe to show to the model (§28: deny messages
	// MUST NOT leak other users' data).
	Description string
	// Retryable is true only for EF_060 (§23).
	Retryable bool
	// Extension is true for codes actgate adds beyond tool-use-binding.
	Extension bool
}

// all is the registry, in a fixed order. It is a function, not a package variable, so there is
// no mutable package state.
func all() []Info {
	return []Info{
		{EF002, "No current authority for this act: missing, expired or already consumed.", false, false},
		{EF005, "The single-use authority was already consumed.", false, false},
		{EF040, "The authority was issued for a different finality sink.", false, false},
		{EF060, "Validation timed out; the tool was not invoked.", true, false},
		{EFScopeMismatch, "Live arguments are not the authorized digest.", false, false},
		{EFDestinationMismatch, "The live destination is not the authorized destination.", false, false},
		{EFInstructionProvenanceFailure, "The instruction provenance does not permit this act.", false, false},
		{EFActInvalid, "The tool call could not be mapped to a valid candidate act.", false, true},
		{EFEscalationRequired, "This tool requires a human decision before it can run.", false, true},
		{EFPolicyDenied, "Policy does not permit this act.", false, true},
		{EFRateLimited, "The rule's rate limit allows no more calls now; the tool was not invoked. Retry later.", false, true},
		{EFBudgetExceeded, "The call would pass a budget of its rule in the current window; the tool was not invoked.", false, true},
		{EFBudgetLimit, "The call's budget cannot be charged: its amount or key is not readable, or the budget's ledger is full; the tool was not invoked.", false, true},
		{EFPolicyUnavailable, "No current policy governs this sink; the tool was not invoked.", false, true},
		{EFUnknownTool, "The tool is not declared for this protected server.", false, true},
		{EFArgumentsOutOfProfile, "The arguments cannot be bound to a human decision: outside the strict canonical profile.", false, true},
		{EFStoreUnavailable, "The authority store is unavailable; the tool was not invoked.", false, true},
		{EFIndeterminate, "An earlier dispatch of this action has an unknown outcome; it will not be invoked again.", false, true},
		{EFMomentDeclined, "A principal declined this action; it needs a new binding moment.", false, true},
		{EFMomentInvalid, "The binding moment was refused.", false, true},
		{EFUpstreamRedirect, "The upstream answered with a redirect, which is never followed; the call did not run.", false, true},
		{EFUpstreamIDPUnavailable, "No credential for the upstream could be obtained from the identity provider; the call was not sent.", false, true},
		{EFAgentUnauthenticated, "The request does not carry a configured agent's credential.", false, true},
		{EFAgentIDPUnavailable, "The identity provider's keys are unavailable, so the agent's token cannot be verified; nothing was read.", false, true},
		{EFSessionLimit, "The gate holds as many agent sessions as it allows; no session was opened.", false, true},
		{EFMomentLimit, "Too many binding moments are pending for this agent or session; nothing was registered or invoked.", false, true},
		{EFMCPHeaderMismatch, "The request's MCP headers do not match its body; nothing was decided or relayed.", false, true},
		{EFTaskLimit, "Too many tasks of dispatched calls are running in this session (on MCP 2026-07-28: of this agent), " +
			"or too many tasks this agent created are remembered; the call was not invoked.", false, true},
		{EFInputLimit, "Too many requests of this agent await its input; the request was not decided or sent.", false, true},
		{EFContinuationInvalid, "The continuation does not continue a request awaiting this agent's input with the same arguments; nothing was sent.", false, true},
		{EFListenInvalid, "The subscription request's notification filter is not well formed; no subscription was opened.", false, true},
		{EFListenLimit, "Too many subscriptions are open for this agent, or the subscription names too many resources; none was opened.", false, true},
		{EFEventIDInvalid, "The Last-Event-ID is not an event id the gate accepts; nothing was resumed.", false, true},
		{EFHostRefused, "The request's Host or Origin is not the gate's loopback address; nothing was read or relayed.", false, true},
		{EFNotificationInvalid, "The notification is not one a client may send in this protocol revision; nothing was decided or relayed.", false, true},
		{EFStreamLogLimit, "The stream can no longer be resumed: the gate dropped its events at its memory bounds; nothing was resumed.", false, true},
		{EFToolChanged, "The tool's definition is not the one the policy pins; it was not invoked until an operator accepts the change.", false, true},
	}
}

// All returns every known code's Info, spec codes first.
func All() []Info { return all() }

// Lookup returns the Info for a code, accepting the binding's "EF-060" spelling for "EF_060".
func Lookup(s string) (Info, bool) {
	norm := EFCode(strings.ReplaceAll(s, "-", "_"))
	for _, i := range all() {
		if i.Code == norm {
			return i, true
		}
	}
	return Info{}, false
}

// Known reports whether c is a code of this package.
func (c EFCode) Known() bool {
	_, ok := Lookup(string(c))
	return ok
}

// Retryable reports whether a deny with this code may be retried (validation only, §23). Unknown
// codes are not retryable.
func (c EFCode) Retryable() bool {
	i, ok := Lookup(string(c))
	return ok && i.Retryable
}

// Description returns the data-free description of c, or "" for an unknown code.
func (c EFCode) Description() string {
	i, _ := Lookup(string(c))
	return i.Description
}
