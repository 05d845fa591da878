//go:build unix

package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/test/testutil"
)

// TestAuthorityServiceFaults: the sidecar's authority service is unreachable, slower than the
// sidecar's review timeout, or answers garbage. A sidecar that never received its pod's policy
// refuses every call (EF_POLICY_UNAVAILABLE). One that holds it keeps serving the hot path,
// which needs no control plane, and every protected call fails closed — the upstream is not
// called, nothing is journaled — with a refusal that says why (tool-use-binding §16 MUST 5,
// §23; internal/sidecar "Fail closed"). A Permit the service answered with an authority the
// sidecar refuses, or answered after the sidecar gave up, has spent its authority (its Act
// records it consumed): nothing ran for it, and no journal holds it.
func TestAuthorityServiceFaults(t *testing.T) {
	// The review timeout leaves the real service time to answer on a loaded machine; the
	// slow fault waits well past it.
	r := newK8sRig(t, rigOptions{reviewTimeout: 4 * time.Second, authDelay: 8 * time.Second})

	// Never reached: no policy, every call refused.
	endpoint, p := r.startSidecar(t, "https://"+testutil.FreeAddr(t))
	for _, tool := range []string{protectedTool, hotTool} {
		res := mustCall(t, agent(t, endpoint), tool, `{"title":"no policy"}`)
		if !res.IsError || efCode(res) != string(ef.EFPolicyUnavailable) || r.up.Count("") != 0 {
			t.Fatalf("%s without a policy: %s (upstream %d)\n%s", tool, js(res), r.up.Count(""), p.Out.String())
		}
	}
	p.stop(t)

	// The policy held, then the service fails.
	endpoint, p = r.startSidecar(t, "")
	defer p.stop(t)
	if res := mustCall(t, agent(t, endpoint), hotTool, `{"title":"warm"}`); res.IsError {
		t.Fatalf("hot path with the service healthy: %s\n%s", js(res), p.Out.String())
	}
	for i, tc := range []struct {
		name    string
		mode    authMode
		tool    string
		code    ef.EFCode // "" : the call runs
		spent   bool      // the service spent a Lease for the refused call
		waitFor time.Duration
	}{
		{name: "closes the connection unanswered, hot-path tool", mode: authDown, tool: hotTool},
		{name: "closes the connection unanswered", mode: authDown, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "answers non-JSON", mode: authNotJSON, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "answers JSON that is not an ActReview", mode: authWrongKind, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "answers an authority with a wrong signature", mode: authBadSig, tool: protectedTool, code: ef.EF002, spent: true},
		// The sidecar gives up first; the service never sees the Permit.
		{name: "slower than the review timeout", mode: authSlow, tool: protectedTool, code: ef.EF060, waitFor: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.authF.mode.Store(int32(tc.mode))
			defer r.authF.mode.Store(int32(authPass))
			before, issuedBefore := r.up.Count(""), len(r.authF.issuedIDs())
			args := fmt.Sprintf(`{"title":"authority fault %d"}`, i)
			start := time.Now()
			res := mustCall(t, agent(t, endpoint), tc.tool, args)
			if tc.code == "" {
				if res.IsError || r.up.Count("") != before+1 {
					t.Fatalf("the hot path with the service failing: %s (upstream %d → %d)", js(res), before, r.up.Count(""))
				}
				return
			}
			if !res.IsError || efCode(res) != string(tc.code) {
				t.Fatalf("got %s, want a refusal with %s\n%s", js(res), tc.code, p.Out.String())
			}
			if took := time.Since(start); tc.mode == authSlow && took > r.reviewTimeout+5*time.Second {
				t.Errorf("the refusal took %v with a review timeout of %v", took, r.reviewTimeout)
			}
			if n := r.up.Count(""); n != before {
				t.Fatalf("the upstream was called (%d → %d)", before, n)
			}
			// A late answer would spend a Lease: wait long enough to see one.
			deadline := time.Now().Add(tc.waitFor)
			for len(r.authF.issuedIDs()) == issuedBefore && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			issued := r.authF.issuedIDs()[issuedBefore:]
			if tc.spent != (len(issued) == 1) {
				t.Fatalf("authorities issued: %v", issued)
			}
			for _, id := range issued {
				if l := r.lease(t, id); l.State != authority.StateConsumed {
					t.Errorf("authority %s is %s, want CONSUMED by the Permit that issued it", id, l.State)
				}
			}
			if n := r.up.Count(""); n != before {
				t.Fatalf("the upstream was called (%d → %d)", before, n)
			}
		})
	}
	// Every refusal above was fail-closed and left nothing behind: with the service healthy
	// again the same sidecar dispatches, and its journal holds that dispatch only.
	if res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"after the faults"}`); res.IsError {
		t.Fatalf("with the service healthy: %s\n%s", js(res), p.Out.String())
	}
	p.stop(t)
	if recs := r.readJournal(t); len(recs) != 1 {
		t.Fatalf("journal after the faults and one good call: %s", js(recs))
	}
}

// TestAPIServerFaults: the authority service's API server is down, or answers 500 to
// everything or to the Acts, or 409 to every Lease update. The hot path never reaches the API
// server, so it continues. A protected call needs the service to create the Act that records
// its consumed authority: it is refused and does not call the upstream, and the code says why
// (internal/review/service "Fail closed"): unreachable is EF_060 (reason Timeout), another API
// failure EF_STORE_UNAVAILABLE. A Permit's single use rests on the Act's create, not an
// update, and stores no Lease, so a 409 storm on Lease updates does not touch it.
func TestAPIServerFaults(t *testing.T) {
	r := newK8sRig(t, rigOptions{serviceTO: 2 * time.Second})
	endpoint, p := r.startSidecar(t, "")
	defer p.stop(t)
	for i, tc := range []struct {
		name string
		mode apiMode
		tool string
		code ef.EFCode // "": the call runs (it needs no request the fault touches)
	}{
		{name: "down", mode: apiDown, tool: protectedTool, code: ef.EF060},
		{name: "down, hot-path tool", mode: apiDown, tool: hotTool},
		{name: "500 storm", mode: api500, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "500 storm on Acts", mode: apiAct500, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "409 storm on Lease updates", mode: apiConflicts, tool: protectedTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, issuedBefore, faultsBefore := r.up.Count(""), len(r.authF.issuedIDs()), r.api.faults.Load()
			r.api.mode.Store(int32(tc.mode))
			args := fmt.Sprintf(`{"title":"api fault %d"}`, i)
			res := mustCall(t, agent(t, endpoint), tc.tool, args)
			r.api.mode.Store(int32(apiPass))
			if tc.code == "" {
				if res.IsError || r.up.Count("") != before+1 {
					t.Fatalf("got %s (upstream %d → %d), want the call run", js(res), before, r.up.Count(""))
				}
				return
			}
			if !res.IsError || efCode(res) != string(tc.code) {
				t.Fatalf("got %s, want a refusal with %s\n%s", js(res), tc.code, r.auth.Out.String())
			}
			if r.api.faults.Load() == faultsBefore {
				t.Fatal("no fault was injected: the case tests nothing")
			}
			if n := r.up.Count(""); n != before {
				t.Fatalf("the upstream was called (%d → %d)", before, n)
			}
			if issued := r.authF.issuedIDs()[issuedBefore:]; len(issued) != 0 {
				t.Fatalf("authorities issued: %v", issued)
			}
			// With the API server healthy again the same call, in a new session, runs once.
			if res := mustCall(t, agent(t, endpoint), tc.tool, args); res.IsError || r.up.Count("") != before+1 {
				t.Fatalf("after the fault: %s, upstream %d → %d", js(res), before, r.up.Count(""))
			}
		})
	}
}

// TestSidecarUpstreamHang: through the sidecar, an upstream that hangs past the call timeout
// leaves the dispatch INDETERMINATE (EF_INDETERMINATE), and a retry of the same call — in a new
// session, and after the sidecar restarts — is refused before anything is consumed and never
// reaches the upstream (action-evidence-boundary "prohibit a blind replay"). The sink's retry
// index (internal/sink, loaded from the journal at a start) refuses it before the service is
// asked.
func TestSidecarUpstreamHang(t *testing.T) {
	r := newK8sRig(t, rigOptions{hold: true, callTimeout: time.Second})
	endpoint, p := r.startSidecar(t, "")
	res := mustCall(t, agent(t, endpoint), protectedTool, ticketArgs)
	if efCode(res) != string(ef.EFIndeterminate) || metaState(res) != "INDETERMINATE" {
		t.Fatalf("a hanging upstream: %s", js(res))
	}
	if retry := mustCall(t, agent(t, endpoint), protectedTool, ticketArgs); efCode(retry) != string(ef.EFIndeterminate) {
		t.Fatalf("retry in a new session: %s", js(retry))
	}
	p.stop(t)
	endpoint, p = r.startSidecar(t, "")
	if retry := mustCall(t, agent(t, endpoint), protectedTool, ticketArgs); efCode(retry) != string(ef.EFIndeterminate) {
		t.Fatalf("retry after a restart: %s", js(retry))
	}
	p.stop(t)
	if n, c := r.up.Count(protectedTool), r.authF.count(review.OperationPermit); n != 1 || c != 1 {
		t.Fatalf("upstream ran %d times and %d authorities were consumed; want 1 and 1", n, c)
	}
	if recs := r.readJournal(t); len(recs) != 1 || recs[0].State != "INDETERMINATE" {
		t.Fatalf("journal: %s", js(recs))
	}
}
