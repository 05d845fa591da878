package reconcile

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func validAnswerBody() string {
	return `{"actionDigest":"` + digestA + `","nonce":"` + nonceA + `","observedAt":"2026-11-29T15:00:00Z","operationID":"op-0001","outcome":"EXECUTED","server":"payments","tool":"send_payment"}`
}

func TestParseAnswer(t *testing.T) {
	a, err := ParseAnswer([]byte(validAnswerBody()))
	if err != nil {
		t.Fatalf("ParseAnswer: %v", err)
	}
	want := Query{OperationID: "op-0001", ActionDigest: digestA, Tool: "send_payment", Server: "payments", Nonce: nonceA}
	if a.Query != want || a.Outcome != OutcomeExecuted || !a.ObservedAt.Equal(t0) || a.Evidence != nil {
		t.Fatalf("ParseAnswer = %+v", a)
	}
	if !strings.HasPrefix(a.EvidenceDigest, "sha256:") || len(a.EvidenceDigest) != 71 {
		t.Fatalf("EvidenceDigest = %q", a.EvidenceDigest)
	}
	// The evidence digest is over the canonical form: whitespace does not change it, content does.
	spaced := strings.ReplaceAll(validAnswerBody(), ",", " ,\n ")
	b, err := ParseAnswer([]byte(spaced))
	if err != nil {
		t.Fatalf("ParseAnswer(spaced): %v", err)
	}
	if b.EvidenceDigest != a.EvidenceDigest {
		t.Fatalf("evidence digest depends on whitespace")
	}
	c, err := ParseAnswer([]byte(strings.Replace(validAnswerBody(), "EXECUTED", "FAILED", 1)))
	if err != nil || c.EvidenceDigest == a.EvidenceDigest || c.Outcome != OutcomeFailed {
		t.Fatalf("FAILED answer: %+v, %v", c, err)
	}
	withEvidence := strings.Replace(validAnswerBody(), `"nonce"`, `"evidence":{"payment":"pay_1", "amount":1},"nonce"`, 1)
	d, err := ParseAnswer([]byte(withEvidence))
	if err != nil || string(d.Evidence) != `{"amount":1,"payment":"pay_1"}` {
		t.Fatalf("evidence: %s, %v", d.Evidence, err)
	}
}

func TestParseAnswerRoundTrip(t *testing.T) {
	q := testQuery()
	q.Nonce = nonceA
	in := Answer{Query: q, Outcome: OutcomeUnknown, ObservedAt: t0.Add(1500 * time.Millisecond), Evidence: []byte(`{"k":"v"}`)}
	out, err := ParseAnswer(mustEncode(t, in))
	if err != nil {
		t.Fatalf("ParseAnswer: %v", err)
	}
	if out.Query != in.Query || out.Outcome != in.Outcome || !out.ObservedAt.Equal(in.ObservedAt) || string(out.Evidence) != `{"k":"v"}` {
		t.Fatalf("round trip: %+v", out)
	}
}

func TestParseAnswerRejects(t *testing.T) {
	v := validAnswerBody()
	rep := func(old, new string) string { return strings.Replace(v, old, new, 1) }
	for _, tc := range []struct{ name, body string }{
		{"empty", ``},
		{"not json", `hello`},
		{"array", `[]`},
		{"null", `null`},
		{"string", `"x"`},
		{"trailing data", v + `{}`},
		{"duplicate member", rep(`"tool":"send_payment"`, `"tool":"send_payment","tool":"refund"`)},
		{"case-folded duplicate", rep(`"tool":"send_payment"`, `"tool":"send_payment","TOOL":"refund"`)},
		{"unknown member", rep(`"tool"`, `"extra":1,"tool"`)},
		{"missing operationID", rep(`"operationID":"op-0001",`, ``)},
		{"missing nonce", rep(`"nonce":"`+nonceA+`",`, ``)},
		{"missing outcome", rep(`"outcome":"EXECUTED",`, ``)},
		{"missing observedAt", rep(`"observedAt":"2026-11-29T15:00:00Z",`, ``)},
		{"empty operationID", rep(`"op-0001"`, `""`)},
		{"operationID not a string", rep(`"op-0001"`, `1`)},
		{"operationID too long", rep(`"op-0001"`, `"`+strings.Repeat("o", 257)+`"`)},
		{"tool too long", rep(`"send_payment"`, `"`+strings.Repeat("t", 129)+`"`)},
		{"server too long", rep(`"payments"`, `"`+strings.Repeat("s", 64)+`"`)},
		{"action digest upper case", rep(digestA, strings.ToUpper(digestA))},
		{"action digest short", rep(digestA, digestA[:70])},
		{"nonce upper case", rep(nonceA, strings.ToUpper(nonceA))},
		{"nonce short", rep(nonceA, nonceA[:30])},
		{"outcome lower case", rep(`"EXECUTED"`, `"executed"`)},
		{"outcome unknown value", rep(`"EXECUTED"`, `"DONE"`)},
		{"observedAt not a time", rep(`"2026-11-29T15:00:00Z"`, `"yesterday"`)},
		{"observedAt without zone", rep(`"2026-11-29T15:00:00Z"`, `"2026-11-29T15:00:00"`)},
		{"evidence not an object", rep(`"nonce"`, `"evidence":[1],"nonce"`)},
		{"evidence null", rep(`"nonce"`, `"evidence":null,"nonce"`)},
		{"invalid utf-8", rep(`send_payment`, "send_\xffpayment")},
		{"unpaired surrogate", rep(`send_payment`, `send_\ud800payment`)},
		{"too large", rep(`"nonce"`, `"evidence":{"x":"`+strings.Repeat("x", MaxAnswerBytes)+`"},"nonce"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAnswer([]byte(tc.body))
			if !errors.Is(err, ErrMalformed) || CodeOf(err) != CodeMalformed {
				t.Fatalf("ParseAnswer = %+v, %v; want ErrMalformed", a, err)
			}
		})
	}
}

func TestParseQuery(t *testing.T) {
	q := testQuery()
	q.Nonce = nonceA
	b, err := EncodeQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actionDigest":"` + digestA + `","nonce":"` + nonceA + `","operationID":"op-0001","server":"payments","tool":"send_payment"}`
	if string(b) != want {
		t.Fatalf("EncodeQuery = %s\nwant %s", b, want)
	}
	got, err := ParseQuery(b)
	if err != nil || got != q {
		t.Fatalf("ParseQuery = %+v, %v", got, err)
	}
	for _, bad := range []string{``, `{}`, `[]`, strings.Replace(want, `"tool"`, `"x":1,"tool"`, 1), strings.Replace(want, `"op-0001"`, `""`, 1)} {
		if _, err := ParseQuery([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseQuery(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestVerify(t *testing.T) {
	body := []byte(validAnswerBody())
	good := Sign(testKey, body)
	if !strings.HasPrefix(good, "v1=") || len(good) != 3+64 {
		t.Fatalf("Sign = %q", good)
	}
	if err := Verify(testKey, body, good); err != nil {
		t.Fatalf("Verify(valid) = %v", err)
	}
	tampered := []byte(strings.Replace(validAnswerBody(), "EXECUTED", "FAILED", 1))
	for _, tc := range []struct {
		name string
		key  []byte
		body []byte
		sig  string
	}{
		{"missing", testKey, body, ""},
		{"other scheme", testKey, body, "v2=" + good[3:]},
		{"no scheme", testKey, body, good[3:]},
		{"upper-case hex", testKey, body, "v1=" + strings.ToUpper(good[3:])},
		{"short", testKey, body, good[:66]},
		{"not hex", testKey, body, "v1=" + strings.Repeat("zz", 32)},
		{"other key", otherKey, body, good},
		{"tampered body", testKey, tampered, good},
		{"mac without the context string", testKey, body, "v1=" + hex.EncodeToString(plainMAC(testKey, body))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(tc.key, tc.body, tc.sig); !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("Verify = %v, want ErrUnauthenticated", err)
			}
		})
	}
}

func plainMAC(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return h.Sum(nil)
}
