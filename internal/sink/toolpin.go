package sink

import (
	"context"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/sink/toolpin"
)

// Pinned tool definitions (docs/api.md "Pinned tool definitions", docs/architecture.md "Pinned
// tool definitions") are internal/sink/toolpin's: the gate holds one toolpin.Table, tells it each
// tools/list page (ListedTools) and asks it on the call path (handle.go refusedByPin). These are
// its types as the rest of the product names them.
type (
	// ToolPin is how the governing rule pins a tool's definition (toolpin.Pin).
	ToolPin = toolpin.Pin
	// ToolPinner is implemented by a PolicyEvaluator whose rules can pin tool definitions
	// (toolpin.Pinner). A PolicyEvaluator that does not implement it pins nothing.
	ToolPinner = toolpin.Pinner
	// PinRecord is a definition digest recorded on first use or accepted by an operator
	// (toolpin.Record).
	PinRecord = toolpin.Record
	// PinStore keeps the recorded and accepted definition digests (toolpin.Store).
	PinStore = toolpin.Store
	// ChangeRecorder is a PinStore that keeps changed definitions awaiting acceptance
	// (toolpin.ChangeRecorder).
	ChangeRecorder = toolpin.ChangeRecorder
	// ToolChangeEvent says an upstream lists a pinned tool with a definition that is not the
	// accepted one (toolpin.ChangeEvent).
	ToolChangeEvent = toolpin.ChangeEvent
	// ToolChangeObserver is implemented by an Observer that wants ToolChangeEvents
	// (toolpin.ChangeObserver).
	ToolChangeObserver = toolpin.ChangeObserver
	// ListedTool is one tool of an upstream's tools/list as the transport read it
	// (toolpin.Listed).
	ListedTool = toolpin.Listed
)

// PinFirstUse is PinRecord.AcceptedBy of a digest recorded on first use.
const PinFirstUse = toolpin.FirstUse

func (g *gate) toolPinner() ToolPinner {
	p, _ := g.policy.(ToolPinner)
	return p
}

// newPinTable is the gate's table of pinned tool definitions, reading and recording in store
// and telling the gate's observer of changes when it wants them.
func (g *gate) newPinTable(store PinStore) *toolpin.Table {
	t := &toolpin.Table{Store: store, Log: g.log, Now: g.now}
	if o, ok := g.observer.(ToolChangeObserver); ok {
		t.Observer = o
	}
	return t
}

// checkPin is the call path: a call of a pinned tool is refused (EF_TOOL_CHANGED) unless the
// gate has seen the tool listed and the definition it saw last is the accepted one
// (toolpin.Table.Check).
func (g *gate) checkPin(ctx context.Context, server, tool string) (code ef.EFCode, msg string, audit bool) {
	return g.pins.Check(ctx, g.toolPinner(), server, tool)
}

// ListedTools is told the tools of one tools/list page an upstream of server answered (each
// digested by the transport) and returns the names to hide from the agent: pinned tools whose
// definition is not the accepted one. Nil when nothing is hidden.
func (g *Gate) ListedTools(ctx context.Context, server string, tools []ListedTool) map[string]bool {
	if g == nil || g.g == nil {
		return nil
	}
	return g.g.pins.Listed(ctx, g.g.toolPinner(), server, tools)
}

// ToolDefinitionChanged tells each observer that implements ToolChangeObserver.
func (m multiObserver) ToolDefinitionChanged(e ToolChangeEvent) {
	for _, o := range m {
		if t, ok := o.(ToolChangeObserver); ok {
			t.ToolDefinitionChanged(e)
		}
	}
}
