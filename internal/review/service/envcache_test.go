package service

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/actgate/actgate/internal/envelope"
)

func testEnvelope(t *testing.T, n int) string {
	t.Helper()
	env, err := envelope.Build(envelope.Draft{Synopsis: fmt.Sprintf("Envelope %d.", n), Findings: []string{"A finding."},
		Recommendations: []string{"A recommendation."}, Offer: "Ask for detail.", Stem: "Which call may run?",
		Options: []envelope.DraftOption{{Label: "Run it", Reasoning: "Because.", Tool: "t", Args: json.RawMessage(`{"n":1}`)},
			{Label: "Run the other", Reasoning: "Also.", Tool: "t", Args: json.RawMessage(`{"n":2}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(env.Canonical())
}

// TestEnvelopeCache: the same bytes are parsed once; bytes that do not parse are refused every
// time and never kept; the cache starts over when full.
func TestEnvelopeCache(t *testing.T) {
	c := newEnvelopeCache()
	raw := testEnvelope(t, 0)
	a, err := c.parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.parse(raw)
	if err != nil || a != b {
		t.Fatalf("second parse of the same bytes: %p %p %v", a, b, err)
	}
	want, _ := envelope.Parse([]byte(raw))
	if a.Digest() != want.Digest() {
		t.Fatalf("cached digest %s, parsed %s", a.Digest(), want.Digest())
	}
	for _, bad := range []string{"", "{", raw[:len(raw)-1], `{"binding_moment":1}`} {
		for range 2 {
			if env, err := c.parse(bad); err == nil || env != nil {
				t.Fatalf("%q parsed: %v", bad, env)
			}
		}
	}
	if len(c.parsed) != 1 {
		t.Fatalf("%d entries, want 1", len(c.parsed))
	}
	c.parsed = map[[32]byte]*envelope.Envelope{}
	for i := range maxParsedEnvelopes {
		c.parsed[[32]byte{byte(i), byte(i >> 8), 1}] = a
	}
	if _, err := c.parse(testEnvelope(t, 1)); err != nil || len(c.parsed) != 1 {
		t.Fatalf("a full cache: %d entries (%v), want it started over with 1", len(c.parsed), err)
	}
}
