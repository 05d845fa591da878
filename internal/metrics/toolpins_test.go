package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/sink"
)

// TestToolChanges: the gate's metrics count a change under its server and tool when the policy names the tool,
// under _unlisted when only a glob matched it (labels stay a bounded set), and reaches the
// counter through sink.Observers.
func TestToolChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	tc, err := NewGate(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := sink.Observers(sink.NopObserver{}, tc)
	o.(sink.ToolChangeObserver).ToolDefinitionChanged(sink.ToolChangeEvent{Server: "finance", Tool: "send_payment", Named: true})
	o.(sink.ToolChangeObserver).ToolDefinitionChanged(sink.ToolChangeEvent{Server: "finance", Tool: "upstream-made-up-name-1", Named: false})
	o.(sink.ToolChangeObserver).ToolDefinitionChanged(sink.ToolChangeEvent{Server: "finance", Tool: "upstream-made-up-name-2", Named: false})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != NameToolDefinitionChanges {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"server=finance,tool=_unlisted,": 2, "server=finance,tool=send_payment,": 1}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("series %v, want %v", got, want)
		}
	}
}
