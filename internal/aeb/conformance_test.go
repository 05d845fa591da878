package aeb

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

const (
	suitePath   = "testdata/aeb-consequence-conformance.v1.json"
	suiteSHA256 = "e1e3dd9dc4e4178a0a86c8708499de66bf8b8b35c06f9a5873524a9191d23d7e"
	suiteCount  = 22
)

// resultKeys are the AEB-1 result members, all of which every vector's expected value carries.
var resultKeys = []string{
	"verification", "acceptance", "action_match", "satisfaction", "authorization", "reservation",
	"custody", "provider_outcome", "effect_relation", "retry", "reconciliation", "decision", "reasons",
}

type vector struct {
	ID       string          `json:"id"`
	Input    json.RawMessage `json:"input"`
	Expected json.RawMessage `json:"expected"`
}

type suite struct {
	Version    string          `json:"@version"`
	ClaimScope json.RawMessage `json:"claim_scope"`
	Vectors    []vector        `json:"vectors"`
}

func strictUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode: %v", err)
	}
}

func loadSuite(t testing.TB) suite {
	t.Helper()
	b, err := os.ReadFile(suitePath)
	if err != nil {
		t.Fatal(err)
	}
	var s suite
	strictUnmarshal(t, b, &s)
	if s.Version != "AEB-CONSEQUENCE-CONFORMANCE-v1" {
		t.Fatalf("suite @version = %q", s.Version)
	}
	if len(s.Vectors) != suiteCount {
		t.Fatalf("suite has %d vectors, want %d", len(s.Vectors), suiteCount)
	}
	return s
}

// TestAEB1SuiteUnmodified pins the copied vectors: expected values are never edited.
func TestAEB1SuiteUnmodified(t *testing.T) {
	b, err := os.ReadFile(suitePath)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != suiteSHA256 {
		t.Fatalf("%s sha256 = %s, want %s (the copied suite was changed)", suitePath, got, suiteSHA256)
	}
}

// expectedResult decodes a vector's expected value, requiring exactly the AEB-1 result members.
func expectedResult(t testing.TB, raw json.RawMessage) Result {
	t.Helper()
	var members map[string]json.RawMessage
	strictUnmarshal(t, raw, &members)
	var keys []string
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := slices.Clone(resultKeys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("expected members = %v, want %v", keys, want)
	}
	var r Result
	strictUnmarshal(t, raw, &r)
	return r
}

// TestAEB1Conformance runs all 22 AEB-1 vectors through Evaluate and compares every separate
// decision, including the reasons as an ordered list (ascending, as the suite's result contract
// requires).
func TestAEB1Conformance(t *testing.T) {
	s := loadSuite(t)
	seen := map[string]bool{}
	for _, v := range s.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			if seen[v.ID] {
				t.Fatalf("duplicate vector id %q", v.ID)
			}
			seen[v.ID] = true
			c, err := DecodeCase(v.Input)
			if err != nil {
				t.Fatalf("DecodeCase: %v", err)
			}
			if c.ID != v.ID {
				t.Fatalf("input id %q != vector id %q", c.ID, v.ID)
			}
			want := expectedResult(t, v.Expected)
			got, err := Evaluate(c)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			for _, f := range []struct {
				name      string
				got, want string
			}{
				{"verification", string(got.Verification), string(want.Verification)},
				{"acceptance", string(got.Acceptance), string(want.Acceptance)},
				{"action_match", string(got.ActionMatch), string(want.ActionMatch)},
				{"satisfaction", string(got.Satisfaction), string(want.Satisfaction)},
				{"authorization", string(got.Authorization), string(want.Authorization)},
				{"reservation", string(got.Reservation), string(want.Reservation)},
				{"custody", string(got.Custody), string(want.Custody)},
				{"provider_outcome", string(got.ProviderOutcome), string(want.ProviderOutcome)},
				{"effect_relation", string(got.EffectRelation), string(want.EffectRelation)},
				{"retry", string(got.Retry), string(want.Retry)},
				{"reconciliation", string(got.Reconciliation), string(want.Reconciliation)},
				{"decision", string(got.Decision), string(want.Decision)},
			} {
				if f.got != f.want {
					t.Errorf("%s = %s, want %s", f.name, f.got, f.want)
				}
			}
			if !slices.Equal(got.Reasons, want.Reasons) {
				t.Errorf("reasons = %v, want %v", got.Reasons, want.Reasons)
			}
			for _, r := range got.Reasons {
				if !r.AEB1() {
					t.Errorf("reason %q is outside the AEB-1 closed set", r)
				}
			}
			// The marshalled result has exactly the AEB-1 shape (reasons [] not null).
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if round := expectedResult(t, b); !slices.Equal(round.Reasons, want.Reasons) {
				t.Errorf("marshalled reasons = %v, want %v", round.Reasons, want.Reasons)
			}
			assertInvariants(t, got)
		})
	}
}
