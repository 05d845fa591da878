package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeCases are messages both decoders see: valid requests, notifications and responses, and
// the malformed, mistyped, case-folded, deep and trailing inputs an agent or an upstream can send.
var decodeCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`,
	`{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no such method"}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"m","data":{"x":1}}}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":null,"result":{}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
	`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"id":1,"method":"ping"}`,
	`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","ID":1,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{"jsonrpc":"2.0","id":1,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1,2]}`,
	`{"jsonrpc":"2.0","id":1,"method":"p\u0000ing"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":7,"error":"boom"}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`"jsonrpc"`,
	`null`,
	``,
	`{}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":"` + strings.Repeat("[", 2000) + `"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
}

// TestDecodeMessageAgreesWithSDK: DecodeMessage accepts exactly what the SDK's decoder accepts
// and yields the same message, so taking the SDK's decoder off the gate's path changes no answer.
func TestDecodeMessageAgreesWithSDK(t *testing.T) {
	for _, in := range decodeCases {
		sameAsSDK(t, []byte(in))
	}
}

func sameAsSDK(t *testing.T, in []byte) {
	t.Helper()
	want, werr := jsonrpc.DecodeMessage(in)
	got, gerr := DecodeMessage(in)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%.200q: the SDK's decoder says %v, DecodeMessage %v", in, werr, gerr)
	}
	if werr != nil {
		return
	}
	if !reflect.DeepEqual(normal(want), normal(got)) {
		t.Fatalf("%.200q: the SDK decodes %#v, DecodeMessage %#v", in, want, got)
	}
}

// normal makes decoded messages comparable: raw members compared as bytes, errors by content.
func normal(m jsonrpc.Message) any {
	switch m := m.(type) {
	case *jsonrpc.Request:
		return [4]any{"request", m.ID.Raw(), m.Method, string(m.Params)}
	case *jsonrpc.Response:
		var e any
		var we *jsonrpc.Error
		if errors.As(m.Error, &we) {
			e = [3]any{we.Code, we.Message, string(we.Data)}
		}
		return [4]any{"response", m.ID.Raw(), string(m.Result), e}
	}
	return m
}

func TestDecodeMessageDepth(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`
	if _, err := DecodeMessage([]byte(deep)); !errors.Is(err, ErrDepth) {
		t.Fatalf("a message nested %d deep: %v, want ErrDepth", MaxDepth+1, err)
	}
	inString := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"` + strings.Repeat("[", MaxDepth+1) + `\"]"}}`
	if _, err := DecodeMessage([]byte(inString)); err != nil {
		t.Fatalf("brackets inside a string counted: %v", err)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, in := range decodeCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		sameAsSDK(t, in)
	})
}
