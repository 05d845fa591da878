package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/sink"
)

// NameToolDefinitionChanges counts the changed definitions of pinned tools the gate saw listed.
const NameToolDefinitionChanges = "actgate_tool_definition_changes_total"

// ToolUnlisted is the tool label of a change to a tool the policy matches only through a glob:
// labels carry only names the policy itself holds, a bounded set.
const ToolUnlisted = "_unlisted"

var _ sink.ToolChangeObserver = (*Gate)(nil)

// newToolChanges is actgate_tool_definition_changes_total{server,tool}: once per server, tool
// and changed digest the gate saw listed (docs/api.md "Pinned tool definitions").
func newToolChanges() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameToolDefinitionChanges,
		Help: "Changed definitions of pinned tools the gate saw listed (hidden and refused until accepted), by server and tool.",
	}, []string{"server", "tool"})
}

// ToolDefinitionChanged counts one change (sink.ToolChangeObserver).
func (g *Gate) ToolDefinitionChanged(e sink.ToolChangeEvent) {
	if g == nil {
		return
	}
	tool := e.Tool
	if !e.Named {
		tool = ToolUnlisted
	}
	g.toolChanges.WithLabelValues(e.Server, tool).Inc()
}
