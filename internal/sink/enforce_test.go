package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
)

// actFor maps c to an act as Handle would; a non-empty actID replaces the minted one (the act
// of an earlier escalation).
func (f *fixture) actFor(c Call, actID string) *act.AgentCandidateAct {
	f.t.Helper()
	cand, err := f.gate.g.candidate(c, sourceType(c.Provenance))
	if err != nil {
		f.t.Fatal(err)
	}
	cand.Act.PolicyState.PolicyEpoch = f.policy.epoch.Load()
	if actID != "" {
		cand.Act.CandidateActID = actID
	}
	a := cand.Act
	return &a
}

// issueFor issues an authority for the act as policy Permit would, bound to destination.
func (f *fixture) issueFor(a *act.AgentCandidateAct, args string, destination string, ttl time.Duration) authority.Authority {
	f.t.Helper()
	c, err := jcs.Canonicalize([]byte(args), jcs.Strict)
	if err != nil {
		f.t.Fatal(err)
	}
	auth, err := f.gate.g.issue(context.Background(), authority.Binding{
		ActID: a.CandidateActID, ArgumentsDigest: jcs.Digest(c), ActionDigest: a.ArgumentsDigest.Value,
		Tool: a.Tool.ToolID, Destination: destination, SinkID: f.gate.g.sinkID,
		PolicyEpoch: bindingEpoch(a.PolicyState.PolicyEpoch),
	}, ttl)
	if err != nil {
		f.t.Fatal(err)
	}
	return auth
}

func TestEnforce(t *testing.T) {
	const args = `{"title":"x","n":1}`
	base := call("s1", "tools", "ticket_create", args)
	for _, tc := range []struct {
		name    string
		live    string
		mod     func(f *fixture, a *act.AgentCandidateAct) context.Context
		code    ef.EFCode
		consume bool // the authority is consumed afterwards
	}{
		{"allow", args, nil, "", true},
		{"members reordered is the same digest", `{"n":1,"title":"x"}`, nil, "", true},
		// §16 MUST 1–2.
		{"live arguments differ", `{"title":"y","n":1}`, nil, ef.EFScopeMismatch, false},
		{"live arguments malformed", `{"title":`, nil, ef.EFScopeMismatch, false},
		// §16 MUST 3.
		{"no authority", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			a.CandidateActID, _ = f.gate.g.ids.New("s1")
			return nil
		}, ef.EF002, false},
		{"expired", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			f.clock.Advance(2 * time.Minute)
			return nil
		}, ef.EF002, false},
		{"other sink in the act", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			a.FinalitySink.SinkID = "sink-other"
			return nil
		}, ef.EF040, false},
		{"destination swapped", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			a.Destination.DestinationID = evilURL
			return nil
		}, ef.EFDestinationMismatch, false},
		// §16 MUST 5.
		{"epoch changed", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			a.PolicyState.PolicyEpoch = 8
			return nil
		}, ef.EF002, false},
		{"deadline passed", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, ef.EF060, false},
		{"forged act id", args, func(f *fixture, a *act.AgentCandidateAct) context.Context {
			a.CandidateActID, _ = f.gate.g.ids.New("s-other")
			return nil
		}, ef.EFActInvalid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			a := f.actFor(base, "")
			auth := f.issueFor(a, args, toolsURL, time.Minute)
			ctx := context.Background()
			if tc.mod != nil {
				if c := tc.mod(f, a); c != nil {
					ctx = c
				}
			}
			d, err := f.gate.Enforce(ctx, a, json.RawMessage(tc.live))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allow != (tc.code == "") || d.Code != tc.code {
				t.Fatalf("decision %+v, want code %q", d, tc.code)
			}
			rec, err := f.store.Get(context.Background(), "", auth.ID)
			if err != nil {
				t.Fatal(err)
			}
			if (rec.State == authority.StateConsumed) != tc.consume {
				t.Fatalf("authority state %s", rec.State)
			}
			if d.Allow {
				// MUST 4: consumed before allow, with the intent record in the same commit.
				pend, err := f.store.Record(context.Background(), d.OperationID)
				if err != nil || pend.State != journal.StateDispatchPending || pend.AuthorityID != auth.ID || rec.ConsumedBy != d.OperationID {
					t.Fatalf("record %+v %v", pend, err)
				}
				st, err := f.gate.Complete(context.Background(), d, InvokeResult{Result: json.RawMessage(`{"ok":true}`), Outcome: OutcomeExecuted}, nil)
				if err != nil || st != journal.StateExecuted {
					t.Fatalf("complete: %s %v", st, err)
				}
			}
		})
	}
}

// TestEnforceReplay is tool-use-binding §22 T-C: the same authority on a second invoke is refused.
func TestEnforceReplay(t *testing.T) {
	f := newFixture(t)
	const args = `{"title":"x"}`
	a := f.actFor(call("s1", "tools", "ticket_create", args), "")
	f.issueFor(a, args, toolsURL, time.Minute)
	inv := f.up.invoker("ticket_create")
	for i := range 3 {
		d, _ := f.gate.Enforce(context.Background(), a, json.RawMessage(args))
		if d.Allow {
			if i != 0 {
				t.Fatalf("attempt %d allowed", i)
			}
			out, err := inv(context.Background(), d.OperationID)
			if _, err := f.gate.Complete(context.Background(), d, out, err); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if i == 0 || d.Code != ef.EF005 {
			t.Fatalf("attempt %d: %+v", i, d)
		}
	}
	if f.up.count("ticket_create") != 1 {
		t.Fatalf("upstream count %d", f.up.count("ticket_create"))
	}
}

// TestEnforceRace: 64 goroutines enforce the same act; exactly one consumes.
func TestEnforceRace(t *testing.T) {
	f := newFixture(t)
	const args = `{"title":"x"}`
	a := f.actFor(call("s1", "tools", "ticket_create", args), "")
	f.issueFor(a, args, toolsURL, time.Minute)
	var allowed, consumed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			ac := *a
			d, err := f.gate.Enforce(context.Background(), &ac, json.RawMessage(args))
			switch {
			case err != nil:
				t.Error(err)
			case d.Allow:
				allowed.Add(1)
			case d.Code == ef.EF005:
				consumed.Add(1)
			default:
				t.Errorf("unexpected %+v", d)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 1 || consumed.Load() != 63 {
		t.Fatalf("allowed %d, EF_005 %d", allowed.Load(), consumed.Load())
	}
}

// TestHandlePermitRace: 64 goroutines Handle Permit calls on a shared store. 48 distinct calls
// and 16 duplicates of one call in one session: each authority is consumed once, the upstream
// count equals the calls that invoked, and the duplicated call ran once.
func TestHandlePermitRace(t *testing.T) {
	f := newFixture(t)
	var invoked, replayed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			c := call("s1", "tools", "ticket_create", `{"title":"dup"}`)
			if i < 48 {
				c = call(fmt.Sprintf("s%d", i%8), "tools", "ticket_create", fmt.Sprintf(`{"title":"t%d"}`, i))
			}
			res, err := f.gate.Handle(context.Background(), c, f.up.invoker(c.Tool))
			switch {
			case err != nil:
				t.Error(err)
			case res.Invoked:
				invoked.Add(1)
			case res.Replayed:
				replayed.Add(1)
			case res.Code == ef.EFIndeterminate:
				refused.Add(1) // the duplicate was in flight
			default:
				t.Errorf("unexpected %+v", res)
			}
		})
	}
	wg.Wait()
	if got := int64(f.up.count("ticket_create")); got != invoked.Load() {
		t.Fatalf("upstream count %d, invoked results %d", got, invoked.Load())
	}
	if invoked.Load() != 49 || replayed.Load()+refused.Load() != 15 {
		t.Fatalf("invoked %d replayed %d refused %d", invoked.Load(), replayed.Load(), refused.Load())
	}
	recs := f.records(journal.StateExecuted)
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.AuthorityID] {
			t.Fatalf("authority %s dispatched twice", r.AuthorityID)
		}
		seen[r.AuthorityID] = true
		a, err := f.store.Get(context.Background(), "", r.AuthorityID)
		if err != nil || a.State != authority.StateConsumed || a.ConsumedBy != r.OperationID {
			t.Fatalf("authority %+v %v", a, err)
		}
	}
	if len(recs) != 49 {
		t.Fatalf("%d EXECUTED records", len(recs))
	}
}
