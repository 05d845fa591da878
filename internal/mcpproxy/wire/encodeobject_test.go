package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestEncodeObject checks names are sorted and escaped as JSON requires, values are written as
// given, and the result decodes to the same members.
func TestEncodeObject(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]json.RawMessage
		want string
	}{
		{nil, `{}`},
		{map[string]json.RawMessage{"b": json.RawMessage(`1`), "a": json.RawMessage(` {"x": [1, 2]} `)}, `{"a":{"x": [1, 2]},"b":1}`},
		{map[string]json.RawMessage{"q\"\\\n\r\t\x01<>&": json.RawMessage(`"<&>"`)}, `{"q\"\\\n\r\t\u0001<>&":"<&>"}`},
		{map[string]json.RawMessage{"é\u2028": json.RawMessage(`null`)}, "{\"é\u2028\":null}"},
		{map[string]json.RawMessage{"bad\xff": json.RawMessage(`true`)}, "{\"bad\ufffd\":true}"},
	} {
		got := string(EncodeObject(tc.in))
		if got != tc.want {
			t.Errorf("EncodeObject(%v) = %s, want %s", tc.in, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("EncodeObject(%v) = %s is not JSON", tc.in, got)
		}
	}
}

// FuzzEncodeObject checks that an object decoded into members and written again by
// EncodeObject is valid JSON with the same members as encoding/json writes.
func FuzzEncodeObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,null]}`, `{"\u0000\"":"x","é":{"k":"\ud800"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(in, &m) != nil {
			return
		}
		got := EncodeObject(m)
		if !json.Valid(got) {
			t.Fatalf("EncodeObject of %s = %s, not JSON", in, got)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
			t.Fatalf("EncodeObject of %s = %s does not decode", in, got)
		}
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if !bytes.Equal(ga, gb) {
			t.Fatalf("EncodeObject of %s = %s, encoding/json writes %s", in, got, want)
		}
	})
}
