package stateless

import (
	"encoding/json"
	"testing"
)

// TestWithResultType checks that a result without resultType gets "complete" appended, with the
// upstream's bytes kept as written, and that anything else is returned unchanged.
func TestWithResultType(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{"resultType":"complete"}`},
		{` { } `, `{ "resultType":"complete"}`},
		{`{"b":1,"a":2}`, `{"b":1,"a":2,"resultType":"complete"}`},
		{`{"content":[{"type":"text","text":"}"}]}`, `{"content":[{"type":"text","text":"}"}],"resultType":"complete"}`},
		{`{"a":{"resultType":1}}`, `{"a":{"resultType":1},"resultType":"complete"}`},
		// Member names match as map keys do: case-sensitively.
		{`{"ResultType":"x"}`, `{"ResultType":"x","resultType":"complete"}`},
		// Present, whatever its value: unchanged.
		{`{"resultType":"input_required"}`, `{"resultType":"input_required"}`},
		{`{"resultType":null}`, `{"resultType":null}`},
		// Not an object, or not JSON: unchanged.
		{`[]`, `[]`},
		{`null`, `null`},
		{`{"a":`, `{"a":`},
		{``, ``},
	} {
		got := string(WithResultType(json.RawMessage(tc.in)))
		if got != tc.want {
			t.Errorf("WithResultType(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if json.Valid([]byte(tc.in)) && !json.Valid([]byte(got)) {
			t.Errorf("WithResultType(%q) = %q is not JSON", tc.in, got)
		}
	}
}

// TestRequestMeta checks that Meta reads params._meta once Parse has, and on demand otherwise.
func TestRequestMeta(t *testing.T) {
	built := &Request{Params: map[string]json.RawMessage{"_meta": json.RawMessage(`{"k":"v"}`)}}
	if got := string(built.Meta()["k"]); got != `"v"` {
		t.Errorf("Meta of a built request = %q, want \"v\"", got)
	}
	for _, bad := range []string{`[]`, `"x"`, `{`} {
		r := &Request{Params: map[string]json.RawMessage{"_meta": json.RawMessage(bad)}}
		if m := r.Meta(); m != nil {
			t.Errorf("Meta with _meta %s = %v, want nil", bad, m)
		}
	}
	if m := (&Request{}).Meta(); m != nil {
		t.Errorf("Meta without params = %v, want nil", m)
	}
}
