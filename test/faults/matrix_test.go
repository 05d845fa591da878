//go:build unix

package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// after is what the journal holds for the first call's operation once the gate restarted.
type after int

const (
	noRecord      after = iota // nothing was consumed or journaled
	indeterminate              // INDETERMINATE, reason recovered_on_start, authority consumed
	executed                   // EXECUTED (the outcome was recorded), authority consumed
)

// TestStandaloneMatrix is the failpoint matrix for the standalone gate (doc.go, "The matrix"):
// a real `actgate serve` built with -tags failpoints is killed at each dispatch boundary during
// a call of a protected tool; it is restarted over the same data dir; the agent retries the
// same call in a new session. Asserted each time: the upstream's own count of invocations is 0
// or 1 and never grows on the retry, the journal holds the right action-evidence-boundary
// state, the authority is consumed or does not exist, and `actgate receipts verify` accepts
// the receipt log after the restart (tool-use-binding §16, §22 T-G).
func TestStandaloneMatrix(t *testing.T) {
	for _, tc := range []struct {
		point failpoint.Point
		// dies is false where the instant does not exist in this deployment: the embedded
		// store consumes and journals DISPATCH_PENDING in one bbolt commit.
		dies bool
		// ran is the upstream's count when the process died: min and max (a kill while the
		// request is on the wire may come before or after the upstream read it).
		ranMin, ranMax int
		want           after
	}{
		{point: failpoint.BeforeConsume, dies: true, want: noRecord},
		{point: failpoint.AfterConsume, dies: false, ranMin: 1, ranMax: 1, want: executed},
		{point: failpoint.AfterPending, dies: true, want: indeterminate},
		{point: failpoint.DuringInvoke, dies: true, ranMax: 1, want: indeterminate},
		{point: failpoint.AfterInvoke, dies: true, ranMin: 1, ranMax: 1, want: indeterminate},
	} {
		t.Run(string(tc.point), func(t *testing.T) {
			u := startUpstream(t, false, nil)
			g := newStandalone(t, u.URL, 5*time.Second)

			// 1. The call, with the failpoint armed.
			p1 := g.start(t, failpoint.EnvVar+"="+string(tc.point))
			cs := agent(t, p1.endpoint())
			first, callErr := callTool(cs, protectedTool, ticketArgs, 20*time.Second)
			if tc.dies {
				if callErr == nil {
					t.Fatalf("the call returned although the gate was killed: %s\n%s", js(first), p1.Out.String())
				}
				p1.WaitKilled(t)
			} else {
				if callErr != nil || first.IsError || !p1.Alive() {
					t.Fatalf("%s does not exist in the embedded store, yet the call failed: %v %s", tc.point, callErr, js(first))
				}
				// The same call again in the same session is its retry: the recorded result,
				// not a second invocation (tool-use-binding §9).
				if r := mustCall(t, cs, protectedTool, ticketArgs); r.IsError || u.Count(protectedTool) != 1 {
					t.Fatalf("same-session retry: %s, upstream count %d", js(r), u.Count(protectedTool))
				}
				p1.stop(t)
			}
			if tc.point == failpoint.DuringInvoke {
				// The request was written before the kill; give the upstream a moment to
				// read it (or to see the connection close first).
				time.Sleep(500 * time.Millisecond)
			}
			ran := u.Count(protectedTool)
			if ran < tc.ranMin || ran > tc.ranMax {
				t.Fatalf("upstream ran %s %d times before the crash, want %d..%d", protectedTool, ran, tc.ranMin, tc.ranMax)
			}
			t.Logf("upstream invocations at the crash: %d", ran)

			// 2. Restart over the same data; 3. the agent retries in a new session.
			p2 := g.start(t)
			recovered := strings.Contains(p2.Out.String(), "Recovered in-flight dispatches as INDETERMINATE")
			if recovered != (tc.want == indeterminate) {
				t.Errorf("recovery logged %v, want %v:\n%s", recovered, tc.want == indeterminate, p2.Out.String())
			}
			var retry *mcp.CallToolResult
			if tc.want != executed {
				retry = mustCall(t, agent(t, p2.endpoint()), protectedTool, ticketArgs)
			}
			switch tc.want {
			case indeterminate:
				// An effect may have happened: refused until reconciled, never replayed
				// blindly (action-evidence-boundary "prohibit a blind replay").
				if efCode(retry) != string(ef.EFIndeterminate) || !retry.IsError {
					t.Fatalf("retry after restart: %s", js(retry))
				}
				if n := u.Count(protectedTool); n != ran {
					t.Fatalf("the retry reached the upstream: count %d, was %d", n, ran)
				}
			case noRecord:
				// Nothing ran and nothing was spent: the retry is the call's first dispatch.
				if retry.IsError || u.Count(protectedTool) != 1 {
					t.Fatalf("retry after a crash before consume: %s, upstream count %d", js(retry), u.Count(protectedTool))
				}
			case executed:
				// The outcome was recorded (and the same-session retry above was answered
				// from it). In a new session the identical call would be a new act with its
				// own authority (tool-use-binding §23), so it is not made here.
			}
			p2.stop(t)

			// 4. The state of the world.
			w := g.readWorld(t)
			recs := w.all()
			var first0 *journal.DispatchRecord
			switch tc.want {
			case noRecord:
				// Only the retry's dispatch exists, EXECUTED; the crashed call left nothing.
				if len(recs) != 1 || recs[0].State != journal.StateExecuted {
					t.Fatalf("journal after a crash before consume and one retry: %s", js(recs))
				}
			case indeterminate:
				if len(recs) != 1 || recs[0].State != journal.StateIndeterminate || recs[0].Reason != journal.ReasonRecoveredOnStart {
					t.Fatalf("journal: %s, want one INDETERMINATE record with reason %s", js(recs), journal.ReasonRecoveredOnStart)
				}
				first0 = &recs[0]
			case executed:
				if len(recs) != 1 || recs[0].State != journal.StateExecuted {
					t.Fatalf("journal: %s, want one EXECUTED record", js(recs))
				}
				first0 = &recs[0]
			}
			for _, r := range recs {
				a := w.authorities[r.AuthorityID]
				if a.State != authority.StateConsumed || a.ConsumedBy != r.OperationID {
					t.Errorf("authority %s of operation %s: state %s consumed by %q", r.AuthorityID, r.OperationID, a.State, a.ConsumedBy)
				}
			}
			if tc.point == failpoint.AfterInvoke {
				// The upstream saw exactly the journaled operation (its idempotency key).
				if calls := u.Calls(); calls[0].OperationID != first0.OperationID {
					t.Errorf("the upstream saw operation %q, the journal has %q", calls[0].OperationID, first0.OperationID)
				}
			}

			// 5. The receipt chain still verifies, and the crashed dispatch's receipt was
			// durable before anything was sent.
			lines := g.verifyReceipts(t)
			if first0 != nil {
				got := mentioning(lines, first0.OperationID)
				if len(got) == 0 || !strings.Contains(got[0], string(journal.StateDispatchPending)) {
					t.Errorf("no DISPATCH_PENDING receipt for operation %s before its invocation: %q", first0.OperationID, got)
				}
			}
		})
	}
}

// TestInjectedErrors: the failpoints' "error" action, in the standalone gate. At after-pending
// the invoker behaves as an upstream that cannot be reached — nothing was sent, which the gate
// knows for certain, so the dispatch is FAILED (reason not_sent) and an identical call later is
// a new act that runs. At after-invoke the upstream's answer is lost on the way back: the
// upstream ran, the gate cannot know it, so the dispatch is INDETERMINATE and a retry in a new
// session is refused and not sent (action-evidence-boundary "Classify the Effect Outcome").
func TestInjectedErrors(t *testing.T) {
	t.Run("after-pending", func(t *testing.T) {
		up := startUpstream(t, false, nil)
		g := newStandalone(t, up.URL, 5*time.Second)
		p := g.start(t, failpoint.EnvVar+"="+string(failpoint.AfterPending)+"=error")
		r := mustCall(t, agent(t, p.endpoint()), protectedTool, ticketArgs)
		if !r.IsError || up.Count(protectedTool) != 0 {
			t.Fatalf("got %s, upstream count %d; want an error result and nothing sent", js(r), up.Count(protectedTool))
		}
		p.stop(t)
		p = g.start(t)
		if r := mustCall(t, agent(t, p.endpoint()), protectedTool, ticketArgs); r.IsError || up.Count(protectedTool) != 1 {
			t.Fatalf("the call again, nothing injected: %s, upstream count %d", js(r), up.Count(protectedTool))
		}
		p.stop(t)
		w := g.readWorld(t)
		failed, executed := w.records[journal.StateFailed], w.records[journal.StateExecuted]
		if len(failed) != 1 || failed[0].Reason != sink.ReasonNotSent || len(executed) != 1 || len(w.all()) != 2 {
			t.Fatalf("journal: %s; want one FAILED (not_sent) and one EXECUTED record", js(w.all()))
		}
		g.verifyReceipts(t)
	})
	t.Run("after-invoke", func(t *testing.T) {
		up := startUpstream(t, false, nil)
		g := newStandalone(t, up.URL, 5*time.Second)
		p := g.start(t, failpoint.EnvVar+"="+string(failpoint.AfterInvoke)+"=error")
		r := mustCall(t, agent(t, p.endpoint()), protectedTool, ticketArgs)
		if efCode(r) != string(ef.EFIndeterminate) || up.Count(protectedTool) != 1 {
			t.Fatalf("got %s, upstream count %d; want EF_INDETERMINATE after one invocation", js(r), up.Count(protectedTool))
		}
		if r := mustCall(t, agent(t, p.endpoint()), protectedTool, ticketArgs); efCode(r) != string(ef.EFIndeterminate) || up.Count(protectedTool) != 1 {
			t.Fatalf("retry in a new session: %s, upstream count %d", js(r), up.Count(protectedTool))
		}
		p.stop(t)
		w := g.readWorld(t)
		if recs := w.all(); len(recs) != 1 || recs[0].State != journal.StateIndeterminate || recs[0].Reason != sink.ReasonUpstreamUnknown {
			t.Fatalf("journal: %s; want one INDETERMINATE (%s) record", js(recs), sink.ReasonUpstreamUnknown)
		}
		g.verifyReceipts(t)
	})
}
