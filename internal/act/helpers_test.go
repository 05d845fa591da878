package act

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

var testKey = bytes.Repeat([]byte{0x42}, 32)

var testNow = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

// seeded returns a deterministic random source so ids are reproducible in tests.
func seeded(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	return rand.NewChaCha8(s)
}

func testIssuer(t testing.TB) *IDIssuer {
	t.Helper()
	ids, err := NewIDIssuer(testKey, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func testCtx(t testing.TB) MappingContext {
	return MappingContext{
		SessionID:   "sess-55",
		Principal:   Principal{PrincipalID: "alice@example.com", PrincipalType: "user"},
		Agent:       Agent{AgentID: "system:serviceaccount:agents:claude-work-seat-12", RuntimeID: "actgate-sidecar"},
		SinkID:      "host-dispatch-1",
		PolicyState: PolicyState{PolicyEpoch: 9, AuthorityEpoch: 3, RevocationEpoch: 1},
		Now:         func() time.Time { return testNow },
		TTL:         5 * time.Minute,
		IDs:         testIssuer(t),
	}
}

func mcpCtx(t testing.TB) MappingContext {
	mc := testCtx(t)
	mc.Server = ServerIdentity{Name: "git", URL: "mcp://git.example/prod"}
	return mc
}

func wantCode(t *testing.T, err error, want Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", want)
	}
	got, ok := CodeOf(err)
	if !ok {
		t.Fatalf("error %v carries no act code, want %s", err, want)
	}
	if got != want {
		t.Fatalf("code = %s (%v), want %s", got, err, want)
	}
}

// checkAccepted is the invariant of every accepted act: it validates, it survives a
// marshal/parse round trip, its arguments are canonical, and its digest is the action digest
// recomputed from its own canonical arguments.
func checkAccepted(t testing.TB, c *Candidate) {
	t.Helper()
	if c == nil {
		t.Fatal("nil candidate without error")
	}
	if err := c.Act.Validate(); err != nil {
		t.Fatalf("accepted act does not validate: %v", err)
	}
	canon, err := jcs.Canonicalize(c.Arguments, jcs.Full)
	if err != nil || !bytes.Equal(canon, c.Arguments) {
		t.Fatalf("arguments not canonical: %v", err)
	}
	mode := c.Act.ArgumentsDigest.Canonicalization.Mode()
	d, err := action.Digest(c.Act.Tool.ToolID, c.Arguments, mode)
	if err != nil {
		t.Fatalf("recompute action digest: %v", err)
	}
	if d != c.Act.ArgumentsDigest.Value || d != c.ActionDigest() {
		t.Fatalf("digest %s != recomputed %s", c.Act.ArgumentsDigest.Value, d)
	}
	if c.ArgumentsDigest() != jcs.Digest(c.Arguments) {
		t.Fatal("ArgumentsDigest is not the digest of the canonical arguments")
	}
	if err := c.Act.MatchArguments(c.Arguments); err != nil {
		t.Fatalf("MatchArguments(own arguments): %v", err)
	}
	_, strictErr := action.Digest(c.Act.Tool.ToolID, c.Arguments, jcs.Strict)
	if c.Strict() != (strictErr == nil) {
		t.Fatalf("Strict() = %v but strict canonicalization error = %v", c.Strict(), strictErr)
	}
	b, err := json.Marshal(&c.Act)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, c.Arguments) && len(c.Arguments) > 2 {
		t.Fatal("act carries the raw arguments")
	}
	back, err := ParseCandidateAct(b)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	d1, err1 := c.Act.Digest()
	d2, err2 := back.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("round trip changed the act: %v %v %s %s", err1, err2, d1, d2)
	}
}

// noCandidateOnError is the invariant of every refusal.
func noCandidateOnError(t testing.TB, c *Candidate, err error) {
	t.Helper()
	if err != nil && c != nil {
		t.Fatal("candidate returned with an error")
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("refusal without an act code: %v", err)
		}
	}
}

type bindingVector struct {
	ID           string          `json:"id"`
	Tool         string          `json:"tool"`
	Args         json.RawMessage `json:"args"`
	ExpectedCAID string          `json:"expected_caid"`
}

func loadBindingVectors(t testing.TB) []bindingVector {
	t.Helper()
	b, err := os.ReadFile("testdata/tool-call-binding.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []bindingVector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) != 6 {
		t.Fatalf("want 6 vectors, got %d", len(f.Vectors))
	}
	return f.Vectors
}

func (v bindingVector) digest() string {
	return strings.TrimPrefix(v.ExpectedCAID, v.Tool+":")
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
