package act

import (
	"encoding/json"
	"errors"
	"sort"
	"strconv"

	"github.com/actgate/actgate/internal/jcs"
)

// members is one JSON object of a vendor envelope, keyed exactly. Values are canonical JSON
// text: the whole envelope was canonicalized first, and a canonical document's values are
// canonical.
type members map[string]json.RawMessage

// envelope bounds and canonicalizes a vendor envelope in full RFC 8785 mode before anything
// reads it. That refuses what two JSON readers could disagree on: duplicate member names
// ({"name":"search","name":"payout"}), invalid UTF-8 and unpaired surrogates (which
// encoding/json would silently replace). Its result is an object or an array.
func envelope(raw []byte, max int) (json.RawMessage, error) {
	if len(raw) > max {
		return nil, newErr(CodeInputTooLarge, "", "input larger than the mapping context allows")
	}
	canon, err := jcs.Canonicalize(raw, jcs.Full)
	if err != nil {
		return nil, jcsErr(CodeInputInvalid, "", err)
	}
	return canon, nil
}

func asObject(field string, v json.RawMessage) (members, error) {
	if len(v) == 0 || v[0] != '{' {
		return nil, newErr(CodeShapeInvalid, pathOr(field), "must be an object")
	}
	var m members
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, &Error{Code: CodeShapeInvalid, Field: pathOr(field), Detail: "must be an object", Err: err}
	}
	return m, nil
}

func asArray(field string, v json.RawMessage) ([]json.RawMessage, error) {
	if len(v) == 0 || v[0] != '[' {
		return nil, newErr(CodeShapeInvalid, pathOr(field), "must be an array")
	}
	var a []json.RawMessage
	if err := json.Unmarshal(v, &a); err != nil {
		return nil, &Error{Code: CodeShapeInvalid, Field: pathOr(field), Detail: "must be an array", Err: err}
	}
	return a, nil
}

// str reads an optional string member; ok is false when it is absent.
func (m members) str(path, key string) (s string, ok bool, err error) {
	v, present := m[key]
	if !present {
		return "", false, nil
	}
	if len(v) == 0 || v[0] != '"' {
		return "", true, newErr(CodeShapeInvalid, join(path, key), "must be a string")
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return "", true, &Error{Code: CodeShapeInvalid, Field: join(path, key), Detail: "must be a string", Err: err}
	}
	return s, true, nil
}

// reqStr reads a required string member.
func (m members) reqStr(path, key string) (string, error) {
	s, ok, err := m.str(path, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", newErr(CodeShapeInvalid, join(path, key), "required")
	}
	return s, nil
}

// vendorID reads a required call id: a bounded identifier, because it is echoed in the result.
func (m members) vendorID(path, key string) (string, error) {
	s, err := m.reqStr(path, key)
	if err != nil {
		return "", err
	}
	if err := checkToken(join(path, key), s, MaxIDBytes); err != nil {
		return "", newErr(CodeShapeInvalid, join(path, key), "must be a non-empty identifier")
	}
	return s, nil
}

// modelID returns a usable "model" member for agent.model_id (tool-use-binding §11: "Model name
// from the request → agent.model_id"), or "".
func (m members) modelID() string {
	s, _, err := m.str("", "model")
	if err != nil || checkToken("model", s, MaxIDBytes) != nil {
		return ""
	}
	return s
}

// withField re-addresses an error about "arguments" (from NewCandidate) to the member path the
// vendor shape uses.
func withField(err error, field string) error {
	var e *Error
	if errors.As(err, &e) && e.Field == "arguments" {
		c := *e
		c.Field = field
		return &c
	}
	return err
}

// markDuplicateIDs refuses every call of a message whose vendor id another call shares: a
// result could not be attributed to one of them (tool-use-binding §9, each call its own act).
func markDuplicateIDs(items []Item) {
	count := map[string]int{}
	for _, it := range items {
		if it.VendorID != "" {
			count[it.VendorID]++
		}
	}
	for i := range items {
		if count[items[i].VendorID] > 1 {
			items[i].Candidate = nil
			items[i].Err = newErr(CodeDuplicateVendorID, "", "vendor id shared by "+strconv.Itoa(count[items[i].VendorID])+" calls")
		}
	}
}

// idx formats a path element.
func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// keys returns the member names sorted, so the first refusal reported is deterministic.
func (m members) keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
