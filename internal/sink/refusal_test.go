package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/journal"
)

// allRecords returns every journal record, whatever its state.
func (f *fixture) allRecords() []journal.DispatchRecord {
	f.t.Helper()
	var out []journal.DispatchRecord
	for _, s := range []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateExecuted,
		journal.StateFailed, journal.StateIndeterminate} {
		out = append(out, f.records(s)...)
	}
	return out
}

// tamperedDigest is the digest of the moment's envelope with option 0's label edited: what a
// principal shown a tampered copy would name.
func tamperedDigest(t *testing.T, m *MomentRef) string {
	t.Helper()
	opt, ok := m.Envelope.Option(0)
	if !ok || opt.Label == "" {
		t.Fatalf("option 0 of %s: %+v", m.ID, opt)
	}
	label, _ := json.Marshal(opt.Label)
	edited, _ := json.Marshal(opt.Label + " (10 EUR)")
	raw := bytes.Replace(m.Envelope.Canonical(), label, edited, 1)
	env, err := envelope.Parse(raw)
	if err != nil {
		t.Fatalf("tampered envelope: %v", err)
	}
	if env.Digest() == m.Digest {
		t.Fatal("the tampered envelope has the original's digest")
	}
	return env.Digest()
}

// TestResolutionRefusedAtTheSink: resolutions a principal may be tricked into, or an attacker
// may forge, are refused by the sink itself, and change nothing: the moment stays open, the
// call still escalates, the upstream is not called and no authority is issued or consumed (the
// journal is empty). A resolution naming another envelope or a tampered copy of this one
// (envelope-04 §12.5), an option index outside the envelope (§7.3), and resolutions through a
// closed hatch (§5.8) are each refused with ErrResolutionInvalid. The valid resolution after
// them is what runs, once.
func TestResolutionRefusedAtTheSink(t *testing.T) {
	f := newFixture(t)
	esc := f.escalatePayout("s1")
	other := f.escalatePayout("s2")
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"another envelope", resolution(other.Moment.Digest, "option", 0, "")},
		{"a tampered envelope", resolution(tamperedDigest(t, esc.Moment), "option", 0, "")},
		{"option out of range", resolution(esc.Moment.Digest, "option", esc.Moment.Envelope.NumOptions(), "")},
		{"negative option", resolution(esc.Moment.Digest, "option", -1, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.gate.Resolve(context.Background(), esc.Moment.ID, "alice", tc.raw); !errors.Is(err, ErrResolutionInvalid) {
				t.Fatalf("Resolve = %v, want ErrResolutionInvalid", err)
			}
			again := f.handle(call("s1", "pay", "payout_create", payoutArgs))
			wantDeny(t, again, ef.EFEscalationRequired)
			if f.up.total() != 0 {
				t.Fatalf("upstream called %d times", f.up.total())
			}
			if recs := f.allRecords(); len(recs) != 0 {
				t.Fatalf("journal records after a refused resolution: %+v", recs)
			}
		})
	}

	// Hatches closed by the agent (§5.8): neither an answer nor a question gets through.
	capped := Option{Label: "Pay 100 now", Reasoning: "Settles the urgent part.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100,"to":"acct-9"}`)}
	search := Option{Label: "Search first", Reasoning: "Looks up the invoice before paying.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	p := proposal(capped, search)
	p.Hatches = []string{}
	req, err := f.gate.RequestMoment(context.Background(), "s3", agentID, p)
	if err != nil || req.Moment == nil {
		t.Fatalf("request: %+v %v", req, err)
	}
	for _, kind := range []string{"answer", "question"} {
		if _, err := f.resolve(req.Moment, "alice", kind, 0, "Pay 50 instead."); !errors.Is(err, ErrResolutionInvalid) {
			t.Fatalf("%s through a closed hatch: %v, want ErrResolutionInvalid", kind, err)
		}
	}
	if _, err := f.resolve(req.Moment, "alice", "declined", 0, ""); err != nil {
		t.Fatalf("the moment was closed by a refused resolution: %v", err)
	}

	// The moment is still open: the principal's real choice authorises the call, which runs once.
	if rr, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil || rr.AuthorityID == "" {
		t.Fatalf("valid resolution: %+v %v", rr, err)
	}
	if run := f.handle(call("s1", "pay", "payout_create", payoutArgs)); !run.Invoked || run.State != journal.StateExecuted {
		t.Fatalf("the authorised call: %+v", run)
	}
	if f.up.count("payout_create") != 1 {
		t.Fatalf("upstream payout count %d, want 1", f.up.count("payout_create"))
	}
}

// TestIndeterminateRefusedAcrossLiveSessions: session A's call goes INDETERMINATE (the upstream
// may have acted; nothing says whether), and session B, live at the same time, sends the
// identical call: while A's call is in flight and again once it is INDETERMINATE and
// unreconciled, B is refused and nothing is sent. The upstream is called once, by A.
func TestIndeterminateRefusedAcrossLiveSessions(t *testing.T) {
	f := newFixture(t)
	a := call("sA", "tools", "ticket_create", `{"title":"x"}`)
	b := a
	b.Session = "sB"

	f.up.outcome, f.up.err = OutcomeIndeterminate, errors.New("read: i/o timeout")
	var (
		during Result
		first  atomic.Bool
	)
	f.up.hook = func(context.Context) {
		if first.CompareAndSwap(false, true) {
			during = f.handle(b) // B's identical call while A's is in flight
		}
	}
	resA, err := f.gate.Handle(context.Background(), a, f.up.invoker(a.Tool))
	if err == nil || resA.State != journal.StateIndeterminate || !resA.Invoked {
		t.Fatalf("A: %+v %v, want INDETERMINATE after the invocation", resA, err)
	}
	if during.Allowed || during.Invoked || during.Code != ef.EFIndeterminate {
		t.Fatalf("B during A's dispatch: %+v, want a refusal with %s", during, ef.EFIndeterminate)
	}

	f.up.outcome, f.up.err = OutcomeExecuted, nil
	for _, s := range []string{"sB", "sC"} {
		c := a
		c.Session = s
		r := f.handle(c)
		wantDeny(t, r, ef.EFIndeterminate)
		if r.State != journal.StateIndeterminate {
			t.Fatalf("%s: state %s, want INDETERMINATE", s, r.State)
		}
	}
	if n := f.up.count("ticket_create"); n != 1 {
		t.Fatalf("upstream called %d times, want once (by session A)", n)
	}
	if ind := f.records(journal.StateIndeterminate); len(ind) != 1 {
		t.Fatalf("INDETERMINATE records: %+v", ind)
	}
}
