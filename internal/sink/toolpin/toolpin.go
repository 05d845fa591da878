// Package toolpin is the gate's check of pinned tool definitions (docs/api.md "Pinned tool
// definitions", docs/architecture.md "Pinned tool definitions"): a rule may pin the definitions
// of the tools it governs. The transport tells the gate each tool an upstream lists (Listed); a
// pinned tool whose definition is not the accepted one is hidden from the list, and its calls
// are refused with EF_TOOL_CHANGED (Check), as are a pinned tool's calls the gate has not seen
// listed since it started. A Table remembers the last definition each pinned tool was listed
// with, bounded (MaxSeen). internal/sink holds a Table per gate and names these types as its
// own (sink.ToolPin, sink.PinStore, …); this package imports nothing of the sink.
package toolpin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/tooldef"
)

// Pin is how the governing rule pins a tool's definition.
type Pin struct {
	Policy, Rule string
	// OnFirstUse: the first definition seen is recorded (Store) and accepted.
	OnFirstUse bool
	// Digest is the digest the policy lists for the tool ("" = none).
	Digest string
	// Audit: the policy runs in mode Audit; a changed definition is reported, not hidden or
	// refused.
	Audit bool
	// Named: the policy names the tool itself, not only through a glob (bounded metric labels).
	Named bool
}

// Pinner is implemented by a policy evaluator whose rules can pin tool definitions. One that
// does not implement it pins nothing.
type Pinner interface {
	// ToolPin returns how the rule governing tool on server pins its definition; false when
	// the rule pins nothing.
	ToolPin(server, tool string) (Pin, bool)
}

// Record is a definition digest recorded on first use or accepted by an operator.
type Record struct {
	Server, Tool string
	// Digest is the accepted definition digest (tooldef.Definition.Digest).
	Digest string
	// Members are the accepted definition's member digests (for a diff; may be empty).
	Members map[string]string
	// AcceptedBy is FirstUse or who accepted the digest.
	AcceptedBy string
	AcceptedAt time.Time
}

// FirstUse is Record.AcceptedBy of a digest recorded on first use.
const FirstUse = "first-use"

// Store keeps the recorded and accepted definition digests: the standalone gate's data dir, a
// ToolPolicy's status.toolPins in Kubernetes.
type Store interface {
	// Pinned returns the digest recorded for tool on server, if any.
	Pinned(ctx context.Context, server, tool string) (Record, bool, error)
	// RecordFirstUse stores r unless a digest is already recorded for its server and tool, and
	// returns the record stored then.
	RecordFirstUse(ctx context.Context, r Record) (Record, error)
}

// ChangeRecorder is implemented by a Store that keeps the changed definitions awaiting an
// operator's acceptance (the standalone gate's data dir: what `actgate tools accept` accepts).
type ChangeRecorder interface {
	RecordChange(ctx context.Context, r Record) error
}

// ChangeEvent says that an upstream lists a pinned tool with a definition that is not the
// accepted one. It carries names and digests, never the definition's text.
type ChangeEvent struct {
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

// ChangeObserver wants ChangeEvents (metrics, Kubernetes Events). A Table tells it once per
// server, tool and listed digest.
type ChangeObserver interface {
	ToolDefinitionChanged(ChangeEvent)
}

// Listed is one tool of an upstream's tools/list as the transport read it.
type Listed struct {
	Name string
	// Definition is its digest; Err is set instead when it cannot be digested.
	Definition tooldef.Definition
	Err        error
}

// MaxSeen bounds the pinned tools whose last listed definition a Table remembers (and whose
// last reported change it remembers); a pinned tool beyond it is not remembered, so its calls
// are refused as never listed.
const MaxSeen = 4096

// Table is one gate's memory of the last definition each pinned tool was listed with, and the
// decisions on it. Set its fields before first use; the zero value of the memory is ready.
type Table struct {
	// Store reads and records accepted digests; nil: only digests the policy lists are
	// accepted.
	Store Store
	// Observer, when set, is told each change once.
	Observer ChangeObserver
	// Log receives names and digests, never a definition's text.
	Log logr.Logger
	// Now stamps a first-use record; nil is time.Now.
	Now func() time.Time

	mu       sync.Mutex
	seen     map[key]seenTool
	reported map[key]string // the listed digest last reported changed
}

type key struct{ server, tool string }

type seenTool struct {
	digest  string // "" when the definition could not be digested
	members map[string]string
}

func (t *Table) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

// accepted returns the accepted digest of a pinned tool (the policy's, else the recorded one)
// and its members, recording def first when the pin is onFirstUse and nothing is recorded (in
// mode Audit too: audit observes what enforcement would pin). def is nil on the call path,
// which never records.
func (t *Table) accepted(ctx context.Context, server, tool string, pin Pin, def *tooldef.Definition) (string, map[string]string, error) {
	if pin.Digest != "" {
		return pin.Digest, nil, nil
	}
	if t.Store == nil {
		// Nowhere to read or record a digest: only a digest listed in the policy is accepted.
		return "", nil, nil
	}
	r, ok, err := t.Store.Pinned(ctx, server, tool)
	if err != nil {
		return "", nil, err
	}
	if ok {
		return r.Digest, r.Members, nil
	}
	if !pin.OnFirstUse || def == nil {
		return "", nil, nil
	}
	r, err = t.Store.RecordFirstUse(ctx, Record{Server: server, Tool: tool, Digest: def.Digest, Members: def.Members, AcceptedBy: FirstUse, AcceptedAt: t.now()})
	if err != nil {
		return "", nil, err
	}
	t.Log.Info("Tool definition pinned on first use", "server", server, "tool", logfield.Bound(tool), "digest", r.Digest, "policy", pin.Policy, "rule", pin.Rule)
	return r.Digest, r.Members, nil
}

// Listed decides which tools of one tools/list page of server are hidden: each pinned tool
// whose definition is not the accepted one (or cannot be digested, or whose acceptance cannot
// be read: fail closed), unless its policy runs in mode Audit. It remembers each pinned tool's
// definition for the call path and reports each change once. Nil when nothing is hidden or
// pinner is nil.
func (t *Table) Listed(ctx context.Context, pinner Pinner, server string, tools []Listed) map[string]bool {
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
	for _, lt := range tools {
		pin, ok := pinner.ToolPin(server, lt.Name)
		if !ok {
			continue
		}
		k := key{server, lt.Name}
		if lt.Err != nil {
			t.remember(k, seenTool{})
			t.reportChange(ctx, k, pin, "", nil, "", nil)
			if !pin.Audit {
				hide(lt.Name)
			}
			continue
		}
		t.remember(k, seenTool{digest: lt.Definition.Digest, members: lt.Definition.Members})
		acc, members, err := t.accepted(ctx, server, lt.Name, pin, &lt.Definition)
		if err != nil {
			t.Log.Error(err, "Reading the pinned tool definition failed; the tool is hidden", "server", server, "tool", logfield.Bound(lt.Name))
			if !pin.Audit {
				hide(lt.Name)
			}
			continue
		}
		if acc == lt.Definition.Digest {
			continue
		}
		t.reportChange(ctx, k, pin, acc, members, lt.Definition.Digest, lt.Definition.Members)
		if !pin.Audit {
			hide(lt.Name)
		}
	}
	return hidden
}

// reportChange logs and observes a changed definition once per listed digest.
func (t *Table) reportChange(ctx context.Context, k key, pin Pin, accepted string, accMembers map[string]string, listed string, members map[string]string) {
	if !t.firstReport(k, listed) {
		return
	}
	e := ChangeEvent{Server: k.server, Tool: k.tool, Policy: pin.Policy, Rule: pin.Rule, Accepted: accepted, Listed: listed,
		Changed: tooldef.Changed(accMembers, members), Audit: pin.Audit, Named: pin.Named}
	t.Log.Info("Tool definition changed: hidden and refused until accepted", "server", k.server, "tool", logfield.Bound(k.tool),
		"accepted", accepted, "listed", listed, "changed", e.Changed, "policy", pin.Policy, "rule", pin.Rule, "audit", pin.Audit)
	if t.Observer != nil {
		t.Observer.ToolDefinitionChanged(e)
	}
	if rec, ok := t.Store.(ChangeRecorder); ok && listed != "" {
		r := Record{Server: k.server, Tool: k.tool, Digest: listed, Members: members, AcceptedAt: t.now()}
		if err := rec.RecordChange(ctx, r); err != nil {
			t.Log.Error(err, "Recording the changed tool definition failed", "server", k.server, "tool", logfield.Bound(k.tool))
		}
	}
}

// Check is the call path: a call of a pinned tool is refused (EF_TOOL_CHANGED) unless the
// table has seen the tool listed and the definition it saw last is the accepted one. It
// returns "" when the call may proceed (or pinner is nil), and audit when the refusal is only
// to be recorded.
func (t *Table) Check(ctx context.Context, pinner Pinner, server, tool string) (code ef.EFCode, msg string, audit bool) {
	if pinner == nil {
		return "", "", false
	}
	pin, ok := pinner.ToolPin(server, tool)
	if !ok {
		return "", "", false
	}
	seen, ok := t.lookup(key{server, tool})
	if !ok {
		return ef.EFToolChanged, "This tool's definition is pinned and the gate has not seen it listed: list the tools (tools/list) first.", pin.Audit
	}
	acc, _, err := t.accepted(ctx, server, tool, pin, nil)
	if err != nil {
		t.Log.Error(err, "Reading the pinned tool definition failed; the call is refused", "server", server, "tool", logfield.Bound(tool))
		return ef.EFToolChanged, "The pinned definition of this tool cannot be read; nothing was invoked.", pin.Audit
	}
	if seen.digest == "" || seen.digest != acc {
		return ef.EFToolChanged, fmt.Sprintf("The definition of tool %s changed since it was pinned; an operator must accept it before it can be called.",
			logfield.Bound(tool)), pin.Audit
	}
	return "", "", false
}

func (t *Table) remember(k key, s seenTool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[key]seenTool{}
	}
	if _, ok := t.seen[k]; !ok && len(t.seen) >= MaxSeen {
		return
	}
	t.seen[k] = s
}

func (t *Table) lookup(k key) (seenTool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.seen[k]
	return s, ok
}

// firstReport reports whether listed is a digest not yet reported for k, and remembers it.
func (t *Table) firstReport(k key, listed string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reported == nil {
		t.reported = map[key]string{}
	}
	if last, ok := t.reported[k]; ok && last == listed {
		return false
	}
	if _, ok := t.reported[k]; !ok && len(t.reported) >= MaxSeen {
		return false
	}
	t.reported[k] = listed
	return true
}
