package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
)

const payoutArgs = `{"amount":5000,"to":"acct-9"}`

// escalatePayout makes the direct payout call and returns its refusal with the gate-authored
// moment.
func (f *fixture) escalatePayout(session string) Result {
	f.t.Helper()
	res := f.handle(call(session, "pay", "payout_create", payoutArgs))
	wantDeny(f.t, res, ef.EFEscalationRequired)
	if res.Moment == nil || res.Moment.Envelope == nil {
		f.t.Fatalf("no binding moment: %+v", res)
	}
	return res
}

func (f *fixture) resolve(m *MomentRef, principal, kind string, option int, answer string) (ResolveResult, error) {
	return f.gate.Resolve(context.Background(), m.ID, principal, resolution(m.Digest, kind, option, answer))
}

func digestOf(t testing.TB, tool, args string) string {
	t.Helper()
	canon, err := jcs.Canonicalize([]byte(args), jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	d, err := action.Digest(tool, canon, jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGateAuthoredEnvelope(t *testing.T) {
	f := newFixture(t)
	res := f.escalatePayout("s1")
	env := res.Moment.Envelope
	c := env.Content()
	// Options: the requested call, then the rule's alternatives as merge patches over it; every
	// action digest computed by the gate over {"tool","args"}.
	want := []string{
		digestOf(t, "payout_create", payoutArgs),
		digestOf(t, "payout_create", `{"amount":100,"to":"acct-9"}`),
		digestOf(t, "payout_create", `{"amount":5000,"dry_run":true,"to":"acct-9"}`),
	}
	if len(c.Question.Options) != len(want) {
		t.Fatalf("%d options", len(c.Question.Options))
	}
	for i, o := range c.Question.Options {
		if o.ActionDigest != want[i] {
			t.Fatalf("option %d digest %s, want %s", i, o.ActionDigest, want[i])
		}
	}
	if c.Question.RecommendedIdx != 1 {
		t.Fatalf("recommended %d", c.Question.RecommendedIdx)
	}
	// The briefing is factual and carries digests, never argument values.
	all, _ := json.Marshal(c)
	for _, leak := range []string{"acct-9", "5000"} {
		if strings.Contains(string(all), leak) {
			t.Fatalf("envelope carries argument value %q: %s", leak, all)
		}
	}
	for _, must := range []string{"payout_create", "FINANCIAL", payURL, res.ActID, want[0]} {
		if !strings.Contains(string(all), must) {
			t.Fatalf("envelope lacks %q", must)
		}
	}
	// It parses as a well-formed envelope with the digest the gate reported.
	parsed, err := envelope.Parse(env.Canonical())
	if err != nil || parsed.Digest() != res.Moment.Digest {
		t.Fatalf("parse: %v", err)
	}
	if !strings.Contains(res.Moment.Text, "payout_create") {
		t.Fatalf("text rendering: %q", res.Moment.Text)
	}
	// Calling again while the moment is pending returns the same moment, not a new one.
	again := f.escalatePayout("s1")
	if again.Moment.ID != res.Moment.ID {
		t.Fatal("a second moment for the same pending escalation")
	}
	if !f.gate.CanEscalate("pay", "payout_create") || f.gate.CanEscalate("tools", "search") {
		t.Fatal("CanEscalate")
	}
	ms, err := f.gate.Moments(context.Background(), MomentFilter{Pending: true})
	if err != nil || len(ms) != 1 || ms[0].ActID != res.ActID || ms[0].Tool != "payout_create" || len(ms[0].Principals) != 3 {
		t.Fatalf("moments %+v %v", ms, err)
	}
}

func TestEscalateResolveRunOnce(t *testing.T) {
	f := newFixture(t)
	esc := f.escalatePayout("s1")
	rr, err := f.resolve(esc.Moment, "alice", "option", 0, "")
	if err != nil || rr.AuthorityID == "" || rr.Pending {
		t.Fatalf("resolve: %+v %v", rr, err)
	}
	if f.up.total() != 0 {
		t.Fatal("resolution invoked the tool")
	}
	// The agent's call of exactly the option's arguments in the same session runs once, with
	// the escalated act's id, and carries the resolution.
	run := f.handle(call("s1", "pay", "payout_create", payoutArgs))
	if !run.Invoked || !run.Allowed || run.State != journal.StateExecuted || run.ActID != esc.ActID {
		t.Fatalf("run: %+v", run)
	}
	if len(run.Resolutions) != 1 || run.Resolutions[0].Kind != "option" || !run.Resolutions[0].Authorized ||
		*run.Resolutions[0].OptionIdx != 0 || run.Resolutions[0].ActionDigest != digestOf(t, "payout_create", payoutArgs) {
		t.Fatalf("resolutions %+v", run.Resolutions)
	}
	rec, err := f.store.ByAuthority(context.Background(), rr.AuthorityID)
	if err != nil || rec.State != journal.StateExecuted {
		t.Fatalf("record %+v %v", rec, err)
	}
	// Sending it again: answered from the journal, not invoked.
	re := f.handle(call("s1", "pay", "payout_create", payoutArgs))
	if !re.Replayed || re.Invoked {
		t.Fatalf("repeat: %+v", re)
	}
	// Presenting the act to Enforce again is a replay of a consumed authority (§22 T-C).
	a := f.actFor(call("s1", "pay", "payout_create", payoutArgs), esc.ActID)
	d, err := f.gate.Enforce(context.Background(), a, json.RawMessage(payoutArgs))
	if err != nil || d.Allow || d.Code != ef.EF005 {
		t.Fatalf("enforce replay: %+v %v", d, err)
	}
	// After the window the same call needs a new moment.
	f.clock.Advance(DefaultAuthorityTTL + time.Second)
	late := f.handle(call("s1", "pay", "payout_create", payoutArgs))
	wantDeny(t, late, ef.EFEscalationRequired)
	if late.Moment == nil || late.Moment.ID == esc.Moment.ID {
		t.Fatalf("late: %+v", late)
	}
	if got := f.up.count("payout_create"); got != 1 {
		t.Fatalf("upstream payout count = %d, want 1", got)
	}
}

func TestGrantIsBoundToTheOption(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Call
		code ef.EFCode
	}{
		// envelope-04 §12.6: the principal chose the capped payout; the requested one is not it.
		{"option-map substitution", call("s1", "pay", "payout_create", payoutArgs), ef.EFEscalationRequired},
		{"other arguments", call("s1", "pay", "payout_create", `{"amount":99,"to":"acct-9"}`), ef.EFEscalationRequired},
		{"another session", call("s2", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`), ef.EFEscalationRequired},
		// §22 T-D: identical arguments at a swapped server (the policy refuses the destination).
		{"swapped server", func() Call {
			c := call("s1", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`)
			c.Destination = evilURL
			return c
		}(), ef.EFDestinationMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			esc := f.escalatePayout("s1")
			if _, err := f.resolve(esc.Moment, "bob", "option", 1, ""); err != nil {
				t.Fatal(err)
			}
			wantDeny(t, f.handle(tc.c), tc.code)
			if f.up.total() != 0 {
				t.Fatal("invoked")
			}
			// The chosen option itself still runs once.
			ok := f.handle(call("s1", "pay", "payout_create", `{"to":"acct-9","amount":100}`))
			if !ok.Invoked || f.up.total() != 1 {
				t.Fatalf("chosen option: %+v", ok)
			}
		})
	}
}

// TestOriginChange is tool-use-binding §22 T-E / §12 COMPUTER_USE_ORIGIN_CHANGE: authority for a
// computer-use submit at one origin does not carry to another.
func TestOriginChange(t *testing.T) {
	f := newFixture(t)
	submit := func(origin string) Call {
		c := call("s1", "browser", "computer_submit", `{"form":"checkout","submit":true}`)
		c.Destination = origin
		return c
	}
	esc := f.handle(submit("https://pay.example"))
	wantDeny(t, esc, ef.EFEscalationRequired)
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	wantDeny(t, f.handle(submit("https://pay.example-evil")), ef.EFDestinationMismatch)
	if f.up.total() != 0 {
		t.Fatal("submitted at another origin")
	}
	if r := f.handle(submit("https://pay.example")); !r.Invoked {
		t.Fatalf("authorised origin: %+v", r)
	}
	if f.up.total() != 1 {
		t.Fatalf("upstream count %d", f.up.total())
	}
}

func TestResolveRefusals(t *testing.T) {
	f := newFixture(t)
	esc := f.escalatePayout("s1")
	other := f.escalatePayout("s2")
	for _, tc := range []struct {
		name      string
		principal string
		raw       []byte
		id        string
		want      error
	}{
		{"the initiating agent", agentID, resolution(esc.Moment.Digest, "option", 0, ""), esc.Moment.ID, ErrSelfResolution},
		{"the sink", "sink-test", resolution(esc.Moment.Digest, "option", 0, ""), esc.Moment.ID, ErrSelfResolution},
		{"not a principal", "mallory", resolution(esc.Moment.Digest, "option", 0, ""), esc.Moment.ID, ErrNotPrincipal},
		{"no principal", "", resolution(esc.Moment.Digest, "option", 0, ""), esc.Moment.ID, ErrNotPrincipal},
		{"another envelope's digest", "alice", resolution(other.Moment.Digest, "option", 0, ""), esc.Moment.ID, ErrResolutionInvalid},
		{"option out of range", "alice", resolution(esc.Moment.Digest, "option", 7, ""), esc.Moment.ID, ErrResolutionInvalid},
		{"malformed", "alice", []byte(`{"binding_moment_resolution":{"resolution":"option"}}`), esc.Moment.ID, ErrResolutionInvalid},
		// envelope-04 §7.3: the inner object without its binding_moment_resolution wrapper.
		{"bare inner object", "alice", []byte(`{"envelope_digest":"` + esc.Moment.Digest + `","resolution":"option","option_idx":0}`), esc.Moment.ID, ErrResolutionInvalid},
		{"unknown moment", "alice", resolution(esc.Moment.Digest, "option", 0, ""), "bm-00", ErrMomentNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.gate.Resolve(context.Background(), tc.id, tc.principal, tc.raw)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// None of that authorised anything.
	wantDeny(t, f.handle(call("s1", "pay", "payout_create", payoutArgs)), ef.EFEscalationRequired)
	// A resolution, then its replay (envelope-04 §12.5).
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alice", "bob"} {
		if _, err := f.resolve(esc.Moment, p, "option", 0, ""); !errors.Is(err, ErrMomentResolved) {
			t.Fatalf("replay by %s: %v", p, err)
		}
	}
	// Expiry.
	f.clock.Advance(DefaultMomentTTL + time.Second)
	if _, err := f.resolve(other.Moment, "alice", "option", 0, ""); !errors.Is(err, ErrMomentExpired) {
		t.Fatalf("expired: %v", err)
	}
	if f.up.total() != 0 {
		t.Fatal("invoked")
	}
}

func TestNonOptionResolutionsAreDistinct(t *testing.T) {
	f := newFixture(t)
	dec := f.escalatePayout("s-declined")
	que := f.escalatePayout("s-question")
	ans := f.escalatePayout("s-answer")
	for _, r := range []struct {
		m      *MomentRef
		kind   string
		answer string
	}{{dec.Moment, "declined", ""}, {que.Moment, "question", ""}, {ans.Moment, "answer", "Pay 4000 and hold the rest."}} {
		rr, err := f.resolve(r.m, "carol", r.kind, 0, r.answer)
		if err != nil || rr.AuthorityID != "" || rr.Kind != r.kind {
			t.Fatalf("%s: %+v %v", r.kind, rr, err)
		}
	}
	// Each session's next result carries its own resolution.
	check := func(session string, code ef.EFCode, kind, answer string, moment bool) {
		t.Helper()
		r := f.handle(call(session, "pay", "payout_create", payoutArgs))
		wantDeny(t, r, code)
		if (r.Moment != nil) != moment {
			t.Fatalf("%s: moment %v", session, r.Moment)
		}
		if len(r.Resolutions) != 1 || r.Resolutions[0].Kind != kind || r.Resolutions[0].Answer != answer || r.Resolutions[0].OptionIdx != nil {
			t.Fatalf("%s: resolutions %+v", session, r.Resolutions)
		}
	}
	// declined ends the matter: the action is refused in that session until a new moment.
	check("s-declined", ef.EFMomentDeclined, "declined", "", false)
	// question reopens deliberation: the gate does not re-emit the question (§7.2).
	check("s-question", ef.EFEscalationRequired, "question", "", false)
	// answer returns the text; the agent may be asked again with a new envelope.
	check("s-answer", ef.EFEscalationRequired, "answer", "Pay 4000 and hold the rest.", true)
	// Resolutions are delivered once.
	if r := f.handle(call("s-declined", "tools", "search", `{}`)); len(r.Resolutions) != 0 || !r.Invoked {
		t.Fatalf("second delivery: %+v", r)
	}
	wantDeny(t, f.handle(call("s-declined", "pay", "payout_create", payoutArgs)), ef.EFMomentDeclined)
	if f.up.count("payout_create") != 0 {
		t.Fatal("invoked")
	}
}

func TestTwoPrincipalRequirement(t *testing.T) {
	f := newFixture(t)
	args := `{"amount":250000,"iban":"DE00"}`
	esc := f.handle(call("s1", "pay", "wire_transfer", args))
	wantDeny(t, esc, ef.EFEscalationRequired)
	m := esc.Moment
	// The agent is listed as a principal but never counts (separation of duties).
	if _, err := f.resolve(m, agentID, "option", 0, ""); !errors.Is(err, ErrSelfResolution) {
		t.Fatalf("agent: %v", err)
	}
	rr, err := f.resolve(m, "alice", "option", 0, "")
	if err != nil || !rr.Pending || rr.AuthorityID != "" || rr.Votes != 1 || rr.Required != 2 {
		t.Fatalf("first vote: %+v %v", rr, err)
	}
	// One principal is not two: no authority yet, and the same principal cannot vote again.
	wantDeny(t, f.handle(call("s1", "pay", "wire_transfer", args)), ef.EFEscalationRequired)
	if _, err := f.resolve(m, "alice", "option", 0, ""); !errors.Is(err, ErrMomentResolved) {
		t.Fatalf("second vote by alice: %v", err)
	}
	// A second principal choosing another option does not make two for either.
	rr, err = f.resolve(m, "bob", "option", 1, "")
	if err != nil || !rr.Pending || rr.Votes != 1 {
		t.Fatalf("bob: %+v %v", rr, err)
	}
	// A third choosing option 0 completes the requirement for option 0 only.
	rr, err = f.resolve(m, "carol", "option", 0, "")
	if err != nil || rr.Pending || rr.AuthorityID == "" || rr.Votes != 2 {
		t.Fatalf("carol: %+v %v", rr, err)
	}
	wantDeny(t, f.handle(call("s1", "pay", "wire_transfer", `{"amount":250000,"hold":true,"iban":"DE00"}`)), ef.EFEscalationRequired)
	if r := f.handle(call("s1", "pay", "wire_transfer", args)); !r.Invoked {
		t.Fatalf("wire: %+v", r)
	}
	if f.up.count("wire_transfer") != 1 {
		t.Fatalf("upstream count %d", f.up.count("wire_transfer"))
	}
}

func TestGrantExpires(t *testing.T) {
	f := newFixture(t)
	esc := f.escalatePayout("s1")
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(DefaultAuthorityTTL + time.Second)
	r := f.handle(call("s1", "pay", "payout_create", payoutArgs))
	wantDeny(t, r, ef.EFEscalationRequired)
	if f.up.total() != 0 {
		t.Fatal("invoked on an expired authority")
	}
}

func proposal(options ...Option) Proposal {
	return Proposal{
		Synopsis:        "Refund the duplicate charge and keep the subscription.",
		Findings:        []string{"Two identical charges were made on the same day."},
		Recommendations: []string{"Refund one charge."},
		Offer:           "Ask for detail on any item.",
		Stem:            "What should happen to the duplicate charge?",
		Options:         options,
		Recommended:     0,
	}
}

func TestRequestMoment(t *testing.T) {
	f := newFixture(t)
	capped := Option{Label: "Pay 100 now", Reasoning: "Settles the urgent part.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100,"to":"acct-9"}`)}
	none := Option{Label: "Search first", Reasoning: "Looks up the invoice before paying.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, proposal(capped, none))
	if err != nil || !res.Allowed || res.Moment == nil || res.Code != "" {
		t.Fatalf("request: %+v %v", res, err)
	}
	// The gate computed the option digests itself.
	o, _ := res.Moment.Envelope.Option(0)
	if o.ActionDigest != digestOf(t, "payout_create", `{"amount":100,"to":"acct-9"}`) {
		t.Fatalf("digest %s", o.ActionDigest)
	}
	// An identical proposal is refused (envelope-04 §12.5).
	dup, _ := f.gate.RequestMoment(context.Background(), "s1", agentID, proposal(capped, none))
	wantDeny(t, dup, ef.EFMomentInvalid)
	rr, err := f.resolve(res.Moment, "alice", "option", 0, "")
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve: %+v %v", rr, err)
	}
	run := f.handle(call("s1", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`))
	if !run.Invoked || len(run.Resolutions) != 1 || run.Resolutions[0].MomentID != res.Moment.ID {
		t.Fatalf("run: %+v", run)
	}
	if f.up.count("payout_create") != 1 {
		t.Fatal("upstream count")
	}
}

func TestRequestMomentRefusals(t *testing.T) {
	pay := func(amount string) Option {
		return Option{Label: "Pay " + amount, Reasoning: "Because.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":` + amount + `}`)}
	}
	for _, tc := range []struct {
		name string
		p    Proposal
		code ef.EFCode
	}{
		{"one option", proposal(pay("1")), ef.EFMomentInvalid},
		{"five options", proposal(pay("1"), pay("2"), pay("3"), pay("4"), pay("5")), ef.EFMomentInvalid},
		{"no human needed", proposal(
			Option{Label: "A", Reasoning: "r", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"a"}`)},
			Option{Label: "B", Reasoning: "r", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"b"}`)}), ef.EFMomentInvalid},
		{"policy refuses an option", proposal(pay("1"), Option{Label: "Wipe", Reasoning: "r", Tool: "delete_all", Server: "pay", Args: json.RawMessage(`{}`)}), ef.EFPolicyDenied},
		{"unknown server", proposal(pay("1"), Option{Label: "X", Reasoning: "r", Tool: "payout_create", Server: "nope", Args: json.RawMessage(`{}`)}), ef.EFMomentInvalid},
		{"server omitted with several servers", proposal(pay("1"), Option{Label: "X", Reasoning: "r", Tool: "payout_create", Args: json.RawMessage(`{}`)}), ef.EFMomentInvalid},
		{"fractional amount", proposal(pay("1"), pay("2.5")), ef.EFArgumentsOutOfProfile},
		{"same action twice", proposal(pay("1"), Option{Label: "Other label", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":1}`)}), ef.EFMomentInvalid},
		{"different principals", proposal(pay("1"), Option{Label: "Wire", Reasoning: "r", Tool: "wire_transfer", Server: "pay", Args: json.RawMessage(`{"amount":1}`)}), ef.EFMomentInvalid},
		{"empty synopsis", func() Proposal { p := proposal(pay("1"), pay("2")); p.Synopsis = " "; return p }(), ef.EFMomentInvalid},
		{"recommended out of range", func() Proposal { p := proposal(pay("1"), pay("2")); p.Recommended = 2; return p }(), ef.EFMomentInvalid},
		{"unknown hatch", func() Proposal { p := proposal(pay("1"), pay("2")); p.Hatches = []string{"escape"}; return p }(), ef.EFMomentInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			wantDeny(t, res, tc.code)
			if res.Moment != nil {
				t.Fatal("a refused proposal registered a moment")
			}
		})
	}
}

func TestQuestionThenNewMoment(t *testing.T) {
	f := newFixture(t)
	p := proposal(
		Option{Label: "Pay 100", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100}`)},
		Option{Label: "Pay 200", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":200}`)})
	res, _ := f.gate.RequestMoment(context.Background(), "s1", agentID, p)
	if _, err := f.resolve(res.Moment, "alice", "question", 0, ""); err != nil {
		t.Fatal(err)
	}
	// §7.2: the same question again is refused; one that incorporates the objection is not.
	again, _ := f.gate.RequestMoment(context.Background(), "s1", agentID, p)
	wantDeny(t, again, ef.EFMomentInvalid)
	if len(again.Resolutions) != 1 || again.Resolutions[0].Kind != "question" {
		t.Fatalf("delivery: %+v", again.Resolutions)
	}
	p.Findings = append(p.Findings, "The principal asked whether any payment is due at all.")
	p.Options = append(p.Options, Option{Label: "Pay nothing yet", Reasoning: "r", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"due"}`)})
	if r, _ := f.gate.RequestMoment(context.Background(), "s1", agentID, p); r.Moment == nil {
		t.Fatalf("revised proposal: %+v", r)
	}
}

func TestRequestMomentRaw(t *testing.T) {
	f := newFixture(t)
	raw := `{"synopsis":"Pay the capped amount.","findings":["f"],"recommendations":["r"],"stem":"How much?",
	 "options":[{"label":"100","reasoning":"r","tool":"payout_create","server":"pay","args":{"amount":100}},
	            {"label":"200","reasoning":"r","tool":"payout_create","server":"pay","args":{"amount":200}}],
	 "recommended":0,"hatches":["dialogue"]}`
	res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, Proposal{Raw: json.RawMessage(raw)})
	if err != nil || res.Moment == nil {
		t.Fatalf("%+v %v", res, err)
	}
	if h := res.Moment.Envelope.Hatches(); h.FreeText || !h.Dialogue {
		t.Fatalf("hatches %+v", h)
	}
	// An agent cannot hand the gate a digest.
	bad := strings.Replace(raw, `"label":"100",`, `"label":"100","action_digest":"sha256:`+strings.Repeat("0", 64)+`",`, 1)
	r, _ := f.gate.RequestMoment(context.Background(), "s2", agentID, Proposal{Raw: json.RawMessage(bad)})
	wantDeny(t, r, ef.EFMomentInvalid)
}

// TestConcurrentEscalationsAndResolutions races escalations of one call (which look up the
// pending moment) with resolutions of it (which record grants and deliveries): no deadlock, no
// race, and the call runs at most once per resolved moment.
func TestConcurrentEscalationsAndResolutions(t *testing.T) {
	f := newFixture(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := range 20 {
			esc := f.handle(call("s1", "pay", "payout_create", payoutArgs))
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { f.handle(call("s1", "pay", "payout_create", payoutArgs)) })
			}
			if esc.Moment != nil {
				wg.Go(func() { _, _ = f.resolve(esc.Moment, "alice", "declined", 0, "") })
				wg.Go(func() { _, _ = f.resolve(esc.Moment, "bob", "question", 0, "") })
			}
			wg.Wait()
			// A new proposal lifts the decline or reopening so the next round escalates again.
			p := proposal(
				Option{Label: "Pay", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(payoutArgs)},
				Option{Label: "Pay less", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":1}`)})
			p.Findings = []string{fmt.Sprintf("Round %d, after act %s.", round, esc.ActID)}
			_, _ = f.gate.RequestMoment(context.Background(), "s1", agentID, p)
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("escalations and resolutions deadlocked")
	}
	if f.up.total() != 0 {
		t.Fatal("a declined or questioned payout ran")
	}
}

// TestClosedHatchResolutionRefused: an agent that closed the question-space hatch (envelope-04
// §5.8) gets no question resolution through any surface: Resolve refuses it and records nothing.
func TestClosedHatchResolutionRefused(t *testing.T) {
	f := newFixture(t)
	capped := Option{Label: "Pay 100 now", Reasoning: "Settles the urgent part.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100,"to":"acct-9"}`)}
	none := Option{Label: "Search first", Reasoning: "Looks up the invoice before paying.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	p := proposal(capped, none)
	p.Hatches = []string{HatchFreeText}
	res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, p)
	if err != nil || res.Moment == nil {
		t.Fatalf("request: %+v %v", res, err)
	}
	if _, err := f.resolve(res.Moment, "alice", "question", 0, ""); !errors.Is(err, ErrResolutionInvalid) {
		t.Fatalf("question through a closed hatch: %v", err)
	}
	// The moment is still open: an allowed resolution goes through.
	if rr, err := f.resolve(res.Moment, "alice", "answer", 0, "Pay 50 instead."); err != nil || rr.Kind != "answer" {
		t.Fatalf("answer: %+v %v", rr, err)
	}
}
