package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/sink/moment"
)

// boltMoments is the embedded store as the gate's MomentStore (what internal/standalone wires),
// failing PutMoment while fail is set.
type boltMoments struct {
	st   *boltstore.Store
	fail *atomic.Bool
}

func (b boltMoments) PutMoment(ctx context.Context, m StoredMoment) error {
	if b.fail != nil && b.fail.Load() {
		return errors.New("moment store: injected failure")
	}
	return b.st.PutMoment(ctx, boltstore.Moment{ID: m.ID, Settled: m.Settled, Data: m.Data})
}

func (b boltMoments) LoadMoments(ctx context.Context, since time.Time) ([]StoredMoment, error) {
	ms, err := b.st.LoadMoments(ctx, since)
	var out []StoredMoment
	for _, m := range ms {
		out = append(out, StoredMoment{ID: m.ID, Settled: m.Settled, Data: m.Data})
	}
	return out, err
}

// newDurableFixture is the fixture with the embedded store as MomentStore.
func newDurableFixture(t *testing.T, fail *atomic.Bool, mutate ...func(*Options)) *fixture {
	return newFixture(t, func(o *Options) {
		o.Moments = boltMoments{st: o.Store.(*boltstore.Store), fail: fail}
		for _, m := range mutate {
			m(o)
		}
	})
}

func (f *fixture) pending() []Moment {
	f.t.Helper()
	ms, err := f.gate.Moments(context.Background(), MomentFilter{Pending: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return ms
}

// A gate-authored moment registered before a restart is resolved after it; the agent's call,
// made in a new session (the old one ended with the process), runs once; a replay is refused.
func TestMomentResolvedAfterRestart(t *testing.T) {
	f := newDurableFixture(t, nil)
	esc := f.escalatePayout("s1")
	f.restart()
	if p := f.pending(); len(p) != 1 || p[0].ID != esc.Moment.ID || !p[0].GateAuthored || len(p[0].Calls) != 3 {
		t.Fatalf("pending after restart: %+v", p)
	}
	// The agent's call in its new session finds the moment, not a second one.
	again := f.handle(call("s2", "pay", "payout_create", payoutArgs))
	wantDeny(t, again, ef.EFEscalationRequired)
	if again.Moment == nil || again.Moment.ID != esc.Moment.ID {
		t.Fatalf("a new moment after restart: %+v", again.Moment)
	}
	rr, err := f.resolve(esc.Moment, "alice", "option", 0, "")
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve after restart: %+v %v", rr, err)
	}
	if r := f.handle(call("s2", "pay", "payout_create", payoutArgs)); !r.Invoked {
		t.Fatalf("authorised call: %+v", r)
	}
	// The alternative was not authorised, and the authority is spent.
	wantDeny(t, f.handle(call("s3", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`)), ef.EFEscalationRequired)
	wantDeny(t, f.handle(call("s3", "pay", "payout_create", payoutArgs)), ef.EFEscalationRequired)
	if n := f.up.count("payout_create"); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
	if _, err := f.resolve(esc.Moment, "bob", "option", 0, ""); !errors.Is(err, ErrMomentResolved) {
		t.Fatalf("second resolution: %v", err)
	}
}

// A grant issued before a restart authorises the call once after it; after a second restart
// the grant is read again, and the store's consume (not the gate's memory) refuses it.
func TestGrantSurvivesRestart(t *testing.T) {
	f := newDurableFixture(t, nil)
	esc := f.escalatePayout("s1")
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if r := f.handle(call("s2", "pay", "payout_create", payoutArgs)); !r.Invoked {
		t.Fatalf("authorised call after restart: %+v", r)
	}
	if r := f.handle(call("s2", "pay", "payout_create", payoutArgs)); r.Invoked || !r.Replayed {
		t.Fatalf("retry in the session: %+v", r)
	}
	f.restart()
	r := f.handle(call("s3", "pay", "payout_create", payoutArgs))
	if r.Invoked || r.Allowed {
		t.Fatalf("replay after the second restart: %+v", r)
	}
	if n := f.up.count("payout_create"); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
	// The moment is resolved for good.
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); !errors.Is(err, ErrMomentResolved) {
		t.Fatalf("resolution after restarts: %v", err)
	}
}

// An expired moment stays expired across a restart.
func TestExpiredMomentStaysExpired(t *testing.T) {
	f := newDurableFixture(t, nil)
	esc := f.escalatePayout("s1")
	f.clock.Advance(DefaultMomentTTL + time.Second)
	f.restart()
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); !errors.Is(err, ErrMomentExpired) {
		t.Fatalf("resolution of an expired moment: %v", err)
	}
	if p := f.pending(); len(p) != 0 {
		t.Fatalf("pending: %+v", p)
	}
	if r := f.handle(call("s2", "pay", "payout_create", payoutArgs)); r.Invoked || r.Moment == nil || r.Moment.ID == esc.Moment.ID {
		t.Fatalf("call after expiry: %+v", r)
	}
	if f.up.total() != 0 {
		t.Fatal("invoked")
	}
}

// The quorum of distinct principals counts across a restart: one vote before, one after.
func TestQuorumAcrossRestart(t *testing.T) {
	f := newDurableFixture(t, nil)
	args := `{"amount":250000,"iban":"DE00"}`
	esc := f.handle(call("s1", "pay", "wire_transfer", args))
	wantDeny(t, esc, ef.EFEscalationRequired)
	if rr, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil || !rr.Pending {
		t.Fatalf("alice: %+v %v", rr, err)
	}
	f.restart()
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); !errors.Is(err, ErrMomentResolved) {
		t.Fatalf("alice again after restart: %v", err)
	}
	wantDeny(t, f.handle(call("s2", "pay", "wire_transfer", args)), ef.EFEscalationRequired)
	rr, err := f.resolve(esc.Moment, "bob", "option", 0, "")
	if err != nil || rr.Pending || rr.AuthorityID == "" || rr.Votes != 2 {
		t.Fatalf("bob: %+v %v", rr, err)
	}
	if r := f.handle(call("s2", "pay", "wire_transfer", args)); !r.Invoked {
		t.Fatalf("wire: %+v", r)
	}
	if n := f.up.count("wire_transfer"); n != 1 {
		t.Fatalf("upstream count %d", n)
	}
}

// An agent-proposed moment survives a restart, and its option runs once after it.
func TestProposedMomentSurvivesRestart(t *testing.T) {
	f := newDurableFixture(t, nil)
	capped := Option{Label: "Pay 100 now", Reasoning: "Settles the urgent part.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100,"to":"acct-9"}`)}
	none := Option{Label: "Search first", Reasoning: "Looks up the invoice before paying.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	res, err := f.gate.RequestMoment(context.Background(), "s1", agentID, proposal(capped, none))
	if err != nil || !res.Allowed || res.Moment == nil {
		t.Fatalf("request: %+v %v", res, err)
	}
	f.restart()
	if p := f.pending(); len(p) != 1 || p[0].ID != res.Moment.ID || p[0].GateAuthored {
		t.Fatalf("pending after restart: %+v", p)
	}
	// The registry knows the envelope again: an identical proposal is still refused (§12.5).
	dup, _ := f.gate.RequestMoment(context.Background(), "s2", agentID, proposal(capped, none))
	wantDeny(t, dup, ef.EFMomentInvalid)
	if rr, err := f.resolve(res.Moment, "alice", "option", 0, ""); err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolve: %+v %v", rr, err)
	}
	if r := f.handle(call("s2", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`)); !r.Invoked {
		t.Fatalf("run: %+v", r)
	}
	wantDeny(t, f.handle(call("s3", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`)), ef.EFEscalationRequired)
	if n := f.up.count("payout_create"); n != 1 {
		t.Fatalf("upstream count %d", n)
	}
}

// The pending-moment limits count the moments restored after a restart.
func TestMomentLimitsAfterRestart(t *testing.T) {
	f := newDurableFixture(t, nil, func(o *Options) { o.MaxPendingMomentsPerAgent = 2 })
	for i := range 2 {
		res := f.handle(call(fmt.Sprintf("s%d", i), "pay", "payout_create", fmt.Sprintf(`{"amount":%d,"to":"acct-9"}`, 10+i)))
		wantDeny(t, res, ef.EFEscalationRequired)
		if res.Moment == nil {
			t.Fatalf("moment %d not registered: %+v", i, res)
		}
	}
	f.restart()
	wantDeny(t, f.handle(call("s9", "pay", "payout_create", `{"amount":99,"to":"acct-9"}`)), ef.EFMomentLimit)
	capped := Option{Label: "Pay 100 now", Reasoning: "Settles the urgent part.", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":100,"to":"acct-9"}`)}
	none := Option{Label: "Search first", Reasoning: "Looks up the invoice before paying.", Tool: "search", Server: "tools", Args: json.RawMessage(`{"q":"invoice"}`)}
	res, _ := f.gate.RequestMoment(context.Background(), "s9", agentID, proposal(capped, none))
	wantDeny(t, res, ef.EFMomentLimit)
	// Once they expire, the agent may escalate again.
	f.clock.Advance(DefaultMomentTTL + time.Second)
	f.restart()
	if res := f.handle(call("s9", "pay", "payout_create", `{"amount":99,"to":"acct-9"}`)); res.Moment == nil {
		t.Fatalf("after expiry: %+v", res)
	}
}

// Settled moments are deleted MomentRetention after they settled; newer ones are kept.
func TestMomentRetention(t *testing.T) {
	f := newDurableFixture(t, nil)
	old := f.escalatePayout("s1")
	if _, err := f.resolve(old.Moment, "alice", "option", 1, ""); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(MomentRetention - time.Minute)
	recent := f.handle(call("s2", "pay", "payout_create", `{"amount":7,"to":"acct-9"}`))
	f.restart()
	all := func() map[string]bool {
		ms, err := f.gate.Moments(context.Background(), MomentFilter{})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, m := range ms {
			ids[m.ID] = true
		}
		return ids
	}
	if ids := all(); !ids[old.Moment.ID] || !ids[recent.Moment.ID] {
		t.Fatalf("within retention: %v", ids)
	}
	f.clock.Advance(2 * time.Hour)
	f.restart()
	if ids := all(); ids[old.Moment.ID] || !ids[recent.Moment.ID] {
		t.Fatalf("after retention: %v", ids)
	}
	if _, err := f.resolve(old.Moment, "alice", "option", 0, ""); !errors.Is(err, ErrMomentNotFound) {
		t.Fatalf("resolution of a deleted moment: %v", err)
	}
}

// A moment the store cannot take is not registered; a resolution the store cannot take is
// refused, issues no usable grant, and the call does not run.
func TestMomentStoreFailureFailsClosed(t *testing.T) {
	var fail atomic.Bool
	f := newDurableFixture(t, &fail)
	fail.Store(true)
	wantDeny(t, f.handle(call("s1", "pay", "payout_create", payoutArgs)), ef.EFStoreUnavailable)
	if p := f.pending(); len(p) != 0 {
		t.Fatalf("an unstored moment is listed: %+v", p)
	}
	fail.Store(false)
	esc := f.escalatePayout("s1")
	fail.Store(true)
	if rr, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err == nil {
		t.Fatalf("resolution the store refused: %+v", rr)
	}
	r := f.handle(call("s1", "pay", "payout_create", payoutArgs))
	if r.Invoked || r.Allowed {
		t.Fatalf("call after a refused resolution: %+v", r)
	}
	if f.up.total() != 0 {
		t.Fatal("invoked")
	}
	// After a restart the moment is pending (its resolution was never stored); resolving it
	// again meets the authority issued the first time (its id derives from the binding) and
	// grants the option under a new act id; the call runs once.
	fail.Store(false)
	f.restart()
	if p := f.pending(); len(p) != 1 || p[0].ID != esc.Moment.ID {
		t.Fatalf("pending after restart: %+v", p)
	}
	rr, err := f.resolve(esc.Moment, "alice", "option", 0, "")
	if err != nil || rr.AuthorityID == "" {
		t.Fatalf("resolution after restart: %+v %v", rr, err)
	}
	if r := f.handle(call("s2", "pay", "payout_create", payoutArgs)); !r.Invoked {
		t.Fatalf("authorised call: %+v", r)
	}
	wantDeny(t, f.handle(call("s3", "pay", "payout_create", payoutArgs)), ef.EFEscalationRequired)
	if n := f.up.count("payout_create"); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
}

// A corrupt stored moment stops the gate from starting, with an error naming it.
func TestCorruptStoredMomentRefusesStart(t *testing.T) {
	f := newDurableFixture(t, nil)
	f.escalatePayout("s1")
	bad := boltstore.Moment{ID: "bm-00000000000000000000000000000000", Settled: t0.Add(time.Hour), Data: []byte(`{"v":1,"id":"bm-00000000000000000000000000000000"}`)}
	if err := f.store.PutMoment(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	f.close()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	st, err := boltstore.Open(f.dir+"/actgate.db", boltstore.Options{Verifier: f.signer.Verifier(), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids, err := act.NewIDIssuer(f.idKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{SinkID: "sink-test", Policy: f.policy, Store: st, Journal: st, Signer: f.signer, IDs: ids,
		Now: f.clock.Now, Moments: boltMoments{st: st}})
	if !errors.Is(err, ErrMomentRecord) || !strings.Contains(err.Error(), bad.ID) {
		t.Fatalf("New with a corrupt moment: %v", err)
	}
}

// TestDecodeMomentRefusesBadRecords: every damaged record is an ErrMomentRecord, never a
// panic, and never a moment for other calls.
func TestDecodeMomentRefusesBadRecords(t *testing.T) {
	good := storedRecord(t)
	var r map[string]any
	if err := json.Unmarshal(good, &r); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeMoment(good); err != nil {
		t.Fatalf("good record: %v", err)
	}
	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	option := func(m map[string]any, i int) map[string]any { return m["options"].([]any)[i].(map[string]any) }
	for name, b := range map[string][]byte{
		"empty":             nil,
		"not json":          []byte("{"),
		"trailing":          append(append([]byte{}, good...), []byte(" {}")...),
		"unknown field":     edit(func(m map[string]any) { m["extra"] = 1 }),
		"version":           edit(func(m map[string]any) { m["v"] = 2 }),
		"id":                edit(func(m map[string]any) { m["id"] = "bm-x" }),
		"no envelope":       edit(func(m map[string]any) { delete(m, "envelope") }),
		"bad envelope":      edit(func(m map[string]any) { m["envelope"] = map[string]any{"x": 1} }),
		"no principals":     edit(func(m map[string]any) { m["principals"] = []any{} }),
		"min":               edit(func(m map[string]any) { m["min"] = 0 }),
		"ttl":               edit(func(m map[string]any) { m["authorityTTL"] = -1 }),
		"expires":           edit(func(m map[string]any) { m["expires"] = m["created"] }),
		"other args":        edit(func(m map[string]any) { option(m, 0)["args"] = map[string]any{"amount": 1} }),
		"other tool":        edit(func(m map[string]any) { option(m, 0)["tool"] = "wire_transfer" }),
		"option dropped":    edit(func(m map[string]any) { m["options"] = m["options"].([]any)[:2] }),
		"vote of stranger":  edit(func(m map[string]any) { m["votes"] = map[string]any{"mallory": 0} }),
		"vote out of range": edit(func(m map[string]any) { m["votes"] = map[string]any{"alice": 7} }),
		"kind":              edit(func(m map[string]any) { m["kind"] = "maybe"; m["resolved"] = true }),
		"grant unresolved": edit(func(m map[string]any) {
			m["grants"] = []any{map[string]any{"actId": "a", "authorityId": "x", "destination": payURL, "actionDigest": option(m, 0)["actionDigest"], "expires": m["expires"]}}
		}),
		"class": edit(func(m map[string]any) { m["class"] = "HARMLESS" }),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeMoment(b); !errors.Is(err, ErrMomentRecord) {
				t.Fatalf("err = %v, want ErrMomentRecord", err)
			}
		})
	}
}

// storedRecord is the stored record of a gate-authored payout moment.
func storedRecord(t testing.TB) []byte {
	t.Helper()
	var got []byte
	rec := &recordingMoments{put: func(m StoredMoment) { got = m.Data }}
	f := newFixture(t, func(o *Options) { o.Moments = rec })
	f.escalatePayout("s1")
	if got == nil {
		t.Fatal("no record stored")
	}
	return got
}

type recordingMoments struct{ put func(StoredMoment) }

func (r *recordingMoments) PutMoment(_ context.Context, m StoredMoment) error {
	r.put(m)
	return nil
}

func (r *recordingMoments) LoadMoments(context.Context, time.Time) ([]StoredMoment, error) {
	return nil, nil
}

func FuzzDecodeMoment(f *testing.F) {
	f.Add(storedRecord(f))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, grants, err := moment.Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMomentRecord) {
				t.Fatalf("error outside ErrMomentRecord: %v", err)
			}
			return
		}
		// What decodes is a consistent moment: its options are its envelope's.
		if len(m.Options) != m.Env.NumOptions() {
			t.Fatalf("%d options for %d", len(m.Options), m.Env.NumOptions())
		}
		for i, o := range m.Options {
			eo, _ := m.Env.Option(i)
			if eo.ActionDigest != o.ActionDigest {
				t.Fatalf("option %d digest", i)
			}
		}
		if len(grants) > 0 && !m.Resolved {
			t.Fatal("grants of an unresolved moment")
		}
	})
}

// A restored moment is continued by its own agent only: another agent's identical call, in
// any session, neither finds its grant nor its pending escalation.
func TestRestoredGrantIsTheAgentsOnly(t *testing.T) {
	f := newDurableFixture(t, nil)
	esc := f.escalatePayout("s1")
	pending := f.handle(call("s1", "pay", "payout_create", `{"amount":9,"to":"acct-9"}`))
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	f.restart()
	other := call("s2", "pay", "payout_create", payoutArgs)
	other.Agent = "agent-2"
	r := f.handle(other)
	wantDeny(t, r, ef.EFEscalationRequired)
	if r.Moment == nil || r.Moment.ID == esc.Moment.ID {
		t.Fatalf("another agent's call: %+v", r.Moment)
	}
	otherPending := call("s2", "pay", "payout_create", `{"amount":9,"to":"acct-9"}`)
	otherPending.Agent = "agent-2"
	if r := f.handle(otherPending); r.Moment == nil || r.Moment.ID == pending.Moment.ID {
		t.Fatalf("another agent found the restored pending moment: %+v", r.Moment)
	}
	if f.up.total() != 0 {
		t.Fatal("invoked for another agent")
	}
	if r := f.handle(call("s3", "pay", "payout_create", payoutArgs)); !r.Invoked {
		t.Fatalf("the moment's agent: %+v", r)
	}
	if r := f.handle(call("s3", "pay", "payout_create", `{"amount":9,"to":"acct-9"}`)); r.Moment == nil || r.Moment.ID != pending.Moment.ID {
		t.Fatalf("the moment's agent did not find its pending moment: %+v", r.Moment)
	}
}
