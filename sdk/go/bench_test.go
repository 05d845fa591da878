package actgate_test

// T-F (tool-use-binding §22): what the gate adds to a call, measured through the wrapper against
// the same tool called directly, in the same run. Each sub-benchmark reports the p50 and p99 of
// one call in milliseconds (b.ReportMetric), besides ns/op.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	actgate "github.com/actgate/actgate/sdk/go"
)

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(p float64) float64 {
		i := int(p * float64(len(d)-1))
		return float64(d[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkHostLoop: "wrapper" runs a get_balance tool_use (the hot path of an INFORMATIONAL
// tool) through RunAnthropicToolUse — enforce at `actgate serve`, then the tool, an MCP call to
// the upstream; "direct" is the same MCP call without the gate. The difference is the
// wrapper's overhead per call.
func BenchmarkHostLoop(b *testing.B) {
	up := startUpstream(b)
	g := startGate(b, map[string]string{"finance": up.URL})
	tools := hostTools(b, up.URL)
	gc := g.client()
	ctx := context.Background()
	opts := actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Session: session("bench"), Provenance: actgate.ProvenanceUser}}

	b.Run("wrapper", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			i++
			tu := anthropic.ToolUseBlock{ID: fmt.Sprintf("toolu_bench%08d", i), Name: "get_balance", Input: json.RawMessage(`{"account":"main"}`)}
			start := time.Now()
			_, cr := gc.RunAnthropicToolUse(ctx, tu, tools, opts)
			lat = append(lat, time.Since(start))
			if !cr.Ran || cr.IsError {
				b.Fatalf("call %d: %+v", i, cr)
			}
		}
		reportPercentiles(b, lat)
	})
	b.Run("direct", func(b *testing.B) {
		var lat []time.Duration
		call := tools["get_balance"]
		for b.Loop() {
			start := time.Now()
			if _, err := call(ctx, actgate.Call{Name: "get_balance", Arguments: json.RawMessage(`{"account":"main"}`)}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})
}
