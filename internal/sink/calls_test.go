package sink

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
)

func momentByID(t *testing.T, f *fixture, id string) Moment {
	t.Helper()
	ms, err := f.gate.Moments(context.Background(), MomentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("moment %s not listed", id)
	return Moment{}
}

// TestMomentCallsOfAProposal: the calls a moment lists are the ones the gate computed each
// option's digest from — the mislabelled option shows its real amount and payee — and they
// match the envelope's digests.
func TestMomentCallsOfAProposal(t *testing.T) {
	f := newFixture(t)
	hold := Option{Label: "Hold the payment", Reasoning: "Nothing is lost by waiting.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	lie := Option{Label: "Pay Bob 10 EUR", Reasoning: "The invoice is due.", Tool: "payout_create", Server: "pay",
		Args: json.RawMessage(`{ "to" : "mallory-offshore-account", "amount" : 9999 }`)}
	res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, proposal(hold, lie))
	if err != nil || res.Moment == nil {
		t.Fatalf("request: %+v %v", res, err)
	}
	m := momentByID(t, f, res.Moment.ID)
	if m.GateAuthored || len(m.Calls) != 2 {
		t.Fatalf("moment: gateAuthored %v, %d calls", m.GateAuthored, len(m.Calls))
	}
	want := envelope.Call{Server: "pay", Destination: payURL, Tool: "payout_create", Args: json.RawMessage(`{"amount":9999,"to":"mallory-offshore-account"}`)}
	if got := m.Calls[1]; got.Server != want.Server || got.Destination != want.Destination || got.Tool != want.Tool || string(got.Args) != string(want.Args) || len(got.Masked) != 0 {
		t.Fatalf("option 2's call %+v; want %+v", got, want)
	}
	if err := envelope.CheckCalls(m.Envelope, m.Calls); err != nil {
		t.Fatalf("the listed calls do not match the envelope: %v", err)
	}
	// A caller's copy cannot change what the gate holds.
	m.Calls[1].Args[2] = 'X'
	if again := momentByID(t, f, res.Moment.ID); string(again.Calls[1].Args) != string(want.Args) {
		t.Fatalf("the gate's call changed through a listed copy: %s", again.Calls[1].Args)
	}
}

// TestMomentCallsMasked: a gate-authored moment under a rule with maskArguments lists the
// calls masked; the resolution still authorises exactly the real call, which runs once, and a
// call differing only in the masked value does not run.
func TestMomentCallsMasked(t *testing.T) {
	f := newFixture(t)
	pol := f.policy
	for i := range pol.rules {
		if pol.rules[i].tool == "payout_create" {
			pol.rules[i].masks = []string{"/to"}
		}
	}
	res := f.handle(call("s1", "pay", "payout_create", `{"amount":250,"to":"acct-secret"}`))
	wantDeny(t, res, ef.EFEscalationRequired)
	if res.Moment == nil {
		t.Fatal("no moment")
	}
	m := momentByID(t, f, res.Moment.ID)
	if !m.GateAuthored || len(m.Calls) != 3 {
		t.Fatalf("moment: gateAuthored %v, %d calls", m.GateAuthored, len(m.Calls))
	}
	for i, c := range m.Calls {
		if !slices.Equal(c.Masked, []string{"/to"}) || string(c.Args) == "" || json.Valid(c.Args) == false {
			t.Fatalf("call %d: %+v", i, c)
		}
		var args map[string]any
		_ = json.Unmarshal(c.Args, &args)
		if args["to"] != argmask.Placeholder {
			t.Fatalf("call %d shows to=%v", i, args["to"])
		}
	}
	if err := envelope.CheckCalls(m.Envelope, m.Calls); err != nil {
		t.Fatalf("masked calls refused: %v", err)
	}
	if _, err := f.resolve(res.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	other := f.handle(call("s1", "pay", "payout_create", `{"amount":250,"to":"acct-other"}`))
	if other.Invoked {
		t.Fatal("a call with another value at the masked pointer ran on the resolution")
	}
	run := f.handle(call("s1", "pay", "payout_create", `{"amount":250,"to":"acct-secret"}`))
	if !run.Invoked || f.up.count("payout_create") != 1 {
		t.Fatalf("the authorised call: %+v, upstream count %d", run, f.up.count("payout_create"))
	}
}
