package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseCancelledBadInput: only an object with a string or number requestId names a
// request; the reason is bounded.
func TestParseCancelledBadInput(t *testing.T) {
	for _, in := range []string{``, `null`, `[]`, `{}`, `{"requestId":null}`, `{"requestId":true}`, `{"requestId":{}}`,
		`{"requestId":[1]}`, `{"requestId":"a","reason":5}`, `{"requestId":1`} {
		if id, _, ok := ParseCancelled(json.RawMessage(in)); ok {
			t.Errorf("ParseCancelled(%s) = %v, want not ok", in, id.Raw())
		}
	}
	id, reason, ok := ParseCancelled(json.RawMessage(`{"requestId":"x","reason":"` + strings.Repeat("r", 5000) + `"}`))
	if !ok || id.Raw() != "x" || len(reason) != MaxCancelReason {
		t.Errorf("long reason: %v %d %v", id.Raw(), len(reason), ok)
	}
	if id, _, ok := ParseCancelled(json.RawMessage(`{"requestId":11}`)); !ok || id.Raw() != int64(11) {
		t.Errorf("numeric id: %v %v", id.Raw(), ok)
	}
}

// FuzzParseCancelled: no input panics; an accepted one names a valid id and a bounded reason.
func FuzzParseCancelled(f *testing.F) {
	for _, s := range []string{`{"requestId":1}`, `{"requestId":"a","reason":"r"}`, `{"requestId":1e400}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		id, reason, ok := ParseCancelled(in)
		if ok && (!id.IsValid() || len(reason) > MaxCancelReason) {
			t.Fatalf("ParseCancelled(%q) = %v %q", in, id.Raw(), reason)
		}
	})
}
