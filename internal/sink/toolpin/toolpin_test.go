package toolpin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/tooldef"
)

type pins map[string]Pin

func (p pins) ToolPin(_, tool string) (Pin, bool) {
	pin, ok := p[tool]
	return pin, ok
}

// store is an in-memory Store and ChangeRecorder.
type store struct {
	mu      sync.Mutex
	recs    map[string]Record
	changes []Record
	err     error
}

func (s *store) Pinned(_ context.Context, _, tool string) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[tool]
	return r, ok, s.err
}

func (s *store) RecordFirstUse(_ context.Context, r Record) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return Record{}, s.err
	}
	if old, ok := s.recs[r.Tool]; ok {
		return old, nil
	}
	s.recs[r.Tool] = r
	return r, nil
}

func (s *store) RecordChange(_ context.Context, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, r)
	return nil
}

type events []ChangeEvent

func (e *events) ToolDefinitionChanged(ev ChangeEvent) { *e = append(*e, ev) }

func def(t *testing.T, name, desc string) Listed {
	t.Helper()
	d, err := tooldef.Parse(fmt.Appendf(nil, `{"name":%q,"description":%q,"inputSchema":{"type":"object"}}`, name, desc))
	if err != nil {
		t.Fatal(err)
	}
	return Listed{Name: name, Definition: d}
}

// TestTableDecisions: what a table hides from a tools/list page and refuses on the call path,
// for each way a pinned tool's definition can stand against the accepted one. A definition that
// cannot be digested, an accepted digest that cannot be read, a tool never listed and a
// changed definition are each hidden and refused (fail closed); in mode Audit the same is
// reported as a refusal to record, not hidden.
func TestTableDecisions(t *testing.T) {
	ctx := context.Background()
	v1 := def(t, "search", "v1")
	v2 := def(t, "search", "v2")
	cases := []struct {
		name       string
		pin        Pin
		store      *store
		listed     []Listed // nil: the tool is never listed
		wantHidden bool
		wantCode   ef.EFCode
		wantAudit  bool
	}{
		{name: "policy digest, same", pin: Pin{Digest: v1.Definition.Digest}, listed: []Listed{v1}},
		{name: "policy digest, changed", pin: Pin{Digest: v1.Definition.Digest}, listed: []Listed{v2}, wantHidden: true, wantCode: ef.EFToolChanged},
		{name: "changed, audit", pin: Pin{Digest: v1.Definition.Digest, Audit: true}, listed: []Listed{v2}, wantCode: ef.EFToolChanged, wantAudit: true},
		{name: "never listed", pin: Pin{Digest: v1.Definition.Digest}, wantCode: ef.EFToolChanged},
		{name: "undigestable", pin: Pin{Digest: v1.Definition.Digest}, listed: []Listed{{Name: "search", Err: tooldef.ErrDefinition}},
			wantHidden: true, wantCode: ef.EFToolChanged},
		{name: "no digest, no store", pin: Pin{OnFirstUse: true}, listed: []Listed{v1}, wantHidden: true, wantCode: ef.EFToolChanged},
		{name: "first use records", pin: Pin{OnFirstUse: true}, store: &store{recs: map[string]Record{}}, listed: []Listed{v1}},
		{name: "recorded, changed", pin: Pin{OnFirstUse: true},
			store:  &store{recs: map[string]Record{"search": {Server: "s", Tool: "search", Digest: v1.Definition.Digest}}},
			listed: []Listed{v2}, wantHidden: true, wantCode: ef.EFToolChanged},
		{name: "store unreadable", pin: Pin{OnFirstUse: true}, store: &store{recs: map[string]Record{}, err: errors.New("disk")},
			listed: []Listed{v1}, wantHidden: true, wantCode: ef.EFToolChanged},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := &Table{}
			if tc.store != nil {
				tb.Store = tc.store
			}
			p := pins{"search": tc.pin}
			hidden := tb.Listed(ctx, p, "s", append(tc.listed, def(t, "other", "x")))
			if hidden["search"] != tc.wantHidden || hidden["other"] {
				t.Fatalf("hidden = %v, want search hidden %v and other not", hidden, tc.wantHidden)
			}
			code, msg, audit := tb.Check(ctx, p, "s", "search")
			if code != tc.wantCode || audit != tc.wantAudit || (code != "" && msg == "") {
				t.Fatalf("Check = %q %q %v, want %q audit %v", code, msg, audit, tc.wantCode, tc.wantAudit)
			}
			if code, _, _ := tb.Check(ctx, p, "s", "other"); code != "" {
				t.Fatalf("an unpinned tool is refused: %s", code)
			}
		})
	}
}

// TestTableNilPinner: a policy that pins nothing hides nothing and refuses nothing.
func TestTableNilPinner(t *testing.T) {
	tb := &Table{}
	if h := tb.Listed(context.Background(), nil, "s", []Listed{{Name: "x", Err: tooldef.ErrDefinition}}); h != nil {
		t.Fatalf("hidden = %v", h)
	}
	if code, _, _ := tb.Check(context.Background(), nil, "s", "x"); code != "" {
		t.Fatalf("refused: %s", code)
	}
}

// TestTableReportsOnce: a change is told to the observer and recorded for acceptance once per
// listed digest, with the members that differ; a second change is told again.
func TestTableReportsOnce(t *testing.T) {
	ctx := context.Background()
	v1, v2, v3 := def(t, "search", "v1"), def(t, "search", "v2"), def(t, "search", "v3")
	st := &store{recs: map[string]Record{"search": {Tool: "search", Digest: v1.Definition.Digest, Members: v1.Definition.Members}}}
	var ev events
	tb := &Table{Store: st, Observer: &ev}
	p := pins{"search": {Policy: "pol", Rule: "r", OnFirstUse: true, Named: true}}
	for range 3 {
		tb.Listed(ctx, p, "s", []Listed{v2})
	}
	tb.Listed(ctx, p, "s", []Listed{v3})
	if len(ev) != 2 || ev[0].Listed != v2.Definition.Digest || ev[1].Listed != v3.Definition.Digest {
		t.Fatalf("events = %+v, want v2 then v3 once each", ev)
	}
	if e := ev[0]; e.Accepted != v1.Definition.Digest || len(e.Changed) != 1 || e.Changed[0] != "description" || e.Policy != "pol" || !e.Named {
		t.Fatalf("event = %+v", e)
	}
	if len(st.changes) != 2 || st.changes[0].Digest != v2.Definition.Digest {
		t.Fatalf("recorded changes = %+v", st.changes)
	}
}

// TestTableBound: the table remembers at most MaxSeen pinned tools; one beyond the bound is not
// remembered, so its calls are refused as never listed (fail closed), while a remembered tool
// keeps being updated.
func TestTableBound(t *testing.T) {
	ctx := context.Background()
	p := pinAll{}
	tb := &Table{}
	page := make([]Listed, 0, MaxSeen)
	for i := range MaxSeen {
		page = append(page, Listed{Name: fmt.Sprintf("t%d", i), Definition: tooldef.Definition{Digest: "d"}})
	}
	tb.Listed(ctx, p, "s", page)
	tb.Listed(ctx, p, "s", []Listed{{Name: "beyond", Definition: tooldef.Definition{Digest: "d"}}})
	if code, _, _ := tb.Check(ctx, p, "s", "t0"); code != "" {
		t.Fatalf("a remembered tool with the accepted digest is refused: %s", code)
	}
	if code, msg, _ := tb.Check(ctx, p, "s", "beyond"); code != ef.EFToolChanged || msg == "" {
		t.Fatalf("a tool beyond the bound: %q %q, want EF_TOOL_CHANGED", code, msg)
	}
	tb.Listed(ctx, p, "s", []Listed{{Name: "t0", Definition: tooldef.Definition{Digest: "changed"}}})
	if code, _, _ := tb.Check(ctx, p, "s", "t0"); code != ef.EFToolChanged {
		t.Fatalf("a remembered tool's change is not seen at the bound: %q", code)
	}
}

// pinAll pins every tool to the digest "d".
type pinAll struct{}

func (pinAll) ToolPin(_, _ string) (Pin, bool) { return Pin{Digest: "d"}, true }
