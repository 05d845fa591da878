package aeb

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// vectorInput returns the raw input of one AEB-1 vector.
func vectorInput(t testing.TB, id string) []byte {
	t.Helper()
	s := loadSuite(t)
	for _, v := range s.Vectors {
		if v.ID == id {
			return v.Input
		}
	}
	t.Fatalf("no vector %q", id)
	return nil
}

// edit decodes raw, applies f to the generic tree and re-encodes it.
func edit(t *testing.T, raw []byte, f func(m map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		switch v := m[p].(type) {
		case map[string]any:
			m = v
		case []any:
			m = v[0].(map[string]any)
		}
	}
	return m
}

// TestDecodeCaseRejects: every malformed case gets a stable code and path, never a decision.
func TestDecodeCaseRejects(t *testing.T) {
	base := vectorInput(t, "authorized_admission")
	set := func(path []string, key string, v any) []byte {
		return edit(t, base, func(m map[string]any) { obj(m, path...)[key] = v })
	}
	del := func(path []string, key string) []byte {
		return edit(t, base, func(m map[string]any) { delete(obj(m, path...), key) })
	}
	req := []string{"operation", "requirements"}
	ev := []string{"evidence"}
	status := []string{"evidence", "status"}
	top := []string{}
	for _, tc := range []struct {
		name string
		in   []byte
		code ErrorCode
		path string
	}{
		{"empty", []byte(``), CodeInvalidJSON, "$"},
		{"not an object", []byte(`[]`), CodeInvalidObject, "$"},
		{"truncated", base[:len(base)/2], CodeInvalidJSON, "$"},
		{"trailing value", append(append([]byte{}, base...), []byte(` {}`)...), CodeInvalidJSON, "$"},
		{"invalid UTF-8", append(append([]byte{}, base[:len(base)-2]...), 0xff, '}'), CodeInvalidJSON, "$"},
		{"too large", bytes.Repeat([]byte(" "), maxDocumentBytes+1), CodeMaxDocumentBytesExceeded, "$"},
		{"too deep", []byte(strings.Repeat("[", 33) + strings.Repeat("]", 33)), CodeMaxDepthExceeded, "$"},
		{"duplicate key", bytes.Replace(base, []byte(`"local_policy": "PERMIT"`),
			[]byte(`"local_policy": "DENY", "local_policy": "PERMIT"`), 1), CodeDuplicateKey, "$"},
		{"duplicate key after escape decoding", bytes.Replace(base, []byte(`"local_policy": "PERMIT"`),
			[]byte(`"local_policy": "DENY", "local\u005fpolicy": "PERMIT"`), 1), CodeDuplicateKey, "$"},
		{"unknown top-level key", set(top, "note", "x"), CodeUnknownKey, "$.note"},
		// encoding/json would match this to the "role" field; the strict decoder does not.
		{"key differing in case", edit(t, base, func(m map[string]any) {
			r := obj(m, req...)
			r["ROLE"] = r["role"]
			delete(r, "role")
		}), CodeUnknownKey, "$.operation.requirements[0].ROLE"},
		{"missing reconciliation", del(top, "reconciliation"), CodeMissingKey, "$.reconciliation"},
		{"missing status", del(ev, "status"), CodeMissingKey, "$.evidence[0].status"},
		{"unknown status key", set(status, "source", "x"), CodeUnknownKey, "$.evidence[0].status.source"},
		// A null must never become false: that would silently drop a separation-of-duty rule.
		{"null exclude_initiator", set(req, "exclude_initiator", nil), CodeInvalidBoolean, "$.operation.requirements[0].exclude_initiator"},
		{"string boolean", set(req, "distinct_principals", "true"), CodeInvalidBoolean, "$.operation.requirements[0].distinct_principals"},
		{"null role", set(req, "role", nil), CodeInvalidString, "$.operation.requirements[0].role"},
		{"fractional minimum", set(req, "minimum", json.Number("1.0")), CodeInvalidInteger, "$.operation.requirements[0].minimum"},
		{"exponent minimum", set(req, "minimum", json.Number("1e0")), CodeInvalidInteger, "$.operation.requirements[0].minimum"},
		{"huge minimum", set(req, "minimum", json.Number("99999999999999999999")), CodeInvalidInteger, "$.operation.requirements[0].minimum"},
		{"minimum above bound", set(req, "minimum", 17), CodeInvalidInteger, "$.operation.requirements[0].minimum"},
		{"string minimum", set(req, "minimum", "1"), CodeInvalidInteger, "$.operation.requirements[0].minimum"},
		{"empty requirements", set([]string{"operation"}, "requirements", []any{}), CodeInvalidArray, "$.operation.requirements"},
		{"requirements not an array", set([]string{"operation"}, "requirements", map[string]any{}), CodeInvalidArray, "$.operation.requirements"},
		{"evidence null", set(top, "evidence", nil), CodeInvalidArray, "$.evidence"},
		{"too much evidence", set(top, "evidence", make([]any, MaxEvidence+1)), CodeInvalidArray, "$.evidence"},
		{"wrong version", set(top, "@version", "AEB-CONSEQUENCE-CASE-v2"), CodeInvalidVersion, "$.@version"},
		{"unknown mode", set(top, "mode", "admission"), CodeInvalidEnum, "$.mode"},
		{"unknown principal kind", set(ev, "principal_kind", "AGENT"), CodeInvalidEnum, "$.evidence[0].principal_kind"},
		{"unknown verdict", set(status, "verdict", "GOOD"), CodeInvalidEnum, "$.evidence[0].status.verdict"},
		{"upper-case digest", set(ev, "wrapper_digest", "sha256:"+strings.Repeat("F", 64)), CodeInvalidDigest, "$.evidence[0].wrapper_digest"},
		{"short CAID", set([]string{"operation"}, "caid", "caid:1:order.purchase.1:jcs-sha256:AAAA"), CodeInvalidCAID, "$.operation.caid"},
		{"principal with a space", set(ev, "principal_id", "human approver"), CodeInvalidString, "$.evidence[0].principal_id"},
		{"empty operation id", set([]string{"operation"}, "operation_id", ""), CodeInvalidString, "$.operation.operation_id"},
		{"instant with fraction", set(status, "checked_at", "2026-07-27T11:59:00.5Z"), CodeInvalidInstant, "$.evidence[0].status.checked_at"},
		{"instant with offset", set(top, "evaluated_at", "2026-07-27T14:00:00+02:00"), CodeInvalidInstant, "$.evaluated_at"},
		{"instant out of range", set(top, "evaluated_at", "2026-02-30T12:00:00Z"), CodeInvalidInstant, "$.evaluated_at"},
		{"checked after valid_until", set(status, "checked_at", "2026-07-27T13:00:01Z"), CodeInvalidCombination, "$.evidence[0].status"},
		{"admission with an observation", set(top, "observation", map[string]any{
			"source": "PROVIDER_EVIDENCE", "provider_outcome": "COMMITTED", "effect_relation": "OBSERVED_AS_REQUESTED"}),
			CodeInvalidCombination, "$.mode"},
		{"retry without a held operation", set(top, "mode", "RETRY"), CodeInvalidCombination, "$.reservation"},
		{"duplicate consumed replay unit", set([]string{"reservation"}, "consumed_native_replay_units",
			[]any{digestA, digestA}), CodeDuplicateValue, "$.reservation.consumed_native_replay_units[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeCase(tc.in)
			var ie *InputError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("err = %v, want *InputError (case %+v)", err, c)
			}
			if ie.Code != tc.code || ie.Path != tc.path {
				t.Errorf("error = %s at %s, want %s at %s (%v)", ie.Code, ie.Path, tc.code, tc.path, err)
			}
			// json.Unmarshal goes through the same strict decoder.
			var viaStd Case
			if err := json.Unmarshal(tc.in, &viaStd); err == nil {
				t.Errorf("json.Unmarshal accepted what DecodeCase rejects")
			}
		})
	}
}

// TestDecodeCaseRoundTrip: a decoded case re-encodes to JSON that decodes to the same case, and
// json.Unmarshal agrees with DecodeCase.
func TestDecodeCaseRoundTrip(t *testing.T) {
	for _, v := range loadSuite(t).Vectors {
		t.Run(v.ID, func(t *testing.T) {
			c, err := DecodeCase(v.Input)
			if err != nil {
				t.Fatal(err)
			}
			var viaStd Case
			if err := json.Unmarshal(v.Input, &viaStd); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeCase(b)
			if err != nil {
				t.Fatalf("re-decode %s: %v", b, err)
			}
			b2, _ := json.Marshal(again)
			b3, _ := json.Marshal(viaStd)
			if !bytes.Equal(b, b2) || !bytes.Equal(b, b3) {
				t.Errorf("round trip differs:\n%s\n%s\n%s", b, b2, b3)
			}
		})
	}
}
