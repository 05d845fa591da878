//go:build unix

package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/test/testutil"
)

// TestSidecarMatrix is the failpoint matrix for the Kubernetes path (doc.go, "The matrix"): a
// real `actgate sidecar` built with -tags failpoints, in front of a real `actgate-controlplane authority`
// on envtest, is killed at each boundary during a call of a protected tool, restarted over the
// same journal, and the agent retries in a new session. Here consume and DISPATCH_PENDING are
// two writes in two places — the Permit at the service, which creates the Act recording the
// authority consumed, then the sidecar's own journal — so after-consume exists. Asserted each
// time: the upstream's own count, the journal's state, the authority (none, or CONSUMED by the
// first call's operation), the
// Act (the outcome the outbox reports after the restart), and that the retry is never a second
// invocation of an action that may have run.
func TestSidecarMatrix(t *testing.T) {
	for _, tc := range []struct {
		point          failpoint.Point
		ranMin, ranMax int
		// consumed: the first call's authority is spent.
		consumed bool
		// unsettled: the first call was journaled, so recovery makes it INDETERMINATE and the
		// retry is refused; otherwise the first call left no record and the retry is the
		// action's first dispatch.
		unsettled bool
	}{
		{point: failpoint.BeforeConsume}, // the Permit was never sent: nothing issued
		{point: failpoint.AfterConsume, consumed: true},
		{point: failpoint.AfterPending, consumed: true, unsettled: true},
		{point: failpoint.DuringInvoke, ranMax: 1, consumed: true, unsettled: true},
		{point: failpoint.AfterInvoke, ranMin: 1, ranMax: 1, consumed: true, unsettled: true},
	} {
		t.Run(string(tc.point), func(t *testing.T) {
			r := newK8sRig(t, rigOptions{})

			// 1. The call, with the failpoint armed in the sidecar.
			endpoint, p1 := r.startSidecar(t, "", failpoint.EnvVar+"="+string(tc.point))
			if res, err := callTool(agent(t, endpoint), protectedTool, ticketArgs, 30*time.Second); err == nil {
				t.Fatalf("the call returned although the sidecar was killed: %s\n%s", js(res), p1.Out.String())
			}
			p1.WaitKilled(t)
			if tc.point == failpoint.DuringInvoke {
				time.Sleep(500 * time.Millisecond) // let the upstream read what was written, or see the close
			}
			ran := r.up.Count(protectedTool)
			if ran < tc.ranMin || ran > tc.ranMax {
				t.Fatalf("upstream ran %d times before the crash, want %d..%d", ran, tc.ranMin, tc.ranMax)
			}
			t.Logf("upstream invocations at the crash: %d", ran)
			issued := r.authF.issuedIDs()
			if want := map[bool]int{true: 1, false: 0}[tc.consumed]; len(issued) != want {
				t.Fatalf("authorities issued for the first call: %v, want %d", issued, want)
			}

			// 2. Restart over the same journal; 3. the agent retries in a new session.
			endpoint, p2 := r.startSidecar(t, "")
			retry := mustCall(t, agent(t, endpoint), protectedTool, ticketArgs)
			recovered := strings.Contains(p2.Out.String(), "recovered in-flight dispatches as INDETERMINATE")
			if recovered != tc.unsettled {
				t.Errorf("recovery logged %v, want %v:\n%s", recovered, tc.unsettled, p2.Out.String())
			}
			consumes := r.authF.count(review.OperationPermit)
			if tc.unsettled {
				if efCode(retry) != string(ef.EFIndeterminate) || !retry.IsError {
					t.Fatalf("retry of an unsettled action: %s", js(retry))
				}
				if n := r.up.Count(protectedTool); n != ran || consumes != 1 {
					t.Fatalf("the retry reached the upstream (count %d, was %d) or consumed (%d consumes)", n, ran, consumes)
				}
			} else {
				// Nothing was sent for the first call: the retry is the action's first dispatch.
				if retry.IsError || r.up.Count(protectedTool) != 1 {
					t.Fatalf("retry: %s, upstream count %d", js(retry), r.up.Count(protectedTool))
				}
			}
			if tc.unsettled {
				// The restarted sidecar's outbox reports what recovery made of the first call.
				l := r.lease(t, issued[0])
				testutil.Eventually(t, 20*time.Second, "the first call's Act to record the journal's INDETERMINATE", func() error {
					var a v1alpha1.Act
					if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: l.Authority.Binding.ActID}, &a); err != nil {
						return err
					}
					if a.Status.State != v1alpha1.ActStateIndeterminate {
						return fmt.Errorf("the Act is %q", a.Status.State)
					}
					return nil
				})
			}
			p2.stop(t)

			// 4. The state of the world: the journal, the Leases, what the upstream saw, and the
			// sidecar's receipt log, which still verifies after the crash and, where the first
			// call was journaled, holds its allow: durable before anything was sent.
			recs := r.readJournal(t)
			lines := r.verifyReceipts(t)
			if !tc.consumed {
				// The retry's own dispatch, EXECUTED, and the only authority ever issued.
				if len(recs) != 1 || recs[0].State != journal.StateExecuted || len(r.authF.issuedIDs()) != 1 {
					t.Fatalf("journal %s, authorities %v: want the retry's one EXECUTED dispatch", js(recs), r.authF.issuedIDs())
				}
				return
			}
			first := issued[0]
			lease := r.lease(t, first)
			if tc.unsettled {
				got := mentioning(lines, lease.ConsumedBy)
				if len(got) == 0 || !strings.Contains(got[0], `"decision":"allow"`) {
					t.Errorf("no durable allow receipt for operation %s before its invocation: %q", lease.ConsumedBy, got)
				}
			}
			if lease.State != authority.StateConsumed || lease.ConsumedBy == "" {
				t.Errorf("the first call's authority is %s (consumed by %q), want CONSUMED", lease.State, lease.ConsumedBy)
			}
			// The first call's Act: recorded by the Permit; once the restarted sidecar's outbox
			// reported the journal's INDETERMINATE, it says so, with the spent operation. An act
			// spent but never journaled (after-consume) has no outcome to report: its permit
			// record says it was spent, and nothing ran.
			var a v1alpha1.Act
			if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: lease.Authority.Binding.ActID}, &a); err != nil {
				t.Fatalf("the first call's Act: %v", err)
			}
			if tc.unsettled && (a.Status.State != v1alpha1.ActStateIndeterminate || a.Status.OperationID != lease.ConsumedBy) {
				t.Errorf("the first call's Act is %s (operation %q), want INDETERMINATE by %q", a.Status.State, a.Status.OperationID, lease.ConsumedBy)
			}
			if !tc.unsettled && a.Status.State != "" {
				t.Errorf("the first call's Act is %s although nothing was journaled for it", a.Status.State)
			}
			if tc.unsettled {
				if len(recs) != 1 || recs[0].State != journal.StateIndeterminate || recs[0].Reason != journal.ReasonRecoveredOnStart ||
					recs[0].AuthorityID != first || recs[0].OperationID != lease.ConsumedBy {
					t.Fatalf("journal %s, want one INDETERMINATE (recovered_on_start) record of authority %s, operation %s",
						js(recs), first, lease.ConsumedBy)
				}
				if calls := r.up.Calls(); len(calls) == 1 && calls[0].OperationID != recs[0].OperationID {
					t.Errorf("the upstream saw operation %q, the journal has %q", calls[0].OperationID, recs[0].OperationID)
				}
				return
			}
			// The retry's own dispatch, EXECUTED, under a second authority.
			if len(recs) != 1 || recs[0].State != journal.StateExecuted || recs[0].AuthorityID == first {
				t.Fatalf("journal %s, want one EXECUTED record of the retry's own authority", js(recs))
			}
			if l := r.lease(t, recs[0].AuthorityID); l.State != authority.StateConsumed || l.ConsumedBy != recs[0].OperationID {
				t.Errorf("the retry's authority is %s, consumed by %q", l.State, l.ConsumedBy)
			}
			if tc.point == failpoint.AfterConsume {
				// The weaker state of a split commit: the first authority is spent by an
				// operation the journal never recorded and the upstream never saw. Nothing ran
				// for it; its Act stays CONSUMED with no outcome, for operators to see.
				for _, c := range r.up.Calls() {
					if c.OperationID == lease.ConsumedBy {
						t.Errorf("the upstream saw the spent, unjournaled operation %s", c.OperationID)
					}
				}
			}
		})
	}
}
