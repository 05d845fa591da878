package act

import (
	"time"

	"github.com/actgate/actgate/internal/jcs"
)

// Version and ObjectType are the fixed values of the act's "version" and "object_type"
// members (tool-use-binding §17).
const (
	Version    = "1.0"
	ObjectType = "agent_candidate_act"
)

// ActType is the act's "act_type" (tool-use-binding §10).
type ActType string

// The act_type enum of tool-use-binding §10.
const (
	ActToolCall        ActType = "TOOL_CALL"
	ActFunctionCall    ActType = "FUNCTION_CALL"
	ActAPIRequest      ActType = "API_REQUEST"
	ActBrowserAction   ActType = "BROWSER_ACTION"
	ActShellAction     ActType = "SHELL_ACTION"
	ActMessageSend     ActType = "MESSAGE_SEND"
	ActFileWrite       ActType = "FILE_WRITE"
	ActMemoryWrite     ActType = "MEMORY_WRITE"
	ActAgentDelegation ActType = "AGENT_DELEGATION"
	ActPaymentRequest  ActType = "PAYMENT_REQUEST"
	ActComputerUse     ActType = "COMPUTER_USE"
	ActOther           ActType = "OTHER"
)

// Valid reports whether t is in the §10 enum.
func (t ActType) Valid() bool {
	switch t {
	case ActToolCall, ActFunctionCall, ActAPIRequest, ActBrowserAction, ActShellAction,
		ActMessageSend, ActFileWrite, ActMemoryWrite, ActAgentDelegation, ActPaymentRequest,
		ActComputerUse, ActOther:
		return true
	}
	return false
}

// ToolProtocol is "tool.tool_protocol" (tool-use-binding §10).
type ToolProtocol string

// The tool_protocol enum of tool-use-binding §10.
const (
	ProtocolMCP              ToolProtocol = "MCP"
	ProtocolHTTPAPI          ToolProtocol = "HTTP_API"
	ProtocolLocalFunction    ToolProtocol = "LOCAL_FUNCTION"
	ProtocolBrowser          ToolProtocol = "BROWSER"
	ProtocolShell            ToolProtocol = "SHELL"
	ProtocolA2A              ToolProtocol = "A2A"
	ProtocolAnthropicToolUse ToolProtocol = "ANTHROPIC_TOOL_USE"
	ProtocolOpenAIToolCall   ToolProtocol = "OPENAI_TOOL_CALL"
	ProtocolOther            ToolProtocol = "OTHER"
)

// Valid reports whether p is in the §10 enum.
func (p ToolProtocol) Valid() bool {
	switch p {
	case ProtocolMCP, ProtocolHTTPAPI, ProtocolLocalFunction, ProtocolBrowser, ProtocolShell,
		ProtocolA2A, ProtocolAnthropicToolUse, ProtocolOpenAIToolCall, ProtocolOther:
		return true
	}
	return false
}

// ConsequenceClass is "consequence_class" (tool-use-binding §10, defaults in §20).
type ConsequenceClass string

// The consequence_class enum of tool-use-binding §10.
const (
	ClassInformational         ConsequenceClass = "INFORMATIONAL"
	ClassDataDisclosure        ConsequenceClass = "DATA_DISCLOSURE"
	ClassPersistentStateChange ConsequenceClass = "PERSISTENT_STATE_CHANGE"
	ClassFinancial             ConsequenceClass = "FINANCIAL"
	ClassNetworkControl        ConsequenceClass = "NETWORK_CONTROL"
	ClassPhysical              ConsequenceClass = "PHYSICAL"
	ClassCommunication         ConsequenceClass = "COMMUNICATION"
	ClassOther                 ConsequenceClass = "OTHER"
)

// Valid reports whether c is in the §10 enum.
func (c ConsequenceClass) Valid() bool {
	switch c {
	case ClassInformational, ClassDataDisclosure, ClassPersistentStateChange, ClassFinancial,
		ClassNetworkControl, ClassPhysical, ClassCommunication, ClassOther:
		return true
	}
	return false
}

// SinkType is "finality_sink.sink_type". The binding names two (tool-use-binding §6, §11).
type SinkType string

// Sink types named by tool-use-binding §6.
const (
	SinkToolDispatch      SinkType = "TOOL_DISPATCH"
	SinkBrowserController SinkType = "BROWSER_CONTROLLER"
)

// Valid reports whether s is a sink type the binding names.
func (s SinkType) Valid() bool { return s == SinkToolDispatch || s == SinkBrowserController }

// SourceType is "instruction_provenance.source_type": what the host can attest about where the
// instruction that produced the call came from (tool-use-binding §6).
type SourceType string

// The source types of tool-use-binding §6.
const (
	SourceUser      SourceType = "user"
	SourceRetrieval SourceType = "retrieval"
	SourceTool      SourceType = "tool"
	SourceUnknown   SourceType = "unknown"
)

// Valid reports whether s is one of the §6 source types.
func (s SourceType) Valid() bool {
	switch s {
	case SourceUser, SourceRetrieval, SourceTool, SourceUnknown:
		return true
	}
	return false
}

// Canonicalization names how the arguments were canonicalized before hashing.
type Canonicalization string

const (
	// CanonicalizationJCS is RFC 8785 over I-JSON with full number formatting: the arguments
	// hold a non-integer or a number beyond 2^53-1, or nest deeper than 64. Such an act cannot be
	// bound to a human decision (docs/architecture.md "Digests"); machine-only policy may still
	// allow it.
	CanonicalizationJCS Canonicalization = "JCS"
	// CanonicalizationJCSStrict is RFC 8785 within the strict profile of
	// binding-moment-envelope-04 §6.3. Canonical bytes are identical to CanonicalizationJCS for
	// such input; the name records that the arguments may be bound to a human decision, and a
	// verifier recomputes in strict mode.
	CanonicalizationJCSStrict Canonicalization = "JCS-STRICT"
)

// Mode is the canonicalizer mode a verifier must recompute with.
func (c Canonicalization) Mode() jcs.Mode {
	if c == CanonicalizationJCSStrict {
		return jcs.Strict
	}
	return jcs.Full
}

// Valid reports whether c is a known canonicalization.
func (c Canonicalization) Valid() bool {
	return c == CanonicalizationJCS || c == CanonicalizationJCSStrict
}

const (
	// AlgorithmSHA256 is arguments_digest.algorithm (tool-use-binding §17).
	AlgorithmSHA256 = "SHA-256"
	// MaterialToolCallV1 is arguments_digest.material: the digest is over the canonical action
	// object {"tool": tool.tool_id, "args": <arguments>} of EP-TOOL-CALL-BINDING-v1, not over
	// the arguments alone. See the package documentation.
	MaterialToolCallV1 = "EP-TOOL-CALL-BINDING-v1"
)

// AgentCandidateAct is the act of tool-use-binding §10 (schema) and §17 (wire example). It is
// closed: ParseCandidateAct refuses any member not declared here (additionalProperties: false).
// Members appear in the order of the §17 example.
type AgentCandidateAct struct {
	// version is "1.0". Required.
	Version string `json:"version"`
	// object_type is "agent_candidate_act". Required.
	ObjectType string `json:"object_type"`
	// candidate_act_id is host-generated and bound to the session (see IDIssuer). Required.
	CandidateActID string `json:"candidate_act_id"`
	// act_type is one of the §10 enum. Required.
	ActType ActType `json:"act_type"`
	// created_at is when the host built the act (RFC 3339, UTC). Required.
	CreatedAt time.Time `json:"created_at"`
	// expires_at bounds how long authority may be issued for the act. Required; after created_at.
	ExpiresAt time.Time `json:"expires_at"`
	// initiating_principal is whom the agent acts for (§11: workspace org). Required.
	InitiatingPrincipal Principal `json:"initiating_principal"`
	// agent identifies the agent that proposed the act. Required.
	Agent Agent `json:"agent"`
	// tool names the tool and how it is reached. Required.
	Tool Tool `json:"tool"`
	// purpose is why the act is proposed. Required.
	Purpose Purpose `json:"purpose"`
	// arguments_digest binds the live arguments. Required.
	ArgumentsDigest ArgumentsDigest `json:"arguments_digest"`
	// destination is where the effect lands (MCP server identity, origin, API server). Optional.
	Destination *Destination `json:"destination,omitempty"`
	// consequence_class is one of the §10 enum (defaults §20). Required.
	ConsequenceClass ConsequenceClass `json:"consequence_class"`
	// policy_state holds the epochs the act was built under. Required.
	PolicyState PolicyState `json:"policy_state"`
	// freshness holds the nonce and the session the act belongs to. Required.
	Freshness Freshness `json:"freshness"`
	// instruction_provenance is what the host can attest about the instruction. Optional.
	InstructionProvenance *InstructionProvenance `json:"instruction_provenance,omitempty"`
	// finality_sink is the sink that must verify and consume authority. Required.
	FinalitySink FinalitySink `json:"finality_sink"`
}

// Principal is initiating_principal. The binding does not print its members; actgate uses an
// object with principal_id (a Kubernetes user name or workspace org, docs/architecture.md
// "Principals").
type Principal struct {
	// principal_id identifies the principal. Required.
	PrincipalID string `json:"principal_id"`
	// principal_type says what kind of principal (e.g. "user", "org"). Optional.
	PrincipalType string `json:"principal_type,omitempty"`
}

// Agent is the act's "agent" (tool-use-binding §17).
type Agent struct {
	// agent_id identifies the agent (e.g. its service account). Required.
	AgentID string `json:"agent_id"`
	// runtime_id names the host loop or sidecar. Optional.
	RuntimeID string `json:"runtime_id,omitempty"`
	// model_id is the model name from the request (§11). Optional.
	ModelID string `json:"model_id,omitempty"`
	// delegation_depth counts agent-to-agent hops; 0 when omitted. Optional.
	DelegationDepth int64 `json:"delegation_depth,omitempty"`
}

// Tool is the act's "tool" (tool-use-binding §10).
type Tool struct {
	// tool_id is the name the model called (§6, §7, §8). Required.
	ToolID string `json:"tool_id"`
	// function_id is the function within the tool; the name again unless the host knows better
	// (§11: a GPT Action operationId). Required.
	FunctionID string `json:"function_id"`
	// tool_endpoint is the server that will run the tool (MCP server URL or name, §8). Optional.
	ToolEndpoint string `json:"tool_endpoint,omitempty"`
	// tool_protocol is how the tool is dispatched. Optional in the schema; always set by adapters.
	ToolProtocol ToolProtocol `json:"tool_protocol,omitempty"`
}

// Purpose is the act's "purpose" (tool-use-binding §17).
type Purpose struct {
	// purpose_id names the purpose. Required.
	PurposeID string `json:"purpose_id"`
	// declared_purpose is a free-text statement. Optional.
	DeclaredPurpose string `json:"declared_purpose,omitempty"`
}

// ArgumentsDigest is the act's "arguments_digest" (tool-use-binding §17).
type ArgumentsDigest struct {
	// algorithm is "SHA-256". Required.
	Algorithm string `json:"algorithm"`
	// canonicalization is "JCS" or "JCS-STRICT". Required.
	Canonicalization Canonicalization `json:"canonicalization"`
	// material is "EP-TOOL-CALL-BINDING-v1": what the digest covers. Required (actgate).
	Material string `json:"material"`
	// value is "sha256:" + 64 lowercase hex of the canonical action object. Required.
	Value string `json:"value"`
}

// Destination is the act's "destination" (tool-use-binding §17).
type Destination struct {
	// destination_id identifies where the effect lands. Required.
	DestinationID string `json:"destination_id"`
}

// PolicyState is the act's "policy_state" (tool-use-binding §17). Epochs are integers within
// 0..2^53-1 so the act stays inside the strict JCS profile.
type PolicyState struct {
	// policy_epoch is the policy generation the act was built under. Required.
	PolicyEpoch int64 `json:"policy_epoch"`
	// authority_epoch is the authority-key generation. Required.
	AuthorityEpoch int64 `json:"authority_epoch"`
	// revocation_epoch is the revocation-list generation. Required.
	RevocationEpoch int64 `json:"revocation_epoch"`
}

// Freshness is the act's "freshness" (tool-use-binding §17; session_id per §11: "Host session
// id → freshness.session_id").
type Freshness struct {
	// nonce is 128 random bits, lowercase hex. Required.
	Nonce string `json:"nonce"`
	// session_id is the host session the act belongs to. Required (actgate: the id is bound to it).
	SessionID string `json:"session_id"`
}

// InstructionProvenance is the act's "instruction_provenance" (tool-use-binding §6, §17).
type InstructionProvenance struct {
	// source_type is user, retrieval, tool or unknown. Required.
	SourceType SourceType `json:"source_type"`
}

// FinalitySink is the act's "finality_sink" (tool-use-binding §17).
type FinalitySink struct {
	// sink_id names the sink that must verify and consume. Required.
	SinkID string `json:"sink_id"`
	// sink_type is TOOL_DISPATCH or BROWSER_CONTROLLER. Required.
	SinkType SinkType `json:"sink_type"`
}
