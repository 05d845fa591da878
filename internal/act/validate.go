package act

import (
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/jcs"
)

// Bounds applied by Validate. They keep an act small enough to journal and log, and every
// number inside the strict JCS profile.
const (
	// MaxTTL bounds expires_at - created_at. A candidate act is a pending call, not a standing
	// grant; a longer wait is a new act (tool-use-binding §9: retry is a new act).
	MaxTTL = 24 * time.Hour
	// MaxToolNameBytes bounds tool.tool_id and tool.function_id.
	MaxToolNameBytes = 256
	// MaxIDBytes bounds identifiers (principal, agent, sink, session, act id).
	MaxIDBytes = 256
	// MaxLocatorBytes bounds tool_endpoint and destination_id (URLs).
	MaxLocatorBytes = 2048
	// MaxTextBytes bounds free text (declared_purpose).
	MaxTextBytes = 1024
)

// Validate checks every member of the act against tool-use-binding §10 and actgate's bounds.
// Adapters and ParseCandidateAct run it before returning an act; an act that fails it is never
// returned. It does not check expiry against a clock (the authority does) nor the id's session
// binding (IDIssuer.CheckSession does).
func (a *AgentCandidateAct) Validate() error {
	if a.Version != Version {
		return newErr(CodeFieldInvalid, "version", "must be "+strconv.Quote(Version))
	}
	if a.ObjectType != ObjectType {
		return newErr(CodeFieldInvalid, "object_type", "must be "+strconv.Quote(ObjectType))
	}
	if err := checkID("candidate_act_id", a.CandidateActID); err != nil {
		return err
	}
	if !a.ActType.Valid() {
		return newErr(CodeEnumInvalid, "act_type", "not in the act_type enum")
	}
	if a.CreatedAt.IsZero() {
		return newErr(CodeFieldInvalid, "created_at", "missing")
	}
	if !a.ExpiresAt.After(a.CreatedAt) {
		return newErr(CodeFieldInvalid, "expires_at", "must be after created_at")
	}
	if a.ExpiresAt.Sub(a.CreatedAt) > MaxTTL {
		return newErr(CodeFieldInvalid, "expires_at", "more than MaxTTL after created_at")
	}
	if err := checkID("initiating_principal.principal_id", a.InitiatingPrincipal.PrincipalID); err != nil {
		return err
	}
	if err := checkOptText("initiating_principal.principal_type", a.InitiatingPrincipal.PrincipalType, MaxIDBytes); err != nil {
		return err
	}
	if err := checkID("agent.agent_id", a.Agent.AgentID); err != nil {
		return err
	}
	if err := checkOptText("agent.runtime_id", a.Agent.RuntimeID, MaxIDBytes); err != nil {
		return err
	}
	if err := checkOptText("agent.model_id", a.Agent.ModelID, MaxIDBytes); err != nil {
		return err
	}
	if err := checkEpoch("agent.delegation_depth", a.Agent.DelegationDepth); err != nil {
		return err
	}
	if err := CheckToolName("tool.tool_id", a.Tool.ToolID); err != nil {
		return err
	}
	if err := CheckToolName("tool.function_id", a.Tool.FunctionID); err != nil {
		return err
	}
	if a.Tool.ToolEndpoint != "" {
		if err := checkToken("tool.tool_endpoint", a.Tool.ToolEndpoint, MaxLocatorBytes); err != nil {
			return err
		}
	}
	if a.Tool.ToolProtocol != "" && !a.Tool.ToolProtocol.Valid() {
		return newErr(CodeEnumInvalid, "tool.tool_protocol", "not in the tool_protocol enum")
	}
	if err := checkID("purpose.purpose_id", a.Purpose.PurposeID); err != nil {
		return err
	}
	if err := checkOptText("purpose.declared_purpose", a.Purpose.DeclaredPurpose, MaxTextBytes); err != nil {
		return err
	}
	d := a.ArgumentsDigest
	if d.Algorithm != AlgorithmSHA256 {
		return newErr(CodeFieldInvalid, "arguments_digest.algorithm", "must be "+strconv.Quote(AlgorithmSHA256))
	}
	if !d.Canonicalization.Valid() {
		return newErr(CodeEnumInvalid, "arguments_digest.canonicalization", `must be "JCS" or "JCS-STRICT"`)
	}
	if d.Material != MaterialToolCallV1 {
		return newErr(CodeFieldInvalid, "arguments_digest.material", "must be "+strconv.Quote(MaterialToolCallV1))
	}
	if !jcs.IsDigest(d.Value) {
		return newErr(CodeFieldInvalid, "arguments_digest.value", `must be "sha256:" + 64 lowercase hex`)
	}
	if a.Destination != nil {
		if err := checkToken("destination.destination_id", a.Destination.DestinationID, MaxLocatorBytes); err != nil {
			return err
		}
	}
	if !a.ConsequenceClass.Valid() {
		return newErr(CodeEnumInvalid, "consequence_class", "not in the consequence_class enum")
	}
	for _, e := range []struct {
		field string
		v     int64
	}{
		{"policy_state.policy_epoch", a.PolicyState.PolicyEpoch},
		{"policy_state.authority_epoch", a.PolicyState.AuthorityEpoch},
		{"policy_state.revocation_epoch", a.PolicyState.RevocationEpoch},
	} {
		if err := checkEpoch(e.field, e.v); err != nil {
			return err
		}
	}
	if err := checkNonce("freshness.nonce", a.Freshness.Nonce); err != nil {
		return err
	}
	if err := checkID("freshness.session_id", a.Freshness.SessionID); err != nil {
		return err
	}
	if a.InstructionProvenance != nil && !a.InstructionProvenance.SourceType.Valid() {
		return newErr(CodeEnumInvalid, "instruction_provenance.source_type", "must be user, retrieval, tool or unknown")
	}
	if err := checkID("finality_sink.sink_id", a.FinalitySink.SinkID); err != nil {
		return err
	}
	if !a.FinalitySink.SinkType.Valid() {
		return newErr(CodeEnumInvalid, "finality_sink.sink_type", "must be TOOL_DISPATCH or BROWSER_CONTROLLER")
	}
	return nil
}

// CheckToolName refuses a tool name that two readers could see differently: empty, longer than
// MaxToolNameBytes, invalid UTF-8, or holding a space, control or invisible format character
// (tool-name confusion, tool-use-binding §24 T6). It does not restrict the name further: MCP
// names may hold dots and slashes.
func CheckToolName(field, name string) error {
	if name == "" {
		return newErr(CodeToolNameInvalid, field, "empty")
	}
	if len(name) > MaxToolNameBytes {
		return newErr(CodeToolNameInvalid, field, "longer than "+strconv.Itoa(MaxToolNameBytes)+" bytes")
	}
	if !utf8.ValidString(name) {
		return newErr(CodeToolNameInvalid, field, "invalid UTF-8")
	}
	for _, r := range name {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return newErr(CodeToolNameInvalid, field, "holds a space, control or format character")
		}
	}
	return nil
}

// checkID: a non-empty identifier of visible characters without spaces.
func checkID(field, s string) error {
	if s == "" {
		return newErr(CodeFieldInvalid, field, "empty")
	}
	return checkToken(field, s, MaxIDBytes)
}

// checkToken: non-empty, bounded, valid UTF-8, graphic and no spaces.
func checkToken(field, s string, max int) error {
	if s == "" {
		return newErr(CodeFieldInvalid, field, "empty")
	}
	if len(s) > max {
		return newErr(CodeFieldInvalid, field, "longer than "+strconv.Itoa(max)+" bytes")
	}
	// ASCII fast path (ids, names and URLs on the hot path are ASCII): among bytes below
	// 0x80, exactly '!'..'~' are graphic and not spaces. A string with any other byte takes
	// the rune-by-rune check below, which gives the same answer for the ASCII part.
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii {
		return nil
	}
	if !utf8.ValidString(s) {
		return newErr(CodeFieldInvalid, field, "invalid UTF-8")
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return newErr(CodeFieldInvalid, field, "holds a space, control or format character")
		}
	}
	return nil
}

// checkOptText: optional free text; bounded, valid UTF-8, no control or format characters.
func checkOptText(field, s string, max int) error {
	if len(s) > max {
		return newErr(CodeFieldInvalid, field, "longer than "+strconv.Itoa(max)+" bytes")
	}
	ascii := true // among bytes below 0x80, exactly ' '..'~' are graphic
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii {
		return nil
	}
	if !utf8.ValidString(s) {
		return newErr(CodeFieldInvalid, field, "invalid UTF-8")
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return newErr(CodeFieldInvalid, field, "holds a control or format character")
		}
	}
	return nil
}

func checkEpoch(field string, v int64) error {
	if v < 0 || v > jcs.MaxSafeInteger {
		return newErr(CodeFieldInvalid, field, "must be within 0..2^53-1")
	}
	return nil
}

// checkNonce: 16..128 hexadecimal characters (the §17 example prints upper-case hex; the issuer
// here writes 32 lower-case).
func checkNonce(field, s string) error {
	if len(s) < 16 || len(s) > 128 {
		return newErr(CodeFieldInvalid, field, "must be 16..128 hex characters")
	}
	for i := 0; i < len(s); i++ {
		if !hexDigit[s[i]] {
			return newErr(CodeFieldInvalid, field, "must be hexadecimal")
		}
	}
	return nil
}

var hexDigit = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEF" {
		t[c] = true
	}
	return t
}()
