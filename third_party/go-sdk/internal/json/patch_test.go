// actgate patch test (third_party/go-sdk/PATCHES.md): Unmarshal, which now parses in place,
// gives what the Decoder it replaced gives on every input below: an error for the same inputs,
// the same value otherwise.

package json

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnmarshalMatchesDecoder(t *testing.T) {
	type msg struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Method  string         `json:"method"`
		Params  map[string]any `json:"params"`
		Field   string         `json:"field"`
	}
	inputs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2,{"b":null}]}}}`,
		`  {"jsonrpc":"2.0","id":"s"}  `,
		`{"jsonrpc":"2.0"} trailing`,
		`{"jsonrpc":"2.0"}{"second":1}`,
		`{"FIELD":"case differs"}`,
		`{"field":"\ud83d\ude00 \u0000"}`,
		`{"id":12345678901234567890123}`,
		`{"jsonrpc":`,
		`{"jsonrpc":"2.0",}`,
		`[1,2,3]`,
		`"str"`,
		`null`,
		``,
		`   `,
		`{"params":{"a":1,"a":2}}`,
	}
	for _, in := range inputs {
		var viaDecoder, viaUnmarshal msg
		errD := NewDecoder(bytes.NewReader([]byte(in))).Decode(&viaDecoder)
		errU := Unmarshal([]byte(in), &viaUnmarshal)
		if (errD == nil) != (errU == nil) {
			t.Errorf("%q: Decoder error %v, Unmarshal error %v", in, errD, errU)
			continue
		}
		if errU != nil {
			// On an error the value is not defined (the Decoder stops before decoding, Parse
			// part way, as encoding/json does); every caller in the SDK checks the error.
			continue
		}
		if d := cmp.Diff(viaDecoder, viaUnmarshal); d != "" {
			t.Errorf("%q: values differ (-Decoder +Unmarshal):\n%s", in, d)
		}
	}
}

func BenchmarkUnmarshalMessage(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"invoice 42"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := Unmarshal(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}
