package act

import (
	"encoding/json"
	"strings"
	"testing"
)

// sampleAct is a valid act as JSON, built by the adapter from the §6 block.
func sampleAct(t *testing.T) []byte {
	t.Helper()
	mc := testCtx(t)
	mc.Purpose = Purpose{PurposeID: "user-turn", DeclaredPurpose: "send invoice email"}
	mc.Destination = "smtp-gw-1"
	mc.Provenance = SourceUser
	c, err := MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_01A","name":"email_send","input":{"to":"alice@example.com","subject":"Invoice","body":"..."}}`), mc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&c.Act)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit decodes the act into generic JSON, applies f, re-encodes.
func edit(t *testing.T, raw []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	return mustJSON(t, m)
}

func obj(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }

func TestParseCandidateActRoundTrip(t *testing.T) {
	raw := sampleAct(t)
	a, err := ParseCandidateAct(raw)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := json.Marshal(a)
	if string(back) != string(raw) {
		t.Fatalf("round trip changed bytes:\n%s\n%s", raw, back)
	}
	// The §17 member set: every required member and the two optional ones are emitted.
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	for _, k := range append(actShape().required, actShape().optional...) {
		if _, ok := m[k]; !ok {
			t.Errorf("member %s not emitted", k)
		}
	}
	if len(m) != len(actShape().required)+len(actShape().optional) {
		t.Errorf("%d members emitted", len(m))
	}
}

func TestParseCandidateActRefusals(t *testing.T) {
	raw := sampleAct(t)
	cases := []struct {
		name string
		in   []byte
		code Code
	}{
		{"not json", []byte(`{`), CodeInputInvalid},
		{"float epoch outside the strict profile", edit(t, raw, func(m map[string]any) { obj(m, "policy_state")["policy_epoch"] = 9.5 }), CodeInputInvalid},
		{"too large", append(append([]byte(nil), raw[:len(raw)-1]...), []byte(`,"x":"`+strings.Repeat("a", MaxActBytes)+`"}`)...), CodeInputTooLarge},
		{"array", []byte(`[]`), CodeSchemaType},
		{"unknown top member", edit(t, raw, func(m map[string]any) { m["arguments"] = map[string]any{"to": "x"} }), CodeUnknownMember},
		{"case variant of a member", edit(t, raw, func(m map[string]any) { m["Tool"] = m["tool"] }), CodeUnknownMember},
		{"unknown nested member", edit(t, raw, func(m map[string]any) { obj(m, "tool")["tool_secret"] = "x" }), CodeUnknownMember},
		{"unknown member in arguments_digest", edit(t, raw, func(m map[string]any) { obj(m, "arguments_digest")["args"] = "x" }), CodeUnknownMember},
		{"null member", edit(t, raw, func(m map[string]any) { m["destination"] = nil }), CodeSchemaType},
		{"null nested", edit(t, raw, func(m map[string]any) { obj(m, "tool")["tool_endpoint"] = nil }), CodeSchemaType},
		{"tool not object", edit(t, raw, func(m map[string]any) { m["tool"] = "email_send" }), CodeSchemaType},
		{"epoch as string", edit(t, raw, func(m map[string]any) { obj(m, "policy_state")["policy_epoch"] = "9" }), CodeSchemaType},
		{"bad time", edit(t, raw, func(m map[string]any) { m["created_at"] = "yesterday" }), CodeSchemaType},
		{"act_type outside enum", edit(t, raw, func(m map[string]any) { m["act_type"] = "tool_call" }), CodeEnumInvalid},
		{"consequence_class outside enum", edit(t, raw, func(m map[string]any) { m["consequence_class"] = "HARMLESS" }), CodeEnumInvalid},
		{"tool_protocol outside enum", edit(t, raw, func(m map[string]any) { obj(m, "tool")["tool_protocol"] = "GRPC" }), CodeEnumInvalid},
		{"sink_type outside enum", edit(t, raw, func(m map[string]any) { obj(m, "finality_sink")["sink_type"] = "ANY" }), CodeEnumInvalid},
		{"source_type outside enum", edit(t, raw, func(m map[string]any) { obj(m, "instruction_provenance")["source_type"] = "model" }), CodeEnumInvalid},
		{"canonicalization outside enum", edit(t, raw, func(m map[string]any) { obj(m, "arguments_digest")["canonicalization"] = "NONE" }), CodeEnumInvalid},
		{"wrong version", edit(t, raw, func(m map[string]any) { m["version"] = "2.0" }), CodeFieldInvalid},
		{"wrong object_type", edit(t, raw, func(m map[string]any) { m["object_type"] = "payment_candidate_act" }), CodeFieldInvalid},
		{"digest not sha256 hex", edit(t, raw, func(m map[string]any) { obj(m, "arguments_digest")["value"] = "base64url-args" }), CodeFieldInvalid},
		{"digest upper-case hex", edit(t, raw, func(m map[string]any) {
			d := obj(m, "arguments_digest")
			d["value"] = strings.ToUpper(d["value"].(string))
		}), CodeFieldInvalid},
		{"algorithm", edit(t, raw, func(m map[string]any) { obj(m, "arguments_digest")["algorithm"] = "MD5" }), CodeFieldInvalid},
		{"material", edit(t, raw, func(m map[string]any) { obj(m, "arguments_digest")["material"] = "args-only" }), CodeFieldInvalid},
		{"expires before created", edit(t, raw, func(m map[string]any) { m["expires_at"] = "2026-09-01T11:00:00Z" }), CodeFieldInvalid},
		{"ttl beyond MaxTTL", edit(t, raw, func(m map[string]any) { m["expires_at"] = "2026-09-03T12:00:00Z" }), CodeFieldInvalid},
		{"empty act id", edit(t, raw, func(m map[string]any) { m["candidate_act_id"] = "" }), CodeFieldInvalid},
		{"tool name with control char", edit(t, raw, func(m map[string]any) { obj(m, "tool")["tool_id"] = "email\u0007send" }), CodeToolNameInvalid},
		{"negative delegation depth", edit(t, raw, func(m map[string]any) { obj(m, "agent")["delegation_depth"] = -1 }), CodeFieldInvalid},
		{"epoch beyond 2^53-1 fails the profile", edit(t, raw, func(m map[string]any) { obj(m, "policy_state")["policy_epoch"] = json.Number("9007199254740992") }), CodeInputInvalid},
		{"nonce not hex", edit(t, raw, func(m map[string]any) { obj(m, "freshness")["nonce"] = "zzzzzzzzzzzzzzzzzz" }), CodeFieldInvalid},
		{"duplicate member", []byte(strings.Replace(string(raw), `"version":"1.0"`, `"version":"1.0","version":"1.0"`, 1)), CodeInputInvalid},
	}
	for _, k := range actShape().required {
		cases = append(cases, struct {
			name string
			in   []byte
			code Code
		}{"missing " + k, edit(t, raw, func(m map[string]any) { delete(m, k) }), CodeMissingMember})
	}
	for parent, s := range actShape().nested {
		for _, k := range s.required {
			cases = append(cases, struct {
				name string
				in   []byte
				code Code
			}{"missing " + parent + "." + k, edit(t, raw, func(m map[string]any) { delete(obj(m, parent), k) }), CodeMissingMember})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseCandidateAct(tc.in)
			if a != nil {
				t.Fatal("act returned with an error")
			}
			wantCode(t, err, tc.code)
		})
	}
}

// The abbreviated second example of §17 is not a complete act.
func TestParseSpecAbbreviatedExampleRefused(t *testing.T) {
	_, err := ParseCandidateAct([]byte(`{"object_type":"agent_candidate_act","act_type":"TOOL_CALL","tool":{"tool_id":"payout_create","function_id":"payout_create","tool_protocol":"HTTP_API"},"arguments_digest":{"algorithm":"SHA-256","value":"base64url-args","canonicalization":"JCS"},"consequence_class":"FINANCIAL","destination":{"destination_id":"psp.example"},"finality_sink":{"sink_id":"host-dispatch-1","sink_type":"TOOL_DISPATCH"}}`))
	wantCode(t, err, CodeMissingMember)
}
