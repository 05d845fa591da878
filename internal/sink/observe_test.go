package sink

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu       sync.Mutex
	calls    []CallEvent
	emitted  []MomentEvent
	resolved []ResolutionEvent
	expired  []MomentEvent
}

func (r *recorder) CallDecided(e CallEvent) { r.mu.Lock(); r.calls = append(r.calls, e); r.mu.Unlock() }
func (r *recorder) MomentEmitted(e MomentEvent) {
	r.mu.Lock()
	r.emitted = append(r.emitted, e)
	r.mu.Unlock()
}
func (r *recorder) MomentResolved(_ MomentEvent, e ResolutionEvent) {
	r.mu.Lock()
	r.resolved = append(r.resolved, e)
	r.mu.Unlock()
}
func (r *recorder) MomentExpired(e MomentEvent) {
	r.mu.Lock()
	r.expired = append(r.expired, e)
	r.mu.Unlock()
}

func TestObserverSeesCallsAndMoments(t *testing.T) {
	rec := &recorder{}
	var other recorder
	f := newFixture(t, func(o *Options) { o.Observer = Observers(nil, rec, &other) })

	// A hot-path allow and a policy deny, each one CallEvent with class, code and digest only.
	f.handle(call("s1", "tools", "search", `{"q":"secret-value"}`))
	f.handle(call("s1", "nowhere", "search", `{}`))
	res := f.escalatePayout("s1")

	if len(rec.calls) != 3 || len(other.calls) != 3 {
		t.Fatalf("calls seen: %d and %d, want 3 each", len(rec.calls), len(other.calls))
	}
	hot := rec.calls[0]
	if !hot.Allowed || !hot.Invoked || hot.Class != act.ClassInformational || hot.Code != "" || hot.ActionDigest == "" || hot.ActID == "" {
		t.Fatalf("hot call event: %+v", hot)
	}
	if rec.calls[1].Allowed || rec.calls[1].Code == "" || rec.calls[1].Invoked {
		t.Fatalf("denied call event: %+v", rec.calls[1])
	}
	esc := rec.calls[2]
	if esc.Code != ef.EFEscalationRequired || esc.Class != act.ClassFinancial || esc.Outcome != PolicyEscalate {
		t.Fatalf("escalation event: %+v", esc)
	}
	b, _ := json.Marshal(rec.calls)
	if strings.Contains(string(b), "secret-value") || strings.Contains(string(b), "acct-9") {
		t.Fatalf("events carry argument values: %s", b)
	}

	// The moment: emitted with its hatches, class and principals; resolved once.
	if len(rec.emitted) != 1 {
		t.Fatalf("emitted %d", len(rec.emitted))
	}
	m := rec.emitted[0]
	if m.ID != res.Moment.ID || m.EnvelopeDigest != res.Moment.Digest || !m.GateAuthored || m.Class != act.ClassFinancial ||
		m.Tool != "payout_create" || m.Server != "pay" || len(m.Principals) == 0 || m.Synopsis == "" || !m.FreeTextHatch || !m.DialogueHatch {
		t.Fatalf("emitted event: %+v", m)
	}
	if _, err := f.resolve(res.Moment, "alice", "question", 0, ""); err != nil {
		t.Fatal(err)
	}
	if len(rec.resolved) != 1 || rec.resolved[0].Kind != "question" || rec.resolved[0].Principal != "alice" {
		t.Fatalf("resolved: %+v", rec.resolved)
	}
	if n := f.gate.SweepMoments(); n != 0 || len(rec.expired) != 0 {
		t.Fatalf("a resolved moment expired: %d", n)
	}
}

func TestObserverSeesExpiryOnce(t *testing.T) {
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Observer = rec })
	res := f.escalatePayout("s1")
	if n := f.gate.SweepMoments(); n != 0 {
		t.Fatalf("expired before its time: %d", n)
	}
	f.clock.Advance(DefaultMomentTTL + time.Second)
	if n := f.gate.SweepMoments(); n != 1 {
		t.Fatalf("sweep: %d, want 1", n)
	}
	// Listing and sweeping again report nothing new.
	if _, err := f.gate.Moments(context.Background(), MomentFilter{}); err != nil {
		t.Fatal(err)
	}
	if n := f.gate.SweepMoments(); n != 0 || len(rec.expired) != 1 || rec.expired[0].ID != res.Moment.ID {
		t.Fatalf("expired events: %+v", rec.expired)
	}
	if len(rec.resolved) != 0 {
		t.Fatalf("resolved: %+v", rec.resolved)
	}
}

func TestObserverSeesIndeterminate(t *testing.T) {
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Observer = rec })
	inv := func(context.Context, string) (InvokeResult, error) {
		return InvokeResult{Outcome: OutcomeIndeterminate}, nil
	}
	res, err := f.gate.Handle(context.Background(), call("s1", "tools", "email_send", `{"to":"a@example.com"}`), inv)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != journal.StateIndeterminate {
		t.Fatalf("state %s", res.State)
	}
	if len(rec.calls) != 1 || rec.calls[0].State != journal.StateIndeterminate || !rec.calls[0].Invoked {
		t.Fatalf("events: %+v", rec.calls)
	}
}
