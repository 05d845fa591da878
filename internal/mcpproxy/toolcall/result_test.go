package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

// TestAugmentToolsRawBadInput: a tools/list result that is not an object with an array of tool
// objects is refused with errToolsList, never passed on unannotated.
func TestAugmentToolsRawBadInput(t *testing.T) {
	never := func(string) bool { return false }
	for _, in := range []string{``, `null`, `[]`, `"tools"`, `{"tools":{}}`, `{"tools":[1]}`, `{"tools":[null]}`,
		`{"tools":[{"name":5}]}`, `{"tools":[{"name":"a","annotations":"x"}]}`, `{"tools":[{"name":"a"}`, `{"tools":"a"}`} {
		if out, err := AugmentToolsRaw(json.RawMessage(in), true, func(string) bool { return true }, nil); err == nil {
			t.Errorf("AugmentToolsRaw(%s) = %s, want an error", in, out)
		}
	}
	// No tools at all is a list: the virtual tool alone.
	out, err := AugmentToolsRaw(json.RawMessage(`{}`), true, never, nil)
	if err != nil || !bytes.Contains(out, []byte(sink.RequestBindingMomentTool)) {
		t.Errorf("AugmentToolsRaw({}) = %s, %v", out, err)
	}
}

// FuzzAugmentToolsRaw: any upstream tools/list result either is refused or gives an object
// whose tools end with the virtual tool and name it nowhere else.
func FuzzAugmentToolsRaw(f *testing.F) {
	for _, s := range []string{`{"tools":[]}`, `{"tools":[{"name":"a","execution":{"taskSupport":"required"}}],"nextCursor":"c"}`,
		`{"tools":[{"name":"request_binding_moment"},{"name":"b","annotations":{"x":1},"_meta":null}]}`, `{"tools":null}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := AugmentToolsRaw(in, true, func(n string) bool { return len(n)%2 == 0 }, func(string, bool) {})
		if err != nil {
			return
		}
		var doc struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("output is not a tools/list result: %v: %s", err, out)
		}
		for i, tl := range doc.Tools {
			if (tl.Name == sink.RequestBindingMomentTool) != (i == len(doc.Tools)-1) {
				t.Fatalf("virtual tool misplaced in %s", out)
			}
		}
	})
}

func deliveries() []sink.Delivery {
	one := 1
	return []sink.Delivery{
		{MomentID: "bm-1", EnvelopeDigest: "sha256:" + strings.Repeat("a", 64), Kind: "option", OptionIdx: &one, Tool: "send_payment", Server: "bank", Authorized: true},
		{MomentID: "bm-2", EnvelopeDigest: "sha256:" + strings.Repeat("b", 64), Kind: "answer", Answer: "Pay half now."},
		{MomentID: "bm-3", EnvelopeDigest: "sha256:" + strings.Repeat("c", 64), Kind: "question"},
		{MomentID: "bm-4", EnvelopeDigest: "sha256:" + strings.Repeat("d", 64), Kind: "declined"},
	}
}

// TestWithDeliveries: resolutions reach the agent with an upstream result, in _meta and as a
// text block that keeps the four kinds apart (envelope-04 §7.3); the upstream's members stay.
func TestWithDeliveries(t *testing.T) {
	up := json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"n":1},"_meta":{"vendor/x":true}}`)
	out, err := WithDeliveries(up, deliveries())
	if err != nil {
		t.Fatal(err)
	}
	var r mcp.CallToolResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Meta["vendor/x"] != true || r.Meta[MetaResolutions] == nil {
		t.Errorf("_meta %v", r.Meta)
	}
	if len(r.Content) != 2 || testutil.Text(&mcp.CallToolResult{Content: r.Content[:1]}) != "ok" {
		t.Fatalf("content %s", out)
	}
	msg := r.Content[1].(*mcp.TextContent).Text
	for _, want := range []string{"bm-1", "option 2", "authorised", "bm-2", `"Pay half now."`, "bm-3", "rejected the question", "bm-4", "declined"} {
		if !strings.Contains(msg, want) {
			t.Errorf("delivery text lacks %q:\n%s", want, msg)
		}
	}
	if same, err := WithDeliveries(up, nil); err != nil || string(same) != string(up) {
		t.Errorf("without deliveries the bytes changed: %s %v", same, err)
	}
}

func TestWithDeliveriesBadUpstreamResult(t *testing.T) {
	for _, raw := range []string{``, `null`, `[]`, `"x"`, `{"content":{}}`, `{"_meta":[]}`, `{"content":"x"}`, `{`} {
		if _, err := WithDeliveries(json.RawMessage(raw), deliveries()); err == nil {
			t.Errorf("%q: accepted", raw)
		}
	}
}

// TestAnnotateKeepsMembers: the flag is added beside what the upstream had.
func TestAnnotateKeepsMembers(t *testing.T) {
	tool := map[string]json.RawMessage{
		"name":        json.RawMessage(`"t"`),
		"annotations": json.RawMessage(`{"readOnlyHint":true,"vendor":"x"}`),
		"_meta":       json.RawMessage(`{"k":1}`),
	}
	if err := annotate(tool); err != nil {
		t.Fatal(err)
	}
	var a, m map[string]any
	_ = json.Unmarshal(tool["annotations"], &a)
	_ = json.Unmarshal(tool["_meta"], &m)
	if a["readOnlyHint"] != true || a["vendor"] != "x" || a[AnnotationEmitsBindingMoment] != true {
		t.Errorf("annotations %v", a)
	}
	if m["k"] != float64(1) || m[AnnotationEmitsBindingMoment] != true {
		t.Errorf("_meta %v", m)
	}
	if err := annotate(map[string]json.RawMessage{"annotations": json.RawMessage(`[1]`)}); err == nil {
		t.Error("non-object annotations accepted")
	}
}

func TestRawResultMergesMeta(t *testing.T) {
	r := &RawResult{Raw: json.RawMessage(`{"content":[],"_meta":{"a":1}}`)}
	r.SetMeta(map[string]any{"b": 2, "a": 3})
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Meta map[string]float64 `json:"_meta"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Meta["a"] != 1 || got.Meta["b"] != 2 {
		t.Errorf("merged _meta %v: the held result's own members win", got.Meta)
	}
}

// FuzzWithDeliveries: an upstream result is untrusted bytes; adding deliveries must never
// panic, and what it returns is JSON carrying them.
func FuzzWithDeliveries(f *testing.F) {
	for _, s := range []string{`{"content":[{"type":"text","text":"ok"}]}`, `{}`, `{"_meta":null,"content":null}`,
		`{"content":[1,2],"_meta":{"x":[]}}`, `[]`, `{"a":"\u0000"}`, `{"content":[{"type":"image"}],"isError":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := WithDeliveries(raw, deliveries())
		if err != nil {
			return
		}
		var r struct {
			Meta    map[string]json.RawMessage `json:"_meta"`
			Content []json.RawMessage          `json:"content"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("output is not JSON: %v", err)
		}
		if r.Meta[MetaResolutions] == nil || len(r.Content) == 0 {
			t.Fatalf("deliveries missing: %s", out)
		}
	})
}

// FuzzAugmentTools: tools/list augmentation over arbitrary tool names and annotations.
func FuzzAugmentTools(f *testing.F) {
	f.Add("send_payment", "x", true)
	f.Add(sink.RequestBindingMomentTool, "", false)
	f.Add("", "\u2028", true)
	f.Fuzz(func(t *testing.T, name, title string, ro bool) {
		up := &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: name, InputSchema: map[string]any{"type": "object"},
			Annotations: &mcp.ToolAnnotations{Title: title, ReadOnlyHint: ro}}}}
		raw, err := AugmentTools(up, true, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		var got mcp.ListToolsResult
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tl := range got.Tools {
			if tl.Name == sink.RequestBindingMomentTool {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d virtual tools in %s", n, raw)
		}
	})
}

// TestResolveCommand: the text of an escalation names the command of the principal's deployment.
func TestResolveCommand(t *testing.T) {
	if got := ResolveCommand(&sink.MomentRef{ID: "bm-1"}); got != "actgate resolve bm-1" {
		t.Errorf("standalone: %q", got)
	}
	if got := ResolveCommand(&sink.MomentRef{ID: "bm-2", Namespace: "billing"}); got != "kubectl actgate resolve bm-2 -n billing" {
		t.Errorf("in a cluster: %q", got)
	}
}
