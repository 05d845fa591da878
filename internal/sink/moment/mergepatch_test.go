package moment

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestMergePatch(t *testing.T) {
	// RFC 7396 Appendix A, with object targets and patches (the only shapes alternatives use).
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Numbers keep their text: no float round trip.
		{`{"amount":9007199254740991}`, `{"dry_run":true}`, `{"amount":9007199254740991,"dry_run":true}`},
	} {
		got, err := MergePatch(json.RawMessage(tc.target), json.RawMessage(tc.patch))
		if err != nil {
			t.Fatalf("%s + %s: %v", tc.target, tc.patch, err)
		}
		if string(got) != tc.want {
			t.Fatalf("%s + %s = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
	for _, bad := range [][2]string{{`[1]`, `{}`}, {`{}`, `"x"`}, {`{`, `{}`}, {`{}`, `{} {}`}} {
		if _, err := MergePatch(json.RawMessage(bad[0]), json.RawMessage(bad[1])); !errors.Is(err, errPatch) {
			t.Fatalf("%s + %s: %v", bad[0], bad[1], err)
		}
	}
}

func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"a":null,"b":{"c":2}}`))
	f.Add([]byte(`{}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, target, patch []byte) {
		out, err := MergePatch(target, patch)
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("result is not an object: %s", out)
		}
	})
}
