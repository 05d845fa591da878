package act

import "testing"

// Mapping cost on the hot path (tool-use-binding §18: enforce() budget; §22 T-F measures the
// whole enforce() in internal/sink). Run: go test -run '^$' -bench . ./internal/act
func BenchmarkMapOpenAIToolCall(b *testing.B) {
	call := []byte(`{"id":"call_8f3","type":"function","function":{"name":"payout_create","arguments":"{\"amount\":\"150.00\",\"currency\":\"EUR\",\"beneficiary\":\"vendor-441\"}"}}`)
	mc := testCtx(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MapOpenAIToolCall(call, mc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMapMCPToolsCall(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod","ref":"main"}}}`)
	mc := mcpCtx(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MapMCPToolsCall(req, mc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCandidateAct(b *testing.B) {
	c, err := MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"repo_deploy","arguments":{"env":"prod"}}}`), mcpCtx(b))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := c.Act.Canonical()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCandidateAct(raw); err != nil {
			b.Fatal(err)
		}
	}
}
