package sink

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/ratelimit"
)

func withRate(p *tablePolicy, tool string, rl policy.RateLimit) {
	for i := range p.rules {
		if p.rules[i].tool == tool {
			p.rules[i].rate = &rl
		}
	}
}

// TestRateLimit: a rule's rate limit is decided by the gate before anything else happens: over
// the bucket an allowed call is not invoked, a permitted call gets no authority and no journal
// record, an escalation registers no moment; each is refused with EF_RATE_LIMITED, a receipt
// of the refusal and the wait until the bucket holds a call again. Buckets are per agent and
// tool unless the limit is per pod (the whole process); a refused call takes nothing.
func TestRateLimit(t *testing.T) {
	f := newFixture(t)
	withRate(f.policy, "search", policy.RateLimit{Limit: ratelimit.Limit{Calls: 2, Period: time.Minute, Burst: 2}})
	withRate(f.policy, "ticket_create", policy.RateLimit{Limit: ratelimit.Limit{Calls: 1, Period: time.Hour, Burst: 1}, PerPod: true})
	withRate(f.policy, "payout_create", policy.RateLimit{Limit: ratelimit.Limit{Calls: 1, Period: time.Hour, Burst: 1}})

	for i := range 2 {
		if res := f.handle(call("s1", "tools", "search", fmt.Sprintf(`{"q":"%d"}`, i))); !res.Allowed {
			t.Fatalf("search %d within the limit: %+v", i, res)
		}
	}
	res := f.handle(call("s1", "tools", "search", `{"q":"x"}`))
	wantDeny(t, res, ef.EFRateLimited)
	if res.RetryAfter != 30*time.Second || f.up.count("search") != 2 {
		t.Fatalf("over the limit: retry after %s (want 30s), upstream ran %d times (want 2): %s", res.RetryAfter, f.up.count("search"), res.Message)
	}
	if rs := f.receipts(); rs[len(rs)-1].Code != string(ef.EFRateLimited) {
		t.Fatalf("the refusal's receipt: %+v", rs[len(rs)-1])
	}
	// Another agent has a bucket of its own; the refused call took nothing from the first.
	other := call("s2", "tools", "search", `{"q":"y"}`)
	other.Agent = "agent-2"
	if res := f.handle(other); !res.Allowed {
		t.Fatalf("another agent's call: %+v", res)
	}
	f.clock.Advance(30 * time.Second)
	if res := f.handle(call("s1", "tools", "search", `{"q":"z"}`)); !res.Allowed {
		t.Fatalf("after 30s: %+v", res)
	}

	// Permit, per pod: the second call, by another agent, gets no authority and no dispatch.
	if res := f.handle(call("s1", "tools", "ticket_create", `{"t":1}`)); !res.Allowed || f.up.count("ticket_create") != 1 {
		t.Fatalf("the first permitted call: %+v", res)
	}
	records := len(f.records(journal.StateExecuted))
	second := call("s3", "tools", "ticket_create", `{"t":2}`)
	second.Agent = "agent-3"
	res = f.handle(second)
	wantDeny(t, res, ef.EFRateLimited)
	if f.up.count("ticket_create") != 1 || len(f.records(journal.StateExecuted)) != records || res.OperationID != "" || res.RetryAfter != time.Hour {
		t.Fatalf("over a pod's limit: upstream %d, records %d (before %d), operation %q, retry after %s",
			f.up.count("ticket_create"), len(f.records(journal.StateExecuted)), records, res.OperationID, res.RetryAfter)
	}

	// Escalate: the second escalation registers no moment.
	first := f.handle(call("s1", "pay", "payout_create", `{"amount":5}`))
	if first.Code != ef.EFEscalationRequired || first.Moment == nil {
		t.Fatalf("the first escalation: %+v", first)
	}
	res = f.handle(call("s1", "pay", "payout_create", `{"amount":6}`))
	wantDeny(t, res, ef.EFRateLimited)
	if res.Moment != nil || f.up.count("payout_create") != 0 {
		t.Fatalf("over the limit an escalation registered moment %+v, upstream %d", res.Moment, f.up.count("payout_create"))
	}
}

// TestRateLimitAudit: in mode Audit a call over the limit runs, recorded with the code
// enforcement would have returned.
func TestRateLimitAudit(t *testing.T) {
	f := newFixture(t)
	f.policy.audit = true
	withRate(f.policy, "search", policy.RateLimit{Limit: ratelimit.Limit{Calls: 1, Period: time.Minute, Burst: 1}})
	f.handle(call("s1", "tools", "search", `{"q":"1"}`))
	res := f.handle(call("s1", "tools", "search", `{"q":"2"}`))
	if !res.Allowed || res.AuditCode != ef.EFRateLimited || f.up.count("search") != 2 {
		t.Fatalf("audit over the limit: allowed %v audit code %q upstream %d", res.Allowed, res.AuditCode, f.up.count("search"))
	}
}

// TestRateLimitRace: 64 concurrent callers of one permitted tool with a burst of 20: exactly
// 20 are invoked and journaled, the rest refused with EF_RATE_LIMITED.
func TestRateLimitRace(t *testing.T) {
	f := newFixture(t)
	withRate(f.policy, "ticket_create", policy.RateLimit{Limit: ratelimit.Limit{Calls: 1, Period: time.Hour, Burst: 20}})
	var wg sync.WaitGroup
	var limited atomic.Int64
	for i := range 64 {
		wg.Go(func() {
			res, err := f.gate.Handle(context.Background(), call(fmt.Sprint("s", i), "tools", "ticket_create", fmt.Sprintf(`{"t":%d}`, i)), f.up.invoker("ticket_create"))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			if res.Code == ef.EFRateLimited {
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	if f.up.count("ticket_create") != 20 || limited.Load() != 44 || len(f.records(journal.StateExecuted)) != 20 {
		t.Fatalf("upstream ran %d, %d refused, %d journaled; want 20, 44, 20", f.up.count("ticket_create"), limited.Load(), len(f.records(journal.StateExecuted)))
	}
}
