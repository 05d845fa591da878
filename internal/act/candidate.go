package act

import (
	"encoding/json"
	"time"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

// DefaultMaxInputBytes bounds a vendor envelope when MappingContext.MaxInputBytes is zero.
const DefaultMaxInputBytes = 4 << 20

// DefaultPurposeID is purpose.purpose_id when the host supplies none: the act says honestly
// that nobody declared one.
const DefaultPurposeID = "unspecified"

// Vendor names the wire shape a call came from.
type Vendor string

// The shapes the adapters read.
const (
	VendorAnthropic       Vendor = "anthropic"        // Messages API content[type=tool_use]
	VendorOpenAIChat      Vendor = "openai-chat"      // Chat Completions tool_calls[]
	VendorOpenAIResponses Vendor = "openai-responses" // Responses API function_call items
	VendorMCP             Vendor = "mcp"              // JSON-RPC tools/call
)

// ServerIdentity names the server a call is dispatched to. For MCP it is required: server
// identity MUST enter destination or tool.tool_endpoint so a swapped server with the same tool
// name fails the destination match (tool-use-binding §8, §12 MCP_SERVER_SWAP).
type ServerIdentity struct {
	Name string // the server's configured name (e.g. the ToolPolicy's server name)
	URL  string // its URL; preferred over Name when set
}

// ID is the identity written into the act: the URL if set, else the name.
func (s ServerIdentity) ID() string {
	if s.URL != "" {
		return s.URL
	}
	return s.Name
}

// MappingContext is what the host knows and the block does not: it is never taken from the
// model's output. Every adapter takes one.
type MappingContext struct {
	// SessionID is the host session; bound into the act id and freshness.session_id. Required.
	SessionID string
	// Principal is the initiating principal (a Kubernetes user, a workspace org). Required.
	Principal Principal
	// Agent identifies the agent. AgentID required; ModelID is filled from the message's
	// "model" member by the message-level adapters when empty (tool-use-binding §11).
	Agent Agent
	// Server is the tool server; required by the MCP adapter. When set for the other adapters,
	// the tool is dispatched to that MCP server.
	Server ServerIdentity
	// Destination overrides destination.destination_id (e.g. an SMTP gateway or a GPT Action
	// server URL, tool-use-binding §7, §17). Defaults to Server.ID(). For computer-use and
	// browser acts the host sets it to the focused origin, so that an origin change is a
	// destination mismatch (§12 COMPUTER_USE_ORIGIN_CHANGE; latest draft: "Origin change MUST
	// invalidate prior authority").
	Destination string
	// ToolProtocol overrides tool.tool_protocol. Default: MCP when Server is set, else
	// LOCAL_FUNCTION (tool-use-binding §6). HTTP_API makes the act an API_REQUEST (§7).
	ToolProtocol ToolProtocol
	// SinkID is the finality sink that must verify and consume. Required.
	SinkID string
	// PolicyState holds the epochs in force when the act is built.
	PolicyState PolicyState
	// Purpose defaults to purpose_id DefaultPurposeID.
	Purpose Purpose
	// Provenance is what the host can attest about the instruction; default SourceUnknown
	// (tool-use-binding §24: provenance unknown plus a high class escalates).
	Provenance SourceType
	// Now is the clock. Required.
	Now func() time.Time
	// TTL is expires_at - created_at; within (0, MaxTTL]. Required.
	TTL time.Duration
	// IDs mints the act id and nonce. Required.
	IDs *IDIssuer
	// MaxInputBytes bounds a vendor envelope; 0 means DefaultMaxInputBytes.
	MaxInputBytes int
}

func (mc *MappingContext) check() error {
	bad := func(field, detail string) error { return newErr(CodeContextInvalid, field, detail) }
	switch {
	case checkID("session_id", mc.SessionID) != nil:
		return bad("SessionID", "empty or not an identifier")
	case checkID("principal", mc.Principal.PrincipalID) != nil:
		return bad("Principal.PrincipalID", "empty or not an identifier")
	case checkID("agent", mc.Agent.AgentID) != nil:
		return bad("Agent.AgentID", "empty or not an identifier")
	case checkID("sink", mc.SinkID) != nil:
		return bad("SinkID", "empty or not an identifier")
	case mc.Now == nil:
		return bad("Now", "no clock")
	case mc.TTL <= 0 || mc.TTL > MaxTTL:
		return bad("TTL", "must be within (0, MaxTTL]")
	case mc.IDs == nil:
		return bad("IDs", "no id issuer")
	case mc.ToolProtocol != "" && !mc.ToolProtocol.Valid():
		return bad("ToolProtocol", "not in the tool_protocol enum")
	case mc.Provenance != "" && !mc.Provenance.Valid():
		return bad("Provenance", "not a source type")
	case mc.MaxInputBytes < 0:
		return bad("MaxInputBytes", "negative")
	}
	return nil
}

func (mc *MappingContext) maxInput() int {
	if mc.MaxInputBytes > 0 {
		return mc.MaxInputBytes
	}
	return DefaultMaxInputBytes
}

// Input is one finalized tool call, already lifted out of its vendor shape. The adapters build
// it; a proxy that has parsed the transport itself (e.g. the MCP SDK's CallToolParamsRaw) may
// build it directly and call NewCandidate.
type Input struct {
	Vendor Vendor
	// VendorID is the vendor's id for the call: toolu_*, call_*, a Responses call_id, or the
	// JSON text of an MCP JSON-RPC id. It addresses the result; it is never authority and never
	// the act id.
	VendorID string
	// ToolName is the name the model called.
	ToolName string
	// Arguments is the JSON text of the arguments object, not yet canonicalized.
	Arguments json.RawMessage
}

// Candidate is a non-effective act with what the sink needs beside it. Holding one permits
// nothing: it is HOLD_NON_EFFECTIVE (tool-use-binding §14 step 5).
type Candidate struct {
	Act AgentCandidateAct
	// Arguments are the RFC 8785 canonical bytes of the arguments object: what the sink
	// forwards upstream, and what ActionDigest and ArgumentsDigest are computed over.
	Arguments json.RawMessage
	Vendor    Vendor
	// VendorID addresses the vendor-shaped result (see Input.VendorID).
	VendorID string

	argsDigest string // jcs.Digest(Arguments), computed once by NewCandidate
}

// ActionDigest is the act's arguments binding: the digest of the canonical action object
// {"tool": tool_id, "args": arguments} (docs/architecture.md "The action an option authorises");
// equal to Act.ArgumentsDigest.Value and to a binding-moment option's action_digest for the same
// call.
func (c *Candidate) ActionDigest() string { return c.Act.ArgumentsDigest.Value }

// ArgumentsDigest is the digest of the canonical arguments alone: tool-use-binding §6's
// "hash of JCS(input)", for comparison with implementations that bind the arguments only.
func (c *Candidate) ArgumentsDigest() string {
	if c.argsDigest != "" {
		return c.argsDigest
	}
	return jcs.Digest(c.Arguments)
}

// Strict reports whether the arguments are within the strict JCS profile, i.e. may be bound to
// a human decision (docs/architecture.md "Digests").
func (c *Candidate) Strict() bool {
	return c.Act.ArgumentsDigest.Canonicalization == CanonicalizationJCSStrict
}

// NewCandidate canonicalizes the arguments, computes the action digest, infers act_type, sink
// type and consequence class, mints a session-bound id and returns a validated Candidate. It
// never returns a Candidate with an error.
func NewCandidate(in Input, mc MappingContext) (*Candidate, error) {
	if err := mc.check(); err != nil {
		return nil, err
	}
	if err := CheckToolName("tool.tool_id", in.ToolName); err != nil {
		return nil, err
	}
	if len(in.Arguments) > mc.maxInput() {
		return nil, newErr(CodeInputTooLarge, "arguments", "larger than the mapping context allows")
	}
	// Strict first: in-profile arguments give the same bytes under both modes, and the act
	// records that they may be bound to a human decision. Out of profile (a non-integer, a
	// number beyond 2^53-1, nesting deeper than 64 counting the action object), full RFC 8785.
	// The arguments are canonicalized once and the action digest is taken over those bytes.
	mode := jcs.Strict
	canon, err := jcs.CanonicalizeNested(in.Arguments, jcs.Strict, 1)
	if code, _ := jcs.CodeOf(err); code == jcs.CodeNumberOutOfProfile || code == jcs.CodeDepthExceeded {
		mode = jcs.Full
		canon, err = jcs.Canonicalize(in.Arguments, jcs.Full)
	}
	if err != nil {
		return nil, jcsErr(CodeArgumentsInvalid, "arguments", err)
	}
	if canon[0] != '{' {
		return nil, newErr(CodeArgumentsInvalid, "arguments", "must be a JSON object")
	}
	digest, err := action.DigestOfCanonical(in.ToolName, canon)
	if err != nil {
		return nil, jcsErr(CodeArgumentsInvalid, "arguments", err)
	}
	canonicalization := CanonicalizationJCS
	if mode == jcs.Strict {
		canonicalization = CanonicalizationJCSStrict
	}

	proto := mc.ToolProtocol
	if proto == "" {
		proto = ProtocolLocalFunction
		if mc.Server.ID() != "" {
			proto = ProtocolMCP
		}
	}
	actType := inferActType(in.ToolName, proto)
	class := DefaultClass(in.ToolName)
	if actType == ActComputerUse {
		class = computerActionClass(canon)
	}
	id, err := mc.IDs.New(mc.SessionID)
	if err != nil {
		return nil, err
	}
	nonce, err := mc.IDs.Nonce()
	if err != nil {
		return nil, err
	}
	now := mc.Now().UTC().Truncate(time.Millisecond)
	purpose := mc.Purpose
	if purpose.PurposeID == "" {
		purpose.PurposeID = DefaultPurposeID
	}
	prov := mc.Provenance
	if prov == "" {
		prov = SourceUnknown
	}
	a := AgentCandidateAct{
		Version:             Version,
		ObjectType:          ObjectType,
		CandidateActID:      id,
		ActType:             actType,
		CreatedAt:           now,
		ExpiresAt:           now.Add(mc.TTL),
		InitiatingPrincipal: mc.Principal,
		Agent:               mc.Agent,
		Tool: Tool{
			ToolID:       in.ToolName,
			FunctionID:   in.ToolName,
			ToolEndpoint: mc.Server.ID(),
			ToolProtocol: proto,
		},
		Purpose: purpose,
		ArgumentsDigest: ArgumentsDigest{
			Algorithm:        AlgorithmSHA256,
			Canonicalization: canonicalization,
			Material:         MaterialToolCallV1,
			Value:            digest,
		},
		ConsequenceClass:      class,
		PolicyState:           mc.PolicyState,
		Freshness:             Freshness{Nonce: nonce, SessionID: mc.SessionID},
		InstructionProvenance: &InstructionProvenance{SourceType: prov},
		FinalitySink:          FinalitySink{SinkID: mc.SinkID, SinkType: sinkTypeFor(actType)},
	}
	if dest := firstNonEmpty(mc.Destination, mc.Server.ID()); dest != "" {
		a.Destination = &Destination{DestinationID: dest}
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &Candidate{Act: a, Arguments: canon, Vendor: in.Vendor, VendorID: in.VendorID, argsDigest: jcs.Digest(canon)}, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Item is one call of a multi-call message: its position, its vendor id (when it could be
// read) and either a Candidate or the error that keeps it non-effective. Parallel calls are
// separate acts (tool-use-binding §7, §9, §27.3): one Item's Candidate authorises nothing for
// its siblings, and an error in one leaves the others as they are.
type Item struct {
	Index     int
	VendorID  string
	Candidate *Candidate
	Err       error
}
