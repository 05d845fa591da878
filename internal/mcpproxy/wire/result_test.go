package wire

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultCases are tools/call results an upstream can send: text, other content types, the
// 2026-07-28 members, and malformed, mistyped, case-folded and deep inputs.
var resultCases = []string{
	`{"content":[{"type":"text","text":"ok"}]}`,
	`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b","_meta":{"k":1},"annotations":{"audience":["user"],"priority":0.5}}],"isError":true}`,
	`{"content":[],"structuredContent":{"balance":1000,"list":[1,"x",null,true]},"_meta":{"actgate.io/x":"y"}}`,
	`{"content":null}`,
	`{}`,
	`{"content":[{"type":"text"}]}`,
	`{"content":[{"type":"text","text":7}]}`,
	`{"content":[{"type":"text","text":"x","extra":{"deep":[1]}}]}`,
	`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}`,
	`{"content":[{"type":"text","text":"x"},{"type":"resource_link","uri":"file:///a","name":"a"}]}`,
	`{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"t"}}]}`,
	`{"content":[{"type":"bogus"}]}`,
	`{"content":[null]}`,
	`{"content":[{"Type":"text","Text":"x"}]}`,
	`{"content":[{"type":"text","text":"x"}],"IsError":true}`,
	`{"content":"text"}`,
	`{"content":[{"type":"text","text":"x"}],"isError":"yes"}`,
	`{"content":[{"type":"text","text":"x"}],"requestState":"s1"}`,
	`{"content":[],"inputRequests":{"r1":{"method":"elicitation/create","params":{}}},"requestState":"s"}`,
	`{"content":[],"resultType":"input_required"}`,
	`{"content":[{"type":"text","text":"x","annotations":{"priority":"high"}}]}`,
	`{"content":[{"type":"text","text":"x","_meta":[]}]}`,
	`[]`,
	`null`,
	`"x"`,
	`{"content":[{"type":"text","text":"x"}]`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":` + strings.Repeat("[", 990) + strings.Repeat("]", 990) + `}`,
}

// TestDecodeCallToolResultAgreesWithSDK: DecodeCallToolResult accepts exactly what the SDK's
// CallToolResult.UnmarshalJSON accepts and yields the same result.
func TestDecodeCallToolResultAgreesWithSDK(t *testing.T) {
	for _, in := range resultCases {
		resultSameAsSDK(t, []byte(in))
	}
}

func resultSameAsSDK(t *testing.T, in []byte) {
	t.Helper()
	want := &mcp.CallToolResult{}
	werr := want.UnmarshalJSON(in)
	got, gerr := DecodeCallToolResult(in)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%.200q: the SDK says %v, DecodeCallToolResult %v", in, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%.200q: the SDK decodes %#v, DecodeCallToolResult %#v", in, want, got)
	}
}

func FuzzDecodeCallToolResult(f *testing.F) {
	for _, in := range resultCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return // the caller refuses an empty result before decoding it
		}
		resultSameAsSDK(t, in)
	})
}
