// Package act turns a tool call printed by a model into an AgentCandidateAct: the
// non-effective act of tool-use-binding §10/§17 that the sink enforces before anything runs.
//
// # Adapters
//
// One pure function per vendor shape, each taking the block's bytes and a MappingContext (what
// the host knows and the block does not: session, principal, agent, server, sink, epochs,
// clock, TTL, id issuer):
//
//   - MapAnthropicToolUse / MapAnthropicMessage: Messages API content[type=tool_use] (§6)
//   - MapOpenAIToolCall / MapOpenAIToolCalls: Chat Completions tool_calls[] (§7)
//   - MapResponsesFunctionCall / MapResponsesOutput: Responses API function_call items (§7, §11)
//   - MapMCPToolsCall: MCP JSON-RPC tools/call (§8)
//
// The message-level functions return one Item per call: parallel calls are separate acts, each
// with its own id, and one allowed sibling authorises nothing for another (§9, §27.3). Bad
// input gives an *Error with a stable Code (ACT_*), never a panic and never an act. Vendor
// envelopes are canonicalized (RFC 8785) before they are read, so duplicate member names,
// invalid UTF-8 and unpaired surrogates are refused rather than resolved one way here and
// another way in the tool.
//
// # Which bytes the arguments digest covers
//
// arguments_digest.value is the digest of the canonical action object
//
//	JCS({"tool": tool.tool_id, "args": <arguments object>})   →   "sha256:" + 64 hex
//
// (EP-TOOL-CALL-BINDING-v1, conformance/tool-call-binding.v1.json), computed by
// internal/action. docs/architecture.md "The action an option authorises" makes that the act's
// arguments binding so that it equals a binding-moment option's action_digest for the same
// call, and it binds the tool name as well as the arguments. tool-use-binding §6 permits this
// ("hash of JCS(input) or documented canonical JSON") and §27.2 asks for a deterministic
// representation of the load-bearing attributes; the act says so itself in
// arguments_digest.material = "EP-TOOL-CALL-BINDING-v1". The digest of the arguments alone,
// §6's literal JCS(input), is Candidate.ArgumentsDigest; Candidate.ActionDigest is the binding.
// The canonical argument bytes themselves travel beside the act in Candidate.Arguments, never
// inside it (§29: acts, logs and receipts carry digests).
//
// Arguments are canonicalized in the strict profile (envelope-04 §6.3) when they fit it, and
// the act records arguments_digest.canonicalization "JCS-STRICT"; otherwise full RFC 8785 and
// "JCS". The bytes are the same for in-profile input; the name tells policy whether the act may
// be bound to a human decision (docs/architecture.md "Digests") and tells the sink which mode to
// recompute in (AgentCandidateAct.MatchArguments, §16 MUST 1–2).
//
// # Act ids
//
// candidate_act_id is minted by an IDIssuer as a MAC over the session id, so an id from one
// session is refused in another (§6, §24 T14) without remembering anything; see IDIssuer.
//
// # Consequence classes
//
// DefaultClass holds the §20 table; see its documentation for the variants matched and why an
// unknown tool is PERSISTENT_STATE_CHANGE. act_type is TOOL_CALL except for the computer-use
// family (COMPUTER_USE, sink BROWSER_CONTROLLER), browser tools, memory writes (§21), shells
// and HTTP API actions.
//
// # Denies
//
// deny.go renders a deny in each vendor's shape — Anthropic tool_result with is_error,
// Chat tool message, Responses function_call_output, MCP CallToolResult with isError — each
// carrying the §17 error object with the EF code of package ef and nothing else of the call.
package act
