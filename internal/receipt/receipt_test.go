package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/jcs"
)

// TestCanonicalMatchesJCS checks the hand-written encoders against the definition: the RFC 8785
// canonical form of what encoding/json writes for the same value.
func TestCanonicalMatchesJCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "a", "payment.release", "é", "\u2028", "\"quote\"", `back\slash`, "tab\t", "\x01ctl", "😀", "<&>", "\u007f", "x\u00ff"}
	pick := func() string { return strs[rng.IntN(len(strs))] }
	zones := []*time.Location{time.UTC, time.FixedZone("plus", 5*3600+1800), time.FixedZone("minus", -8*3600)}
	for i := range 2000 {
		r := Receipt{
			Seq: rng.Uint64N(jcs.MaxSafeInteger + 1), Prev: pick(), ActID: pick(), Tool: pick(), Server: pick(), Class: pick(),
			ArgumentsDigest: pick(), ActionDigest: pick(), Decision: pick(), Code: pick(), AuthorityID: pick(),
			OperationID: pick(), State: pick(), Digest: pick(),
			Time: time.Unix(rng.Int64N(1<<35), rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))]),
		}
		// encoding/json writes the time with its zone; the log writes UTC.
		r.Time = r.Time.UTC()
		raw, err := json.Marshal((*receiptWire)(&r))
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Canonicalize(raw, jcs.Full)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendCanonical(nil, &r, true)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("case %d: got %s (%v)\nwant %s", i, got, err, want)
		}
		// Without the digest member.
		noDigest := strings.Replace(string(want), `,"digest":`+mustJSON(r.Digest), "", 1)
		got, _ = appendCanonical(nil, &r, false)
		if string(got) != noDigest {
			t.Fatalf("case %d without digest: got %s\nwant %s", i, got, noDigest)
		}
		if c, err := r.Canonical(); err != nil || !bytes.Equal(c, want) {
			t.Fatalf("case %d: Canonical %s (%v)", i, c, err)
		}

		c := Checkpoint{Type: pick(), Seq: rng.Uint64N(jcs.MaxSafeInteger + 1), PrevSeq: rng.Uint64N(jcs.MaxSafeInteger + 1), Head: pick(), Time: r.Time, KeyID: pick()}
		raw, _ = json.Marshal(c)
		want, _ = jcs.Canonicalize(raw, jcs.Full)
		got, err = c.appendCanonical(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("checkpoint %d: got %s\nwant %s", i, got, want)
		}
		sig := []byte(pick() + "sig")
		line := appendCheckpointLine(nil, got, sig)
		raw, _ = json.Marshal(checkpointWire{Checkpoint: &c, Signature: sig})
		want, _ = jcs.Canonicalize(raw, jcs.Full)
		if !bytes.Equal(line, append(want, '\n')) {
			t.Fatalf("checkpoint line %d: got %s\nwant %s", i, line, want)
		}
	}
}

func mustJSON(s string) string {
	b, _ := jcs.AppendString(nil, s)
	return string(b)
}

// TestAppendRejectsInvalid: a malformed receipt is refused with ErrInvalid and does not take a
// seq number.
func TestAppendRejectsInvalid(t *testing.T) {
	l := openTest(t, filepath.Join(t.TempDir(), "log"), testKey(t, "k"), nil)
	defer l.Close()
	long := strings.Repeat("x", MaxFieldBytes+1)
	tests := []struct {
		name string
		mod  func(*Receipt)
	}{
		{"no act id", func(r *Receipt) { r.ActID = "" }},
		{"no decision", func(r *Receipt) { r.Decision = "" }},
		{"unknown decision", func(r *Receipt) { r.Decision = "maybe" }},
		{"outcome without state", func(r *Receipt) { r.Decision, r.State = DecisionOutcome, "" }},
		{"no arguments digest", func(r *Receipt) { r.ArgumentsDigest = "" }},
		{"raw arguments instead of a digest", func(r *Receipt) { r.ArgumentsDigest = `{"amount":100}` }},
		{"upper-case digest", func(r *Receipt) { r.ArgumentsDigest = strings.ToUpper(r.ArgumentsDigest) }},
		{"bad action digest", func(r *Receipt) { r.ActionDigest = "sha256:00" }},
		{"long tool", func(r *Receipt) { r.Tool = long }},
		{"long code", func(r *Receipt) { r.Code = long }},
		{"invalid UTF-8", func(r *Receipt) { r.Server = "a\xffb" }},
		{"surrogate in UTF-8", func(r *Receipt) { r.OperationID = "\xed\xa0\x80" }},
		{"year 10000", func(r *Receipt) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sample(1)
			tt.mod(&r)
			if _, err := l.Append(r); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Append: %v, want ErrInvalid", err)
			}
			if _, err := l.AppendDurable(t.Context(), r); !errors.Is(err, ErrInvalid) {
				t.Fatalf("AppendDurable: %v, want ErrInvalid", err)
			}
		})
	}
	got, err := l.Append(sample(1))
	if err != nil || got.Seq != 1 || got.Prev != ZeroDigest {
		t.Fatalf("first valid receipt: seq %d prev %s err %v; rejected receipts must not take a seq", got.Seq, got.Prev, err)
	}
}

// TestAppendAssigns: the log assigns seq, prev, digest and (when zero) time; a caller's time
// is kept, in UTC; caller-supplied seq, prev and digest are ignored.
func TestAppendAssigns(t *testing.T) {
	l := openTest(t, filepath.Join(t.TempDir(), "log"), testKey(t, "k"), nil)
	defer l.Close()
	r := sample(0)
	r.Seq, r.Prev, r.Digest = 99, "sha256:forged", "sha256:forged"
	a, err := l.Append(r)
	if err != nil {
		t.Fatal(err)
	}
	if a.Seq != 1 || a.Prev != ZeroDigest || !jcs.IsDigest(a.Digest) || a.Time.IsZero() || a.Time.Location() != time.UTC {
		t.Fatalf("first receipt %+v", a)
	}
	pre, _ := appendCanonical(nil, &a, false)
	if a.Digest != jcs.Digest(pre) {
		t.Fatalf("digest %s is not the digest of %s", a.Digest, pre)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	r = sample(1)
	r.Time = at
	b, err := l.Append(r)
	if err != nil {
		t.Fatal(err)
	}
	if b.Seq != 2 || b.Prev != a.Digest || !b.Time.Equal(at) || b.Time.Location() != time.UTC {
		t.Fatalf("second receipt %+v", b)
	}
}

// receiptWire is Receipt without its methods, for encoding/json's view of it.
type receiptWire Receipt
