package actgate

import (
	"net/http"
	"testing"
)

// FuzzDecodeAnswer: whatever the bytes and status of an answer, decoding never panics, a
// non-200 answer is always an *Error, and an answer that both allows and refuses is never an
// allow.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{`{"allow":true}`, `{"allow":true,"code":"EF_002"}`, `{"allow":false,"code":"EF_ESCALATION_REQUIRED","binding_moments":["m"]}`,
		`{"error":{"code":"HOSTLOOP_SETTLED","message":"x"}}`, `null`, `[]`, `{"allow":1}`, "\xff"} {
		f.Add(200, []byte(s))
		f.Add(409, []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var d Decision
		err := decodeAnswer(status, body, &d)
		if status != http.StatusOK && err == nil {
			t.Fatalf("status %d decoded as an answer", status)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		if d.Allow && d.Code != "" {
			if checked := checkDecision(d); checked == nil {
				t.Fatal("an allow with a refusal code passed the check")
			}
		}
	})
}
