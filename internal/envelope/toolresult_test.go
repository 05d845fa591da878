package envelope

import (
	"errors"
	"strings"
	"testing"
)

func toolResult(t testing.TB, envelope string) []byte {
	t.Helper()
	return []byte(`{"content":[{"type":"text","text":"Booking held for 12-14 May."},{"type":"image","data":"AAAA","mimeType":"image/png"}],"isError":false,"binding_moment":` + envelope + `}`)
}

func TestFromToolResult(t *testing.T) {
	example := string(exampleRaw(t))
	malformed := strings.Replace(example, `"recommended_idx":0`, `"recommended_idx":7`, 1)
	const payload = "Booking held for 12-14 May.\n[image content]"
	tests := []struct {
		name         string
		raw          string
		wantDigest   string
		wantErr      error // ErrNoEnvelope, or nil
		wantProblems []want
		wantFallback string
	}{
		{name: "well formed", raw: string(toolResult(t, example)), wantDigest: exampleDigest, wantFallback: payload},
		{name: "malformed falls back", raw: string(toolResult(t, malformed)), wantFallback: payload,
			wantProblems: []want{{CodeRecommendedIdx, "$.binding_moment.question.recommended_idx"}}},
		{name: "jcs rejection inside the member", raw: string(toolResult(t, `{"offer":"a","offer":"b"}`)), wantFallback: payload,
			wantProblems: []want{{"JCS_DUPLICATE_MEMBER", "$.binding_moment"}}},
		{name: "two binding_moment members", raw: `{"binding_moment":` + example + `,"binding_moment":` + malformed + `}`, wantFallback: "",
			wantProblems: []want{{"JCS_DUPLICATE_MEMBER", "$.binding_moment"}}},
		{name: "escaped second binding_moment member", raw: `{"binding_moment":` + example + `,"binding\u005fmoment":{}}`, wantFallback: "",
			wantProblems: []want{{"JCS_DUPLICATE_MEMBER", "$.binding_moment"}}},
		{name: "binding_moment null", raw: `{"content":[],"binding_moment":null}`, wantFallback: "{\n  \"content\": []\n}",
			wantProblems: []want{{CodeWrongType, "$.binding_moment"}}},
		{name: "no envelope", raw: `{"content":[{"type":"text","text":"done"}]}`, wantErr: ErrNoEnvelope, wantFallback: "done"},
		{name: "no envelope, structured payload", raw: `{"structuredContent":{"ok":true,"n":1.5},"isError":false}`, wantErr: ErrNoEnvelope,
			wantFallback: "{\n  \"isError\": false,\n  \"structuredContent\": {\n    \"ok\": true,\n    \"n\": 1.5\n  }\n}"},
		{name: "payload outside the strict profile does not matter", raw: `{"structuredContent":{"rate":1.5},"binding_moment":` + example + `}`,
			wantDigest: exampleDigest, wantFallback: "{\n  \"structuredContent\": {\n    \"rate\": 1.5\n  }\n}"},
		{name: "not an object", raw: `"just text"`, wantErr: ErrNoEnvelope, wantFallback: `"just text"`},
		{name: "not JSON", raw: `plain words`, wantErr: ErrNoEnvelope, wantFallback: `plain words`},
		{name: "broken JSON mentioning binding_moment", raw: `{"binding_moment":{`, wantFallback: `{"binding_moment":{`,
			wantProblems: []want{{"JCS_SYNTAX", "$"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, fallback, err := FromToolResult([]byte(tt.raw))
			if fallback != tt.wantFallback {
				t.Errorf("fallback = %q, want %q", fallback, tt.wantFallback)
			}
			switch {
			case tt.wantDigest != "":
				if err != nil || env == nil || env.Digest() != tt.wantDigest {
					t.Fatalf("env %v err %v, want digest %s", env, err, tt.wantDigest)
				}
			case tt.wantErr != nil:
				if env != nil || !errors.Is(err, tt.wantErr) {
					t.Fatalf("env %v err %v, want %v", env, err, tt.wantErr)
				}
			default:
				if env != nil {
					t.Fatalf("malformed envelope returned (digest %s)", env.Digest())
				}
				problemsEqual(t, err, tt.wantProblems)
			}
		})
	}
}

func TestParseDocument(t *testing.T) {
	example := string(exampleRaw(t))
	for name, raw := range map[string]string{
		"bare":        example,
		"tool result": string(toolResult(t, example)),
		"only member": `{"binding_moment":` + example + `}`,
	} {
		env, err := ParseDocument([]byte(raw))
		if err != nil || env.Digest() != exampleDigest {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := ParseDocument(toolResult(t, strings.Replace(example, `"offer":"Ask for detail on any item.",`, "", 1)))
	problemsEqual(t, err, []want{{CodeMissingMember, "$.binding_moment.offer"}})
	_, err = ParseDocument([]byte(`{"content":[]}`))
	problemsEqual(t, err, []want{
		{CodeUnknownMember, "$.content"}, {CodeMissingMember, "$.synopsis"}, {CodeMissingMember, "$.findings"},
		{CodeMissingMember, "$.recommendations"}, {CodeMissingMember, "$.offer"}, {CodeMissingMember, "$.question"},
	})
}
