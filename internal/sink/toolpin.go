package sink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/tooldef"
)

// Pinned tool definitions (docs/api.md "Pinned tool definitions", docs/architecture.md "Pinned
// tool definitions"): a rule may pin the definitions of the tools it governs. The transport
// tells the gate each tool an upstream lists (ListedTools); a pinned tool whose definition is
// not the accepted one is hidden from the list, and Handle refuses its calls with
// EF_TOOL_CHANGED, as it does a pinned tool the gate has not seen listed since it started.

// ToolPin is how the governing rule pins a tool's definition.
type ToolPin struct {
	Policy, Rule string
	// OnFirstUse: the first definition seen is recorded (PinStore) and accepted.
	OnFirstUse bool
	// Digest is the digest the policy lists for the tool ("" = none).
	Digest string
	// Audit: the policy runs in mode Audit; a changed definition is reported, not hidden or
	// refused.
	Audit bool
	// Named: the policy names the tool itself, not only through a glob (bounded metric labels).
	Named bool
}

// ToolPinner is implemented by a PolicyEvaluator whose rules can pin tool definitions. A
// PolicyEvaluator that does not implement it pins nothing.
type ToolPinner interface {
	// ToolPin returns how the rule governing tool on server pins its definition; false when
	// the rule pins nothing.
	ToolPin(server, tool string) (ToolPin, bool)
}

// PinRecord is a definition digest recorded on first use or accepted by an operator.
type PinRecord struct {
	Server, Tool string
	// Digest is the accepted definition digest (tooldef.Definition.Digest).
	Digest string
	// Members are the accepted definition's member digests (for a diff; may be empty).
	Members map[string]string
	// AcceptedBy is PinFirstUse or who accepted the digest.
	AcceptedBy string
	AcceptedAt time.Time
}

// PinFirstUse is PinRecord.AcceptedBy of a digest recorded on first use.
const PinFirstUse = "first-use"

// PinStore keeps the recorded and accepted definition digests: the standalone gate's data dir,
// a ToolPolicy's status.toolPins in Kubernetes.
type PinStore interface {
	// Pinned returns the digest recorded for tool on server, if any.
	Pinned(ctx context.Context, server, tool string) (PinRecord, bool, error)
	// RecordFirstUse stores r unless a digest is already recorded for its server and tool, and
	// returns the record stored then.
	RecordFirstUse(ctx context.Context, r PinRecord) (PinRecord, error)
}

// ChangeRecorder is implemented by a PinStore that keeps the changed definitions awaiting an
// operator's acceptance (the standalone gate's data dir: what `actgate tools accept` accepts).
type ChangeRecorder interface {
	RecordChange(ctx context.Context, r PinRecord) error
}

// ToolChangeEvent says that an upstream lists a pinned tool with a definition that is not the
// accepted one. It carries names and digests, never the definition's text.
type ToolChangeEvent struct {
	Server, Tool, Policy, Rule string
	// Accepted is the accepted digest ("" when none is: a pinned tool without a listed or
	// recorded digest and without onFirstUse).
	Accepted string
	// Listed is the digest of the definition the upstream lists ("" when it cannot be
	// digested).
	Listed string
	// Changed names the members whose digests differ (nil when the accepted digest records no
	// members, as one listed in the policy does).
	Changed []string
	// Audit: the policy runs in mode Audit, so the tool was not hidden.
	Audit bool
	// Named: the policy names Tool itself; otherwise Tool came from the upstream through a glob.
	Named bool
}

// ToolChangeObserver is implemented by an Observer that wants ToolChangeEvents (metrics,
// Kubernetes Events). The gate tells it once per server, tool and listed digest.
type ToolChangeObserver interface {
	ToolDefinitionChanged(ToolChangeEvent)
}

// ListedTool is one tool of an upstream's tools/list as the transport read it.
type ListedTool struct {
	Name string
	// Definition is its digest; Err is set instead when it cannot be digested.
	Definition tooldef.Definition
	Err        error
}

// maxSeenTools bounds the pinned tools whose last listed definition the gate remembers; a
// pinned tool beyond it is not remembered, so its calls are refused as never listed.
const maxSeenTools = 4096

// pinTable is the gate's memory of the last definition each pinned tool was listed with.
type pinTable struct {
	mu       sync.Mutex
	seen     map[pinKey]seenTool
	reported map[pinKey]string // the listed digest last reported changed
}

type pinKey struct{ server, tool string }

type seenTool struct {
	digest  string // "" when the definition could not be digested
	members map[string]string
}

func (g *gate) toolPinner() ToolPinner {
	p, _ := g.policy.(ToolPinner)
	return p
}

// accepted returns the accepted digest of a pinned tool (the policy's, else the recorded one)
// and its members, recording def first when the pin is onFirstUse and nothing is recorded (in
// mode Audit too: audit observes what enforcement would pin). def is nil on the call path,
// which never records.
func (g *gate) accepted(ctx context.Context, server, tool string, pin ToolPin, def *tooldef.Definition) (string, map[string]string, error) {
	if pin.Digest != "" {
		return pin.Digest, nil, nil
	}
	if g.pinStore == nil {
		// Nowhere to read or record a digest: only a digest listed in the policy is accepted.
		return "", nil, nil
	}
	r, ok, err := g.pinStore.Pinned(ctx, server, tool)
	if err != nil {
		return "", nil, err
	}
	if ok {
		return r.Digest, r.Members, nil
	}
	if !pin.OnFirstUse || def == nil {
		return "", nil, nil
	}
	r, err = g.pinStore.RecordFirstUse(ctx, PinRecord{Server: server, Tool: tool, Digest: def.Digest, Members: def.Members, AcceptedBy: PinFirstUse, AcceptedAt: g.now()})
	if err != nil {
		return "", nil, err
	}
	g.log.Info("Tool definition pinned on first use", "server", server, "tool", logfield.Bound(tool), "digest", r.Digest, "policy", pin.Policy, "rule", pin.Rule)
	return r.Digest, r.Members, nil
}

// listedTools decides which tools of one tools/list page of server are hidden: each pinned
// tool whose definition is not the accepted one (or cannot be digested, or whose acceptance
// cannot be read: fail closed). It remembers each pinned tool's definition for the call path
// and reports each change once.
func (g *gate) listedTools(ctx context.Context, server string, tools []ListedTool) map[string]bool {
	pinner := g.toolPinner()
	if pinner == nil {
		return nil
	}
	var hidden map[string]bool
	hide := func(name string) {
		if hidden == nil {
			hidden = map[string]bool{}
		}
		hidden[name] = true
	}
	for _, t := range tools {
		pin, ok := pinner.ToolPin(server, t.Name)
		if !ok {
			continue
		}
		k := pinKey{server, t.Name}
		if t.Err != nil {
			g.pins.remember(k, seenTool{})
			g.reportChange(ctx, k, pin, "", nil, "", nil)
			if !pin.Audit {
				hide(t.Name)
			}
			continue
		}
		g.pins.remember(k, seenTool{digest: t.Definition.Digest, members: t.Definition.Members})
		acc, members, err := g.accepted(ctx, server, t.Name, pin, &t.Definition)
		if err != nil {
			g.log.Error(err, "Reading the pinned tool definition failed; the tool is hidden", "server", server, "tool", logfield.Bound(t.Name))
			if !pin.Audit {
				hide(t.Name)
			}
			continue
		}
		if acc == t.Definition.Digest {
			continue
		}
		g.reportChange(ctx, k, pin, acc, members, t.Definition.Digest, t.Definition.Members)
		if !pin.Audit {
			hide(t.Name)
		}
	}
	return hidden
}

// reportChange logs and observes a changed definition once per listed digest.
func (g *gate) reportChange(ctx context.Context, k pinKey, pin ToolPin, accepted string, accMembers map[string]string, listed string, members map[string]string) {
	if !g.pins.firstReport(k, listed) {
		return
	}
	e := ToolChangeEvent{Server: k.server, Tool: k.tool, Policy: pin.Policy, Rule: pin.Rule, Accepted: accepted, Listed: listed,
		Changed: tooldef.Changed(accMembers, members), Audit: pin.Audit, Named: pin.Named}
	g.log.Info("Tool definition changed: hidden and refused until accepted", "server", k.server, "tool", logfield.Bound(k.tool),
		"accepted", accepted, "listed", listed, "changed", e.Changed, "policy", pin.Policy, "rule", pin.Rule, "audit", pin.Audit)
	if o, ok := g.observer.(ToolChangeObserver); ok {
		o.ToolDefinitionChanged(e)
	}
	if rec, ok := g.pinStore.(ChangeRecorder); ok && listed != "" {
		r := PinRecord{Server: k.server, Tool: k.tool, Digest: listed, Members: members, AcceptedAt: g.now()}
		if err := rec.RecordChange(ctx, r); err != nil {
			g.log.Error(err, "Recording the changed tool definition failed", "server", k.server, "tool", logfield.Bound(k.tool))
		}
	}
}

// checkPin is the call path: a call of a pinned tool is refused (EF_TOOL_CHANGED) unless the
// gate has seen the tool listed and the definition it saw last is the accepted one. It returns
// "" when the call may proceed, and audit when the refusal is only to be recorded.
func (g *gate) checkPin(ctx context.Context, server, tool string) (code ef.EFCode, msg string, audit bool) {
	pinner := g.toolPinner()
	if pinner == nil {
		return "", "", false
	}
	pin, ok := pinner.ToolPin(server, tool)
	if !ok {
		return "", "", false
	}
	seen, ok := g.pins.lookup(pinKey{server, tool})
	if !ok {
		return ef.EFToolChanged, "This tool's definition is pinned and the gate has not seen it listed: list the tools (tools/list) first.", pin.Audit
	}
	acc, _, err := g.accepted(ctx, server, tool, pin, nil)
	if err != nil {
		g.log.Error(err, "Reading the pinned tool definition failed; the call is refused", "server", server, "tool", logfield.Bound(tool))
		return ef.EFToolChanged, "The pinned definition of this tool cannot be read; nothing was invoked.", pin.Audit
	}
	if seen.digest == "" || seen.digest != acc {
		return ef.EFToolChanged, fmt.Sprintf("The definition of tool %s changed since it was pinned; an operator must accept it before it can be called.",
			logfield.Bound(tool)), pin.Audit
	}
	return "", "", false
}

func (t *pinTable) remember(k pinKey, s seenTool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[pinKey]seenTool{}
		t.reported = map[pinKey]string{}
	}
	if _, ok := t.seen[k]; !ok && len(t.seen) >= maxSeenTools {
		return
	}
	t.seen[k] = s
}

func (t *pinTable) lookup(k pinKey) (seenTool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.seen[k]
	return s, ok
}

// firstReport reports whether listed is a digest not yet reported for k, and remembers it.
func (t *pinTable) firstReport(k pinKey, listed string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reported == nil {
		t.reported = map[pinKey]string{}
	}
	if last, ok := t.reported[k]; ok && last == listed {
		return false
	}
	if _, ok := t.reported[k]; !ok && len(t.reported) >= maxSeenTools {
		return false
	}
	t.reported[k] = listed
	return true
}

// ListedTools is told the tools of one tools/list page an upstream of server answered (each
// digested by the transport) and returns the names to hide from the agent: pinned tools whose
// definition is not the accepted one. Nil when nothing is hidden.
func (g *Gate) ListedTools(ctx context.Context, server string, tools []ListedTool) map[string]bool {
	if g == nil || g.g == nil {
		return nil
	}
	return g.g.listedTools(ctx, server, tools)
}

// ToolDefinitionChanged tells each observer that implements ToolChangeObserver.
func (m multiObserver) ToolDefinitionChanged(e ToolChangeEvent) {
	for _, o := range m {
		if t, ok := o.(ToolChangeObserver); ok {
			t.ToolDefinitionChanged(e)
		}
	}
}
