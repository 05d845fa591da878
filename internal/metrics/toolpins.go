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

// ToolChanges is actgate_tool_definition_changes_total{server,tool}: once per server, tool and
// changed digest the gate saw listed (docs/api.md "Pinned tool definitions"). It is a
// sink.Observer of ToolChangeEvents only.
type ToolChanges struct {
	sink.NopObserver
	total *prometheus.CounterVec
}

var _ sink.ToolChangeObserver = (*ToolChanges)(nil)

// NewToolChanges creates the counter and registers it with reg.
func NewToolChanges(reg prometheus.Registerer) (*ToolChanges, error) {
	t := &ToolChanges{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameToolDefinitionChanges,
		Help: "Changed definitions of pinned tools the gate saw listed (hidden and refused until accepted), by server and tool.",
	}, []string{"server", "tool"})}
	if err := register(reg, t.total); err != nil {
		return nil, err
	}
	return t, nil
}

// ToolDefinitionChanged counts one change.
func (t *ToolChanges) ToolDefinitionChanged(e sink.ToolChangeEvent) {
	if t == nil {
		return
	}
	tool := e.Tool
	if !e.Named {
		tool = ToolUnlisted
	}
	t.total.WithLabelValues(e.Server, tool).Inc()
}
