package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/actgate/actgate/internal/sink"
)

// TestToolChanges: a change counts under its server and tool when the policy names the tool,
// under _unlisted when only a glob matched it (labels stay a bounded set), and reaches the
// counter through sink.Observers.
func TestToolChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	tc, err := NewToolChanges(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := sink.Observers(sink.NopObserver{}, tc)
	o.(sink.ToolChangeObserver).ToolDefinitionChanged(sink.ToolChangeEvent{Server: "finance", Tool: "send_payment", Named: true})
	o.(sink.ToolChangeObserver).ToolDefinitionChanged(sink.ToolChangeEvent{Server: "finance", Tool: "upstream-made-up-name-1", Named: false})
	o.(sink.ToolChangeObserver).ToolDefinitionChanged(sink.ToolChangeEvent{Server: "finance", Tool: "upstream-made-up-name-2", Named: false})
	want := `
# HELP actgate_tool_definition_changes_total Changed definitions of pinned tools the gate saw listed (hidden and refused until accepted), by server and tool.
# TYPE actgate_tool_definition_changes_total counter
actgate_tool_definition_changes_total{server="finance",tool="_unlisted"} 2
actgate_tool_definition_changes_total{server="finance",tool="send_payment"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), NameToolDefinitionChanges); err != nil {
		t.Fatal(err)
	}
}
