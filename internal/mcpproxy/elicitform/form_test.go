package elicitform

import (
	"encoding/json"
	"testing"

	"github.com/actgate/actgate/internal/envelope"
)

func testEnvelope(t testing.TB, closeFreeText bool) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Build(envelope.Draft{
		Synopsis: "Read a balance.", Findings: []string{"One account."}, Recommendations: []string{"Read it."},
		Offer: "Ask for detail.", Stem: "Which balance?",
		Options: []envelope.DraftOption{
			{Label: "Checking", Reasoning: "Usual.", Tool: "get_balance", Args: json.RawMessage(`{"account":"checking"}`)},
			{Label: "Savings", Reasoning: "Asked.", Tool: "get_balance", Args: json.RawMessage(`{"account":"savings"}`)},
		},
		RecommendedIdx: 1, CloseFreeText: closeFreeText,
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestResolutionFrom: the form content comes from the agent's MCP client (untrusted); only
// what the form offered becomes a resolution.
func TestResolutionFrom(t *testing.T) {
	open, closed := testEnvelope(t, false), testEnvelope(t, true)
	cases := []struct {
		name    string
		env     *envelope.Envelope
		content string
		kind    envelope.Kind // "" = refused
		idx     int
	}{
		{"option 0", open, `{"choice":"option:0"}`, envelope.KindOption, 0},
		{"option 1", open, `{"choice":"option:1"}`, envelope.KindOption, 1},
		{"option out of range", open, `{"choice":"option:2"}`, "", 0},
		{"negative option", open, `{"choice":"option:-1"}`, "", 0},
		{"option with a leading zero", open, `{"choice":"option:01"}`, "", 0},
		{"option with a sign", open, `{"choice":"option:+1"}`, "", 0},
		{"option not a number", open, `{"choice":"option:one"}`, "", 0},
		{"answer", open, `{"choice":"answer","answer":"Both."}`, envelope.KindAnswer, 0},
		{"answer without text", open, `{"choice":"answer","answer":"  "}`, "", 0},
		{"answer hatch closed", closed, `{"choice":"answer","answer":"Both."}`, "", 0},
		{"question", open, `{"choice":"question"}`, envelope.KindQuestion, 0},
		{"declined", open, `{"choice":"declined"}`, envelope.KindDeclined, 0},
		{"choice missing", open, `{}`, "", 0},
		{"choice not a string", open, `{"choice":1}`, "", 0},
		{"unknown choice", open, `{"choice":"approve"}`, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var content map[string]any
			if err := json.Unmarshal([]byte(c.content), &content); err != nil {
				t.Fatal(err)
			}
			r, err := Resolution(c.env, content)
			if c.kind == "" {
				if err == nil {
					t.Fatalf("accepted as %+v", r)
				}
				return
			}
			if err != nil || r.Kind != c.kind || (c.kind == envelope.KindOption && r.OptionIdx != c.idx) {
				t.Fatalf("got %+v, %v", r, err)
			}
			if err := envelope.Verify(c.env, &r); err != nil {
				t.Fatalf("the resolution does not verify against its envelope: %v", err)
			}
		})
	}
}

// FuzzElicitationAnswer: any content an MCP client returns either is refused or becomes a
// resolution that verifies against the envelope offered; never a panic.
func FuzzElicitationAnswer(f *testing.F) {
	for _, s := range []string{`{"choice":"option:0"}`, `{"choice":"answer","answer":"x"}`, `{"choice":"question"}`,
		`{"choice":"declined"}`, `{"choice":"option:99999999999999999999"}`, `{"choice":null}`, `[]`, `{"answer":{"a":1}}`} {
		f.Add([]byte(s), false)
	}
	envs := map[bool]*envelope.Envelope{false: testEnvelope(f, false), true: testEnvelope(f, true)}
	f.Fuzz(func(t *testing.T, data []byte, closeFreeText bool) {
		var content map[string]any
		if json.Unmarshal(data, &content) != nil {
			return
		}
		env := envs[closeFreeText]
		r, err := Resolution(env, content)
		if err != nil {
			return
		}
		if err := envelope.Verify(env, &r); err != nil {
			t.Fatalf("content %s became a resolution that does not verify: %v", data, err)
		}
		if r.Kind == envelope.KindAnswer && closeFreeText {
			t.Fatal("an answer through a closed hatch")
		}
	})
}
