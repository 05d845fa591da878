package act

import (
	"encoding/json"
	"errors"
	"sort"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

// MaxActBytes bounds the serialized act ParseCandidateAct accepts. Acts carry digests, not
// arguments, so they are small.
const MaxActBytes = 64 << 10

// shape lists the members an object may hold: the schema's required list, the optional members
// actgate emits, and the object-valued members with their own shapes.
type shape struct {
	required []string
	optional []string
	nested   map[string]shape
}

// actShape is tool-use-binding §10's required list plus the optional members of the §17
// example (destination, instruction_provenance). The recalled schema in §10 prints properties
// only for act_type, tool and consequence_class; read literally, additionalProperties: false
// would then forbid its own required members, so the allowed set is taken as required ∪ the
// members §17 shows. The nested objects are closed too: actgate emits exactly these members,
// and an unknown one is either a newer version or tampering, and both fail closed.
func actShape() shape {
	return shape{
		required: []string{
			"version", "object_type", "candidate_act_id", "act_type",
			"created_at", "expires_at", "initiating_principal", "agent",
			"tool", "purpose", "arguments_digest", "consequence_class",
			"policy_state", "freshness", "finality_sink",
		},
		optional: []string{"destination", "instruction_provenance"},
		nested: map[string]shape{
			"initiating_principal":   {required: []string{"principal_id"}, optional: []string{"principal_type"}},
			"agent":                  {required: []string{"agent_id"}, optional: []string{"runtime_id", "model_id", "delegation_depth"}},
			"tool":                   {required: []string{"tool_id", "function_id"}, optional: []string{"tool_endpoint", "tool_protocol"}},
			"purpose":                {required: []string{"purpose_id"}, optional: []string{"declared_purpose"}},
			"arguments_digest":       {required: []string{"algorithm", "canonicalization", "material", "value"}},
			"destination":            {required: []string{"destination_id"}},
			"policy_state":           {required: []string{"policy_epoch", "authority_epoch", "revocation_epoch"}},
			"freshness":              {required: []string{"nonce", "session_id"}},
			"instruction_provenance": {required: []string{"source_type"}},
			"finality_sink":          {required: []string{"sink_id", "sink_type"}},
		},
	}
}

// ParseCandidateAct reads an act from bytes (e.g. an ActReview from a sidecar). It refuses
// input that is not strict-profile JSON (duplicate members, non-integer numbers...), any member
// the schema does not allow, any missing required member, null values and wrong JSON types,
// each with a stable Code, and then runs Validate. It never returns a partial act.
func ParseCandidateAct(raw []byte) (*AgentCandidateAct, error) {
	if len(raw) > MaxActBytes {
		return nil, newErr(CodeInputTooLarge, "", "act larger than MaxActBytes")
	}
	canon, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return nil, jcsErr(CodeInputInvalid, "", err)
	}
	if err := checkShape("", canon, actShape()); err != nil {
		return nil, err
	}
	var a AgentCandidateAct
	if err := json.Unmarshal(canon, &a); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		return nil, &Error{Code: CodeSchemaType, Field: field, Detail: "wrong JSON type or format", Err: err}
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &a, nil
}

// checkShape enforces s on the canonical object raw. Keys are compared exactly (encoding/json
// matches struct fields case-insensitively, so it cannot be trusted to spot "Tool" beside
// "tool"); duplicates were already refused by the canonicalizer.
func checkShape(path string, raw json.RawMessage, s shape) error {
	if len(raw) == 0 || raw[0] != '{' {
		return newErr(CodeSchemaType, pathOr(path), "must be an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return &Error{Code: CodeSchemaType, Field: pathOr(path), Detail: "must be an object", Err: err}
	}
	allowed := make(map[string]bool, len(s.required)+len(s.optional))
	for _, k := range s.required {
		allowed[k] = true
	}
	for _, k := range s.optional {
		allowed[k] = true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !allowed[k] {
			return newErr(CodeUnknownMember, join(path, k), "not allowed (additionalProperties: false)")
		}
		if string(m[k]) == "null" {
			return newErr(CodeSchemaType, join(path, k), "must not be null")
		}
	}
	for _, k := range s.required {
		if _, ok := m[k]; !ok {
			return newErr(CodeMissingMember, join(path, k), "required")
		}
	}
	for _, k := range keys {
		if ns, ok := s.nested[k]; ok {
			if err := checkShape(join(path, k), m[k], ns); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func pathOr(path string) string {
	if path == "" {
		return "$"
	}
	return path
}

// Canonical returns the act's canonical bytes (RFC 8785, strict profile).
func (a *AgentCandidateAct) Canonical() ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return jcs.Canonicalize(b, jcs.Strict)
}

// Digest returns "sha256:" + hex of the act's canonical bytes: what a receipt or journal entry
// names the act by.
func (a *AgentCandidateAct) Digest() (string, error) {
	c, err := a.Canonical()
	if err != nil {
		return "", err
	}
	return jcs.Digest(c), nil
}

// MatchArguments recomputes the arguments digest from live arguments with the act's own
// canonicalization and material, and refuses on any difference (tool-use-binding §16 MUST 1–2).
// A sink calls it with the arguments it is about to send, never with a digest the agent carried.
func (a *AgentCandidateAct) MatchArguments(live json.RawMessage) error {
	d, err := action.Digest(a.Tool.ToolID, live, a.ArgumentsDigest.Canonicalization.Mode())
	if err != nil {
		return jcsErr(CodeArgumentsInvalid, "arguments", err)
	}
	if d != a.ArgumentsDigest.Value {
		return newErr(CodeDigestMismatch, "arguments", "live arguments are not the act's digest")
	}
	return nil
}
