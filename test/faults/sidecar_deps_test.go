//go:build unix

package faults

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// closedPort is a loopback address nothing listens on (connection refused).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestAuthorityServiceFaults: the sidecar's authority service is unreachable, slower than the
// sidecar's review timeout, or answers garbage. Every call fails closed — the upstream is not
// called, nothing is consumed or journaled — and the refusal says why (tool-use-binding §16
// MUST 5, §23; internal/sidecar "Any error, timeout, non-200 or undecodable answer of the
// service is a deny").
func TestAuthorityServiceFaults(t *testing.T) {
	// The review timeout leaves the real service time to answer on a loaded machine; the
	// slow fault waits well past it.
	r := newK8sRig(t, rigOptions{reviewTimeout: 4 * time.Second, authDelay: 15 * time.Second})
	refused := "https://" + closedPort(t)
	for i, tc := range []struct {
		name      string
		mode      authMode
		url       string // the sidecar's authority URL; "" is the fault proxy
		tool      string
		code      ef.EFCode
		consulted bool // the service issued an authority that the sidecar then refused
	}{
		{name: "down (connection refused)", url: refused, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "down (connection refused), hot-path tool", url: refused, tool: hotTool, code: ef.EFStoreUnavailable},
		{name: "closes the connection unanswered", mode: authDown, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "slower than the review timeout", mode: authSlow, tool: protectedTool, code: ef.EF060},
		{name: "answers non-JSON", mode: authNotJSON, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "answers JSON that is not an ActReview", mode: authWrongKind, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "answers an authority with a wrong signature", mode: authBadSig, tool: protectedTool, code: ef.EF002, consulted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.authF.mode.Store(int32(tc.mode))
			defer r.authF.mode.Store(int32(authPass))
			endpoint, p := r.startSidecar(t, tc.url)
			defer p.stop(t)
			before, issuedBefore := r.up.Count(""), len(r.authF.issuedIDs())
			consumesBefore := r.authF.count(review.OperationConsume)
			args := fmt.Sprintf(`{"title":"authority fault %d"}`, i)
			start := time.Now()
			res := mustCall(t, agent(t, endpoint), tc.tool, args)
			if !res.IsError || efCode(res) != string(tc.code) {
				t.Fatalf("got %s, want a refusal with %s\n%s", js(res), tc.code, p.Out.String())
			}
			if took := time.Since(start); tc.mode == authSlow && took > r.reviewTimeout+5*time.Second {
				t.Errorf("the refusal took %v with a review timeout of %v", took, r.reviewTimeout)
			}
			if n := r.up.Count(""); n != before {
				t.Fatalf("the upstream was called (%d → %d)", before, n)
			}
			if n := r.authF.count(review.OperationConsume); n != consumesBefore {
				t.Fatalf("a consume was attempted (%d → %d)", consumesBefore, n)
			}
			issued := r.authF.issuedIDs()[issuedBefore:]
			if tc.consulted != (len(issued) == 1) {
				t.Fatalf("authorities issued: %v", issued)
			}
			for _, id := range issued {
				if l := r.lease(t, id); l.State != authority.StateIssued {
					t.Errorf("authority %s is %s, want ISSUED (never consumed)", id, l.State)
				}
			}
		})
	}
	// Every refusal above was fail-closed and left nothing behind: with the service healthy
	// again the same sidecar dispatches.
	endpoint, p := r.startSidecar(t, "")
	if res := mustCall(t, agent(t, endpoint), protectedTool, `{"title":"after the faults"}`); res.IsError {
		t.Fatalf("with the service healthy: %s\n%s", js(res), p.Out.String())
	}
	p.stop(t)
	if recs := r.readJournal(t); len(recs) != 1 {
		t.Fatalf("journal after the faults and one good call: %s", js(recs))
	}
}

// TestAPIServerFaults: the authority service's API server is down, or answers 500 to
// everything or to the Leases, or 409 to every Lease update. The service cannot decide, issue
// or consume, so the sidecar is refused and does not call the upstream, and the code says why
// (internal/review/service "Fail closed"): unreachable is EF_060 (reason Timeout), another API
// failure EF_STORE_UNAVAILABLE. A 409 on the consume whose re-read shows the Lease not consumed
// is no one else's win but a failed compare-and-swap: the consume did not happen, it is denied
// EF_STORE_UNAVAILABLE (internal/authority/leasestore "lost"), and the Lease stays ISSUED.
func TestAPIServerFaults(t *testing.T) {
	r := newK8sRig(t, rigOptions{serviceTO: 2 * time.Second})
	endpoint, p := r.startSidecar(t, "")
	defer p.stop(t)
	for i, tc := range []struct {
		name    string
		mode    apiMode
		tool    string
		code    ef.EFCode
		issued  bool // the Lease was created before the fault bit
		restore bool
	}{
		{name: "down", mode: apiDown, tool: protectedTool, code: ef.EF060},
		{name: "down, hot-path tool", mode: apiDown, tool: hotTool, code: ef.EF060},
		{name: "500 storm", mode: api500, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "500 storm on Leases", mode: apiLease500, tool: protectedTool, code: ef.EFStoreUnavailable},
		{name: "409 storm on Lease updates", mode: apiConflicts, tool: protectedTool, code: ef.EFStoreUnavailable, issued: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, issuedBefore, faultsBefore := r.up.Count(""), len(r.authF.issuedIDs()), r.api.faults.Load()
			r.api.mode.Store(int32(tc.mode))
			args := fmt.Sprintf(`{"title":"api fault %d"}`, i)
			res := mustCall(t, agent(t, endpoint), tc.tool, args)
			r.api.mode.Store(int32(apiPass))
			if !res.IsError || efCode(res) != string(tc.code) {
				t.Fatalf("got %s, want a refusal with %s\n%s", js(res), tc.code, r.auth.Out.String())
			}
			if r.api.faults.Load() == faultsBefore {
				t.Fatal("no fault was injected: the case tests nothing")
			}
			if n := r.up.Count(""); n != before {
				t.Fatalf("the upstream was called (%d → %d)", before, n)
			}
			issued := r.authF.issuedIDs()[issuedBefore:]
			if tc.issued != (len(issued) == 1) {
				t.Fatalf("authorities issued: %v", issued)
			}
			for _, id := range issued {
				if l := r.lease(t, id); l.State != authority.StateIssued {
					t.Errorf("authority %s is %s, want ISSUED", id, l.State)
				}
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
// reaches the upstream (action-evidence-boundary "prohibit a blind replay"). The service issues
// a fresh authority for the retry, so the sidecar's own check (internal/sidecar unsettled.go) is
// what refuses it.
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
	if n, c := r.up.Count(protectedTool), r.authF.count(review.OperationConsume); n != 1 || c != 1 {
		t.Fatalf("upstream ran %d times and %d authorities were consumed; want 1 and 1", n, c)
	}
	if recs := r.readJournal(t); len(recs) != 1 || recs[0].State != "INDETERMINATE" {
		t.Fatalf("journal: %s", js(recs))
	}
}
