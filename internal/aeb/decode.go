package aeb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// DecodeCase decodes one AEB-1 case strictly and validates it (ValidateCase). Unlike
// encoding/json's defaults it rejects: unknown keys, keys differing only in case, missing keys,
// duplicate keys, null where a value is required, non-integer numbers, trailing data, invalid
// UTF-8, nesting deeper than 32 and documents over 1 MiB. A schema drift in the vectors is an
// error here, never a silently ignored field. The error is an *InputError with a stable Code.
func DecodeCase(b []byte) (Case, error) {
	if len(b) > maxDocumentBytes {
		return Case{}, inputErr(CodeMaxDocumentBytesExceeded, "$")
	}
	if err := scanStructure(b); err != nil {
		return Case{}, err
	}
	c, err := decodeCase(b, "$")
	if err != nil {
		return Case{}, err
	}
	if err := ValidateCase(c); err != nil {
		return Case{}, err
	}
	return c, nil
}

// UnmarshalJSON makes json.Unmarshal into a Case as strict as DecodeCase.
func (c *Case) UnmarshalJSON(b []byte) error {
	d, err := DecodeCase(b)
	if err != nil {
		return err
	}
	*c = d
	return nil
}

// scanStructure walks the raw tokens once: well-formed JSON, valid UTF-8, one top-level value,
// bounded nesting and no duplicate member names (encoding/json would keep the last one).
func scanStructure(b []byte) error {
	if !utf8.Valid(b) {
		return inputErr(CodeInvalidJSON, "$")
	}
	type frame struct {
		object  bool
		keys    map[string]bool
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	// valueDone marks the end of a value inside the current container.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return &InputError{Code: CodeInvalidJSON, Path: "$", Err: err}
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				top := stack[n-1]
				if top.keys[key] {
					return inputErr(CodeDuplicateKey, "$")
				}
				top.keys[key] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxDepth {
				return inputErr(CodeMaxDepthExceeded, "$")
			}
			obj := tok == json.Delim('{')
			stack = append(stack, &frame{object: obj, keys: map[string]bool{}, wantKey: obj})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		valueDone()
		if len(stack) == 0 {
			break
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return inputErr(CodeInvalidJSON, "$")
	}
	return nil
}

// firstByte returns the first byte of a raw JSON value (encoding/json trims whitespace).
func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isNull(raw json.RawMessage) bool { return firstByte(raw) == 'n' }

// object decodes raw as an object with exactly the given member names, compared byte for byte
// (encoding/json would match "ROLE" to a field tagged "role").
func object(raw json.RawMessage, path string, keys ...string) (map[string]json.RawMessage, error) {
	if firstByte(raw) != '{' {
		return nil, inputErr(CodeInvalidObject, path)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &InputError{Code: CodeInvalidObject, Path: path, Err: err}
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(keys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, inputErr(CodeUnknownKey, path+"."+unknown[0])
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return nil, inputErr(CodeMissingKey, path+"."+k)
		}
	}
	return m, nil
}

func str(raw json.RawMessage, path string) (string, error) {
	var s string
	if firstByte(raw) != '"' {
		return "", inputErr(CodeInvalidString, path)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &InputError{Code: CodeInvalidString, Path: path, Err: err}
	}
	return s, nil
}

func boolean(raw json.RawMessage, path string) (bool, error) {
	var v bool
	if c := firstByte(raw); c != 't' && c != 'f' {
		return false, inputErr(CodeInvalidBoolean, path)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, &InputError{Code: CodeInvalidBoolean, Path: path, Err: err}
	}
	return v, nil
}

// integer accepts only an integer literal: 1.0 and 1e0 are not integers of this format.
func integer(raw json.RawMessage, path string) (int, error) {
	var n json.Number
	if c := firstByte(raw); c != '-' && (c < '0' || c > '9') {
		return 0, inputErr(CodeInvalidInteger, path)
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, &InputError{Code: CodeInvalidInteger, Path: path, Err: err}
	}
	v, err := strconv.ParseInt(n.String(), 10, 32)
	if err != nil {
		return 0, &InputError{Code: CodeInvalidInteger, Path: path, Err: err}
	}
	return int(v), nil
}

func array(raw json.RawMessage, path string, max int) ([]json.RawMessage, error) {
	if firstByte(raw) != '[' {
		return nil, inputErr(CodeInvalidArray, path)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &InputError{Code: CodeInvalidArray, Path: path, Err: err}
	}
	if len(items) > max {
		return nil, inputErr(CodeInvalidArray, path)
	}
	return items, nil
}

// instantLayout is RFC 3339 in UTC at one-second precision, the only form the AEB-1 format
// allows: a fractional second or an offset would give one instant two spellings.
const instantLayout = "2006-01-02T15:04:05Z"

func instant(raw json.RawMessage, path string) (time.Time, error) {
	s, err := str(raw, path)
	if err != nil {
		return time.Time{}, inputErr(CodeInvalidInstant, path)
	}
	t, err := time.Parse(instantLayout, s)
	if err != nil || t.Format(instantLayout) != s {
		return time.Time{}, &InputError{Code: CodeInvalidInstant, Path: path, Err: err}
	}
	return t, nil
}

// decoder accumulates the first error so each decode function reads as a list of fields.
type decoder struct{ err error }

func (d *decoder) str(raw json.RawMessage, path string) string {
	if d.err != nil {
		return ""
	}
	s, err := str(raw, path)
	d.err = err
	return s
}

func (d *decoder) boolean(raw json.RawMessage, path string) bool {
	if d.err != nil {
		return false
	}
	v, err := boolean(raw, path)
	d.err = err
	return v
}

func (d *decoder) integer(raw json.RawMessage, path string) int {
	if d.err != nil {
		return 0
	}
	v, err := integer(raw, path)
	d.err = err
	return v
}

func (d *decoder) instant(raw json.RawMessage, path string) time.Time {
	if d.err != nil {
		return time.Time{}
	}
	v, err := instant(raw, path)
	d.err = err
	return v
}

// list decodes an array with at most max items, calling each for every item.
func list[T any](d *decoder, raw json.RawMessage, path string, max int,
	each func(json.RawMessage, string) (T, error)) []T {
	out := []T{}
	if d.err != nil {
		return out
	}
	items, err := array(raw, path, max)
	if err != nil {
		d.err = err
		return out
	}
	for i, item := range items {
		v, err := each(item, idx(path, i))
		if err != nil {
			d.err = err
			return out
		}
		out = append(out, v)
	}
	return out
}

func decodeCase(raw json.RawMessage, path string) (Case, error) {
	m, err := object(raw, path, "@version", "id", "mode", "evaluated_at", "operation", "evidence",
		"local_policy", "reservation", "observation", "reconciliation")
	if err != nil {
		return Case{}, err
	}
	d := &decoder{}
	c := Case{
		Version:     d.str(m["@version"], path+".@version"),
		ID:          d.str(m["id"], path+".id"),
		Mode:        Mode(d.str(m["mode"], path+".mode")),
		EvaluatedAt: d.instant(m["evaluated_at"], path+".evaluated_at"),
		LocalPolicy: LocalPolicy(d.str(m["local_policy"], path+".local_policy")),
	}
	if d.err != nil {
		return Case{}, d.err
	}
	if c.Operation, err = decodeOperation(m["operation"], path+".operation"); err != nil {
		return Case{}, err
	}
	c.Evidence = list(d, m["evidence"], path+".evidence", MaxEvidence, decodeEvidence)
	if d.err != nil {
		return Case{}, d.err
	}
	if c.Reservation, err = decodeReservation(m["reservation"], path+".reservation"); err != nil {
		return Case{}, err
	}
	if !isNull(m["observation"]) {
		o, err := decodeObservation(m["observation"], path+".observation")
		if err != nil {
			return Case{}, err
		}
		c.Observation = &o
	}
	if !isNull(m["reconciliation"]) {
		r, err := decodeReconciliation(m["reconciliation"], path+".reconciliation")
		if err != nil {
			return Case{}, err
		}
		c.Reconciliation = &r
	}
	return c, nil
}

func decodeRequirement(raw json.RawMessage, path string) (Requirement, error) {
	m, err := object(raw, path, "role", "principal_kind", "minimum", "distinct_principals",
		"exclude_initiator", "exclude_executor")
	if err != nil {
		return Requirement{}, err
	}
	d := &decoder{}
	r := Requirement{
		Role:               Role(d.str(m["role"], path+".role")),
		PrincipalKind:      PrincipalKind(d.str(m["principal_kind"], path+".principal_kind")),
		Minimum:            d.integer(m["minimum"], path+".minimum"),
		DistinctPrincipals: d.boolean(m["distinct_principals"], path+".distinct_principals"),
		ExcludeInitiator:   d.boolean(m["exclude_initiator"], path+".exclude_initiator"),
		ExcludeExecutor:    d.boolean(m["exclude_executor"], path+".exclude_executor"),
	}
	return r, d.err
}

func decodeOperation(raw json.RawMessage, path string) (Operation, error) {
	m, err := object(raw, path, "operation_id", "provider_id", "initiator_id", "executor_id", "caid",
		"normalized_action_digest", "requirements")
	if err != nil {
		return Operation{}, err
	}
	d := &decoder{}
	op := Operation{
		OperationID:            d.str(m["operation_id"], path+".operation_id"),
		ProviderID:             d.str(m["provider_id"], path+".provider_id"),
		InitiatorID:            d.str(m["initiator_id"], path+".initiator_id"),
		ExecutorID:             d.str(m["executor_id"], path+".executor_id"),
		CAID:                   d.str(m["caid"], path+".caid"),
		NormalizedActionDigest: d.str(m["normalized_action_digest"], path+".normalized_action_digest"),
	}
	op.Requirements = list(d, m["requirements"], path+".requirements", MaxRequirements, decodeRequirement)
	return op, d.err
}

func decodeStatus(raw json.RawMessage, path string) (Status, error) {
	m, err := object(raw, path, "verdict", "authority_pinned", "checked_at", "valid_until")
	if err != nil {
		return Status{}, err
	}
	d := &decoder{}
	s := Status{
		Verdict:         StatusVerdict(d.str(m["verdict"], path+".verdict")),
		AuthorityPinned: d.boolean(m["authority_pinned"], path+".authority_pinned"),
		CheckedAt:       d.instant(m["checked_at"], path+".checked_at"),
		ValidUntil:      d.instant(m["valid_until"], path+".valid_until"),
	}
	return s, d.err
}

func decodeEvidence(raw json.RawMessage, path string) (Evidence, error) {
	m, err := object(raw, path, "wrapper_digest", "native_replay_unit", "native_verification",
		"mapped_caid", "mapped_action_digest", "role", "principal_kind", "principal_id", "status")
	if err != nil {
		return Evidence{}, err
	}
	d := &decoder{}
	e := Evidence{
		WrapperDigest:      d.str(m["wrapper_digest"], path+".wrapper_digest"),
		NativeReplayUnit:   d.str(m["native_replay_unit"], path+".native_replay_unit"),
		NativeVerification: Verification(d.str(m["native_verification"], path+".native_verification")),
		MappedCAID:         d.str(m["mapped_caid"], path+".mapped_caid"),
		MappedActionDigest: d.str(m["mapped_action_digest"], path+".mapped_action_digest"),
		Role:               Role(d.str(m["role"], path+".role")),
		PrincipalKind:      PrincipalKind(d.str(m["principal_kind"], path+".principal_kind")),
		PrincipalID:        d.str(m["principal_id"], path+".principal_id"),
	}
	if d.err != nil {
		return Evidence{}, d.err
	}
	e.Status, err = decodeStatus(m["status"], path+".status")
	return e, err
}

func decodePrior(raw json.RawMessage, path string) (PriorOperation, error) {
	m, err := object(raw, path, "operation_id", "caid", "normalized_action_digest", "custody",
		"provider_outcome", "effect_relation")
	if err != nil {
		return PriorOperation{}, err
	}
	d := &decoder{}
	p := PriorOperation{
		OperationID:            d.str(m["operation_id"], path+".operation_id"),
		CAID:                   d.str(m["caid"], path+".caid"),
		NormalizedActionDigest: d.str(m["normalized_action_digest"], path+".normalized_action_digest"),
		Custody:                Custody(d.str(m["custody"], path+".custody")),
		ProviderOutcome:        ProviderOutcome(d.str(m["provider_outcome"], path+".provider_outcome")),
		EffectRelation:         EffectRelation(d.str(m["effect_relation"], path+".effect_relation")),
	}
	return p, d.err
}

func decodeReservation(raw json.RawMessage, path string) (Reservation, error) {
	m, err := object(raw, path, "atomicity", "prior_operations", "consumed_native_replay_units")
	if err != nil {
		return Reservation{}, err
	}
	d := &decoder{}
	r := Reservation{Atomicity: Atomicity(d.str(m["atomicity"], path+".atomicity"))}
	r.PriorOperations = list(d, m["prior_operations"], path+".prior_operations", MaxPriorOperations, decodePrior)
	r.ConsumedNativeReplayUnits = list(d, m["consumed_native_replay_units"],
		path+".consumed_native_replay_units", MaxReplayUnits, str)
	return r, d.err
}

func decodeObservation(raw json.RawMessage, path string) (Observation, error) {
	m, err := object(raw, path, "source", "provider_outcome", "effect_relation")
	if err != nil {
		return Observation{}, err
	}
	d := &decoder{}
	o := Observation{
		Source:          ObservationSource(d.str(m["source"], path+".source")),
		ProviderOutcome: ProviderOutcome(d.str(m["provider_outcome"], path+".provider_outcome")),
		EffectRelation:  EffectRelation(d.str(m["effect_relation"], path+".effect_relation")),
	}
	return o, d.err
}

func decodeReconciliation(raw json.RawMessage, path string) (ReconciliationEvidence, error) {
	m, err := object(raw, path, "authenticated", "provider_id", "operation_id", "caid",
		"normalized_action_digest", "provider_outcome", "effect_relation")
	if err != nil {
		return ReconciliationEvidence{}, err
	}
	d := &decoder{}
	r := ReconciliationEvidence{
		Authenticated:          d.boolean(m["authenticated"], path+".authenticated"),
		ProviderID:             d.str(m["provider_id"], path+".provider_id"),
		OperationID:            d.str(m["operation_id"], path+".operation_id"),
		CAID:                   d.str(m["caid"], path+".caid"),
		NormalizedActionDigest: d.str(m["normalized_action_digest"], path+".normalized_action_digest"),
		ProviderOutcome:        ProviderOutcome(d.str(m["provider_outcome"], path+".provider_outcome")),
		EffectRelation:         EffectRelation(d.str(m["effect_relation"], path+".effect_relation")),
	}
	return r, d.err
}
