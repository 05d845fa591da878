package reconcile

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzParseAnswer: arbitrary bytes never panic; a rejection is ErrMalformed with its code; an
// accepted answer has well-formed members, re-encodes to an answer that parses to the same
// values, and Judge decides it without error (settling only when everything matches).
func FuzzParseAnswer(f *testing.F) {
	f.Add([]byte(validAnswerBody()))
	for _, s := range []string{``, `{}`, `[]`, `null`, `{"a":1,"a":2}`, "\"\xff\"", `{"evidence":{}}`,
		`{"actionDigest":"` + digestA + `","nonce":"` + nonceA + `","observedAt":"2026-11-29T15:00:00.5+01:00","operationID":"op","outcome":"UNKNOWN","server":"s","tool":"t","evidence":{"x":[1,2,{"y":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := ParseAnswer(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || CodeOf(err) != CodeMalformed {
				t.Fatalf("rejection without ErrMalformed: %v", err)
			}
			return
		}
		if !isNonce(a.Nonce) || a.OperationID == "" || a.Tool == "" || a.Server == "" || a.EvidenceDigest == "" {
			t.Fatalf("accepted an answer with a bad member: %+v", a)
		}
		again, err := ParseAnswer(mustEncode(t, a))
		if err != nil || again.Query != a.Query || again.Outcome != a.Outcome || !again.ObservedAt.Equal(a.ObservedAt) || !bytes.Equal(again.Evidence, a.Evidence) {
			t.Fatalf("re-encoded answer differs: %+v, %v", again, err)
		}
		v, err := Judge(testExpectation(), a, time.Hour, a.ObservedAt.Add(time.Minute))
		if err != nil {
			t.Fatalf("Judge: %v", err)
		}
		matches := a.OperationID == "op-0001" && a.ActionDigest == digestA && a.Tool == "send_payment" && a.Server == "payments"
		if v.Finding.Settles() && !matches {
			t.Fatalf("settled on an answer about another operation: %+v", a)
		}
	})
}

// FuzzVerify: a signature verifies only for the exact body and key it was made with.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(validAnswerBody()), "")
	f.Add([]byte(`{}`), "v1=")
	f.Add([]byte(``), Sign(testKey, nil))
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		err := Verify(testKey, body, sig)
		if err == nil && sig != Sign(testKey, body) {
			t.Fatalf("verified a signature that Sign did not make")
		}
		if err != nil && !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("error without ErrUnauthenticated: %v", err)
		}
		if Verify(testKey, body, Sign(testKey, body)) != nil {
			t.Fatalf("own signature does not verify")
		}
		if Verify(otherKey, body, Sign(testKey, body)) == nil {
			t.Fatalf("signature verified under another key")
		}
	})
}

// FuzzParseQuery: never panics; an accepted query re-encodes to the same bytes as its canonical
// form.
func FuzzParseQuery(f *testing.F) {
	q := testQuery()
	q.Nonce = nonceA
	b, _ := EncodeQuery(q)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		q, err := ParseQuery(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("rejection without ErrMalformed: %v", err)
			}
			return
		}
		enc, err := EncodeQuery(q)
		if err != nil {
			t.Fatalf("EncodeQuery: %v", err)
		}
		back, err := ParseQuery(enc)
		if err != nil || back != q {
			t.Fatalf("round trip: %+v, %v", back, err)
		}
	})
}
