package act

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestIDIssuerBindsSession(t *testing.T) {
	ids := testIssuer(t)
	a, err := ids.New("sess-A")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ids.New("sess-A")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two ids alike")
	}
	if err := ids.CheckSession(a, "sess-A"); err != nil {
		t.Fatalf("own session refused: %v", err)
	}
	// §6 / §24 T14: an id seen in one session is refused in another.
	wantCode(t, ids.CheckSession(a, "sess-B"), CodeIDSessionMismatch)
	// Prefix tricks on the session id do not help.
	wantCode(t, ids.CheckSession(a, "sess-A "), CodeIDSessionMismatch)
	wantCode(t, ids.CheckSession(a, "sess-"), CodeIDSessionMismatch)
	wantCode(t, ids.CheckSession(a, ""), CodeIDSessionMismatch)

	// Another key (another deployment, or after rotation) does not recognise the id.
	other, err := NewIDIssuer(bytes.Repeat([]byte{7}, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, other.CheckSession(a, "sess-A"), CodeIDSessionMismatch)

	// A tampered MAC or random part is refused.
	flip := func(s string, i int) string {
		c := byte('0')
		if s[i] == '0' {
			c = '1'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	wantCode(t, ids.CheckSession(flip(a, 5), "sess-A"), CodeIDSessionMismatch)
	wantCode(t, ids.CheckSession(flip(a, len(a)-1), "sess-A"), CodeIDSessionMismatch)

	for _, bad := range []string{
		"", "toolu_01A", "act-toolu-01A-sess55", strings.ToUpper(a), a + "0", a[:len(a)-1],
		strings.Replace(a, "-", "_", 1), "act-" + strings.Repeat("g", 32) + "-" + strings.Repeat("0", 32),
		a[:36] + "x" + a[37:],
	} {
		wantCode(t, ids.CheckSession(bad, "sess-A"), CodeIDInvalid)
	}
}

func TestIDIssuerCheckAct(t *testing.T) {
	mc := testCtx(t)
	c, err := MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_1","name":"search","input":{}}`), mc)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.IDs.CheckAct(&c.Act, mc.SessionID); err != nil {
		t.Fatal(err)
	}
	// The act presented in another session: refused whether or not the copier edits
	// freshness.session_id to match.
	wantCode(t, mc.IDs.CheckAct(&c.Act, "sess-other"), CodeIDSessionMismatch)
	moved := c.Act
	moved.Freshness.SessionID = "sess-other"
	wantCode(t, mc.IDs.CheckAct(&moved, "sess-other"), CodeIDSessionMismatch)
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

func TestIDIssuerRandomFailureGivesNoAct(t *testing.T) {
	ids, err := NewIDIssuer(testKey, failingReader{})
	if err != nil {
		t.Fatal(err)
	}
	mc := testCtx(t)
	mc.IDs = ids
	c, err := MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_1","name":"search","input":{}}`), mc)
	noCandidateOnError(t, c, err)
	wantCode(t, err, CodeIDGeneration)
}

func TestNewIDIssuerShortKey(t *testing.T) {
	_, err := NewIDIssuer(make([]byte, MinIDKeyBytes-1), nil)
	wantCode(t, err, CodeContextInvalid)
	key := bytes.Repeat([]byte{1}, 32)
	ids, err := NewIDIssuer(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ids.New("s")
	key[0] = 2 // the issuer copied its key
	if err := ids.CheckSession(id, "s"); err != nil {
		t.Fatal("issuer shares the caller's key slice")
	}
	if _, err := ids.New("bad session"); err == nil {
		t.Fatal("session id with a space accepted")
	}
}
