package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// TestRefusalsNeverInvoke: every way the service can say no, fail, or hand over an authority
// that is not for this call ends in a refusal with its EF code, and the upstream's own counter
// stays at zero (docs/architecture.md "Fail closed"; tool-use-binding §16 MUST 1–5).
func TestRefusalsNeverInvoke(t *testing.T) {
	f := newFixture(t)
	f.stub.delay = 1500 * time.Millisecond // past the gate's 1 s review timeout
	cs := f.agent()
	for _, tc := range []struct {
		tool        string
		code        ef.EFCode
		wantConsume bool // the sidecar got as far as the Consume (and must still not invoke)
	}{
		{"email_send", ef.EFPolicyDenied, false},
		{"wire", ef.EFEscalationRequired, false},
		{"slow", ef.EF060, false},
		{"garbage", ef.EFStoreUnavailable, false},
		{"lying", ef.EFPolicyDenied, false}, // HTTP 503 with allowed:true is not an allow
		{"wrong_uid", ef.EFStoreUnavailable, false},
		{"unauth", ef.EFPolicyDenied, false},
		// The service spent an authority that is not for this call: refused at the sink.
		{"tamper", ef.EFScopeMismatch, true},
		{"wrong_sink", ef.EF040, true},
		{"wrong_dest", ef.EFDestinationMismatch, true},
		{"wrong_ns", ef.EFScopeMismatch, true},
		{"rogue", ef.EF002, true},
		{"expired", ef.EF002, true},
		{"consume_refused", ef.EF005, true},
		{"consume_unconfirmed", ef.EFStoreUnavailable, true},
		{"consume_wrong_op", ef.EFStoreUnavailable, true},
		{"consume_slow", ef.EF060, true},
		{"consume_garbage", ef.EFStoreUnavailable, true},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			before := f.stub.consumeCount()
			res := call(t, cs, tc.tool, `{"amount":5}`)
			if !res.IsError || efCode(res) != string(tc.code) {
				t.Fatalf("got isError=%v code %q, want a refusal with %s: %s", res.IsError, efCode(res), tc.code, text(res))
			}
			if n := f.up.Count(tc.tool); n != 0 {
				t.Fatalf("upstream ran %s %d times on a refusal", tc.tool, n)
			}
			if consumed := f.stub.consumeCount() > before; consumed != tc.wantConsume {
				t.Fatalf("consume attempted = %v, want %v", consumed, tc.wantConsume)
			}
			recs, err := f.store.InState(context.Background(), journal.StateDispatchPending)
			if err != nil || len(recs) != 0 {
				t.Fatalf("journal holds %d DISPATCH_PENDING records after a refusal (%v)", len(recs), err)
			}
		})
	}
}

// TestHotPath: an allow without authority invokes once, consumes nothing, journals nothing.
func TestHotPath(t *testing.T) {
	f := newFixture(t)
	cs := f.agent()
	res := call(t, cs, "get_balance", `{"account":"A-1"}`)
	if res.IsError || !strings.Contains(text(res), `done: {"account":"A-1"}`) {
		t.Fatalf("hot path result: %s", text(res))
	}
	for range 20 {
		call(t, cs, "get_balance", `{"account":"A-2"}`)
	}
	// The hot path needs no control plane: not one request reached the authority service.
	if f.up.Count("get_balance") != 21 || f.stub.requests() != 0 {
		t.Fatalf("upstream %d calls, %d requests to the service; want 21 and 0", f.up.Count("get_balance"), f.stub.requests())
	}
	if got := f.up.Authorizations(); len(got) == 0 || got[len(got)-1] != "Bearer "+upstreamTk {
		t.Fatalf("upstream saw authorization %q, want the sidecar's credential", got)
	}
	for _, st := range []journal.State{journal.StateDispatchPending, journal.StateExecuted} {
		if recs, _ := f.store.InState(context.Background(), st); len(recs) != 0 {
			t.Fatalf("hot path journaled %d %s records", len(recs), st)
		}
	}
}

// TestAuditMode: audit lets the call through and is never reported as enforcement.
func TestAuditMode(t *testing.T) {
	f := newFixture(t)
	spec := testPolicy(t, f.up.URL)
	spec.Mode = "Audit"
	o := f.options()
	o.Policy = compiled(t, spec, 1)
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	res, err := g.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments",
		Destination: f.up.URL, Tool: "email_send", Args: json.RawMessage(`{}`)}, func(context.Context, string) (sink.InvokeResult, error) {
		return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
	})
	if err != nil || !res.Allowed || res.AuditCode != ef.EFPolicyDenied {
		t.Fatalf("audit: %+v, %v", res, err)
	}
}

// TestPermitDispatchesOnce: allow under authority — verified, consumed for the operation the
// upstream receives as its idempotency key, journaled, invoked once, recorded EXECUTED.
func TestPermitDispatchesOnce(t *testing.T) {
	f := newFixture(t)
	cs := f.agent()
	res := call(t, cs, "send_payment", `{"amount":250,"to":"ACME"}`)
	if res.IsError {
		t.Fatalf("permit refused: %s", text(res))
	}
	if n := f.up.Count("send_payment"); n != 1 {
		t.Fatalf("upstream ran %d times, want 1", n)
	}
	calls := f.up.Calls()
	op := calls[len(calls)-1].OperationID
	// The protected path is one request to the service: a Permit, no Review, no Consume.
	if f.stub.consumeCount() != 1 || f.stub.count(review.OperationPermit) != 1 || f.stub.count(review.OperationReview) != 0 ||
		f.stub.count(review.OperationConsume) != 0 {
		t.Fatalf("%d consumes, %d permits, %d reviews, %d consume reviews; want 1, 1, 0, 0", f.stub.consumeCount(),
			f.stub.count(review.OperationPermit), f.stub.count(review.OperationReview), f.stub.count(review.OperationConsume))
	}
	c := f.stub.consumes[0]
	if c.OperationID != op || op == "" {
		t.Fatalf("consumed for operation %q, upstream got %q", c.OperationID, op)
	}
	if c.Binding.Destination != f.up.URL || c.Binding.SinkID != testSink || c.Binding.PolicyEpoch != "1" {
		t.Fatalf("consume binding %+v", c.Binding)
	}
	rec, err := f.store.Record(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != journal.StateExecuted || rec.AuthorityID != c.AuthorityID || rec.ActionDigest != c.Binding.ActionDigest {
		t.Fatalf("journal record %+v", rec)
	}
	if len(rec.History) < 2 || rec.History[0].To != journal.StateDispatchPending {
		t.Fatalf("record did not start DISPATCH_PENDING: %+v", rec.History)
	}
	// The same call again in the same session, while the consumed authority is unexpired, is
	// a retry of that act (retries.go; docs/architecture.md "Retries"): the recorded result, no new
	// review or consume, and the upstream does not run again.
	permits := f.stub.count(review.OperationPermit)
	again := call(t, cs, "send_payment", `{"amount":250,"to":"ACME"}`)
	if again.IsError || text(again) != text(res) {
		t.Fatalf("retry: %s, want the recorded %s", text(again), text(res))
	}
	if n := f.up.Count("send_payment"); n != 1 || f.stub.consumeCount() != 1 || f.stub.count(review.OperationPermit) != permits {
		t.Fatalf("retry ran again: upstream %d, consumes %d, permits %d → %d", n, f.stub.consumeCount(), permits, f.stub.count(review.OperationPermit))
	}
	// In another session the same arguments are a new act: a new review, a new authority; never
	// a replay of the spent one.
	call(t, f.agent(), "send_payment", `{"amount":250,"to":"ACME"}`)
	if f.stub.consumeCount() != 2 || f.stub.consumes[1].AuthorityID == c.AuthorityID {
		t.Fatalf("second call reused authority %s", c.AuthorityID)
	}
	if n := f.up.Count("send_payment"); n != 2 {
		t.Fatalf("upstream ran %d times, want 2", n)
	}
}

// TestOutcomeReported: after the journal records the outcome, the sidecar reports it (operation
// Report) for the consumed authority and operation, with the journal's evidence digest and no
// result; the hot path reports nothing. A report the service refuses or cannot take changes
// nothing of what the agent gets, and the journal keeps the outcome.
func TestOutcomeReported(t *testing.T) {
	ctx := context.Background()
	handle := func(f *fixture, tool, args string, inv sink.Invoker) sink.Result {
		t.Helper()
		res, _ := f.gate.Handle(ctx, sink.Call{Session: "s", Agent: testAgent, Server: "payments",
			Destination: f.up.URL, Tool: tool, Args: json.RawMessage(args)}, inv)
		return res
	}
	check := func(t *testing.T, f *fixture, op string, want v1alpha1.ActState) {
		t.Helper()
		reps := f.waitReports(1)
		for _, r := range reps {
			if r.OperationID != op {
				t.Fatalf("report of another operation: %+v", reps)
			}
		}
		rec, err := f.store.Record(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		r := reps[len(reps)-1]
		if r.State != want || r.OperationID != op || r.AuthorityID != rec.AuthorityID || r.AuthorityID != f.stub.consumes[0].AuthorityID ||
			r.EvidenceDigest != rec.EvidenceDigest || string(rec.State) != string(want) {
			t.Fatalf("report %+v, journal %+v", r, rec)
		}
	}
	t.Run("executed", func(t *testing.T) {
		f := newFixture(t)
		res := call(t, f.agent(), "send_payment", `{"amount":250,"to":"ACME"}`)
		if res.IsError {
			t.Fatalf("permit refused: %s", text(res))
		}
		calls := f.up.Calls()
		check(t, f, calls[len(calls)-1].OperationID, v1alpha1.ActStateExecuted)
		if f.stub.reported()[0].EvidenceDigest == "" {
			t.Fatal("EXECUTED reported without evidence")
		}
	})
	t.Run("failed", func(t *testing.T) {
		f := newFixture(t)
		call(t, f.agent(), "refuse", `{}`)
		calls := f.up.Calls()
		check(t, f, calls[len(calls)-1].OperationID, v1alpha1.ActStateFailed)
	})
	t.Run("indeterminate", func(t *testing.T) {
		f := newFixture(t)
		res := handle(f, "send_payment", `{"amount":3}`, func(context.Context, string) (sink.InvokeResult, error) {
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, errors.New("connection reset")
		})
		check(t, f, res.OperationID, v1alpha1.ActStateIndeterminate)
	})
	t.Run("hot path reports nothing", func(t *testing.T) {
		f := newFixture(t)
		call(t, f.agent(), "get_balance", `{}`)
		if f.up.Count("get_balance") != 1 || len(f.stub.reported()) != 0 {
			t.Fatalf("hot path: count %d, reports %+v", f.up.Count("get_balance"), f.stub.reported())
		}
	})
	t.Run("a failed report changes nothing and is sent again", func(t *testing.T) {
		f := newFixture(t)
		f.stub.mu.Lock()
		f.stub.reportFails = true
		f.stub.mu.Unlock()
		res := handle(f, "send_payment", `{"amount":4}`, func(context.Context, string) (sink.InvokeResult, error) {
			return sink.InvokeResult{Outcome: sink.OutcomeExecuted, Result: json.RawMessage(`{"paid":true}`)}, nil
		})
		if !res.Allowed || !res.Invoked || res.State != journal.StateExecuted || res.Code != "" || string(res.Upstream) != `{"paid":true}` {
			t.Fatalf("result with a failed report: %+v", res)
		}
		f.waitReports(2) // refused, and tried again
		if f.gate.Outbox().Pending() != 1 {
			t.Fatalf("outbox holds %d outcomes, want the unacknowledged one", f.gate.Outbox().Pending())
		}
		f.stub.mu.Lock()
		f.stub.reportFails = false
		f.stub.mu.Unlock()
		waitFor(t, func() bool { return f.gate.Outbox().Pending() == 0 })
		check(t, f, res.OperationID, v1alpha1.ActStateExecuted)
	})
}

// TestUpstreamFailureRecorded: the upstream's authoritative error result is FAILED.
func TestUpstreamFailureRecorded(t *testing.T) {
	f := newFixture(t)
	res := call(t, f.agent(), "refuse", `{}`)
	if !res.IsError || f.up.Count("refuse") != 1 {
		t.Fatalf("refuse: isError=%v count=%d", res.IsError, f.up.Count("refuse"))
	}
	recs, err := f.store.InState(context.Background(), journal.StateFailed)
	if err != nil || len(recs) != 1 || recs[0].Tool != "refuse" {
		t.Fatalf("FAILED records: %+v %v", recs, err)
	}
}

// TestEscalationNamesTheMoment: an escalation returns the EF code, the BindingMoment name and
// the gate-authored envelope; nothing runs.
func TestEscalationNamesTheMoment(t *testing.T) {
	f := newFixture(t)
	res := call(t, f.agent(), "wire", `{"amount":9000}`)
	if efCode(res) != string(ef.EFEscalationRequired) || res.Meta[mcpproxy.MetaMomentID] != moment {
		t.Fatalf("escalation: code %q moment %v", efCode(res), res.Meta[mcpproxy.MetaMomentID])
	}
	if res.Meta[mcpproxy.MetaEnvelopeDigest] != f.stub.env.Digest() {
		t.Fatalf("envelope digest %v, want %s", res.Meta[mcpproxy.MetaEnvelopeDigest], f.stub.env.Digest())
	}
	if !strings.Contains(text(res), moment) || !strings.Contains(text(res), "kubectl actgate resolve") {
		t.Fatalf("refusal text does not say how to resolve: %s", text(res))
	}
	if f.up.Count("wire") != 0 {
		t.Fatal("escalated call ran")
	}
}

// TestGrantDeliversResolution: a call granted by a binding moment runs once and the agent is
// told which resolution authorised it.
func TestGrantDeliversResolution(t *testing.T) {
	f := newFixture(t)
	res, err := f.gate.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments",
		Destination: f.up.URL, Tool: "granted", Args: json.RawMessage(`{"amount":1}`)}, func(context.Context, string) (sink.InvokeResult, error) {
		return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
	})
	if err != nil || !res.Allowed || res.State != journal.StateExecuted {
		t.Fatalf("grant: %+v %v", res, err)
	}
	if len(res.Resolutions) != 1 || !res.Resolutions[0].Authorized || res.Resolutions[0].MomentID != moment || *res.Resolutions[0].OptionIdx != 0 {
		t.Fatalf("resolutions %+v", res.Resolutions)
	}
}

// TestCallChecks: calls the sidecar refuses before asking anyone.
func TestCallChecks(t *testing.T) {
	f := newFixture(t)
	never := func(context.Context, string) (sink.InvokeResult, error) {
		t.Fatal("invoked")
		return sink.InvokeResult{}, nil
	}
	for _, tc := range []struct {
		name string
		c    sink.Call
		code ef.EFCode
	}{
		{"no session", sink.Call{Agent: testAgent, Server: "payments", Destination: f.up.URL, Tool: "get_balance"}, ef.EFActInvalid},
		{"unknown server", sink.Call{Session: "s", Agent: testAgent, Server: "mail", Destination: f.up.URL, Tool: "get_balance"}, ef.EFUnknownTool},
		{"swapped destination", sink.Call{Session: "s", Agent: testAgent, Server: "payments", Destination: "https://evil.example/mcp", Tool: "get_balance"}, ef.EFDestinationMismatch},
		{"bad tool name", sink.Call{Session: "s", Agent: testAgent, Server: "payments", Destination: f.up.URL, Tool: "no spaces allowed\n"}, ef.EFActInvalid},
		{"arguments not an object", sink.Call{Session: "s", Agent: testAgent, Server: "payments", Destination: f.up.URL, Tool: "get_balance", Args: json.RawMessage(`[1]`)}, ef.EFActInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A refusal is recorded as an Act off the call path (operation Refusal, queued), so
			// only the requests that ask for a decision are counted.
			before := f.stub.decisions()
			res, err := f.gate.Handle(context.Background(), tc.c, never)
			if err != nil || res.Allowed || res.Code != tc.code {
				t.Fatalf("got %+v %v, want %s", res, err, tc.code)
			}
			if f.stub.decisions() != before {
				t.Fatal("the service was asked about a call the sidecar refuses itself")
			}
		})
	}
}

// TestJournalUnavailableRefuses: with the journal closed, an allowed-under-authority call is
// consumed but refused and never invoked (no dispatch without DISPATCH_PENDING).
func TestJournalUnavailableRefuses(t *testing.T) {
	f := newFixture(t)
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	res := call(t, f.agent(), "send_payment", `{"amount":1}`)
	if efCode(res) != string(ef.EFStoreUnavailable) || f.up.Count("send_payment") != 0 {
		t.Fatalf("code %q, upstream %d", efCode(res), f.up.Count("send_payment"))
	}
}

// TestTokenReadEachCall: the projected token is read anew for every review (the kubelet rotates
// it), and an unreadable token refuses.
func TestTokenReadEachCall(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "token", []byte("first\n"))
	o := f.options()
	o.Review, o.ReviewTimeout = f.stub.client(review.TokenFile(path)), 0
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	inv := func(context.Context, string) (sink.InvokeResult, error) {
		return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
	}
	defer g.Close()
	c := func(n int) sink.Call {
		return sink.Call{Session: "s", Agent: testAgent, Server: "payments", Destination: f.up.URL, Tool: "send_payment",
			Args: json.RawMessage(`{"amount":` + strconv.Itoa(n) + `}`)}
	}
	if res, _ := g.Handle(context.Background(), c(1), inv); !res.Allowed || f.stub.lastToken() != "first" {
		t.Fatalf("first: %+v token %q", res, f.stub.lastToken())
	}
	waitFor(t, func() bool { return g.Outbox().Pending() == 0 })
	writeFile(t, dir, "token", []byte("second"))
	if res, _ := g.Handle(context.Background(), c(2), inv); !res.Allowed || f.stub.lastToken() != "second" {
		t.Fatalf("rotated: %+v token %q", res, f.stub.lastToken())
	}
	waitFor(t, func() bool { return g.Outbox().Pending() == 0 })
	writeFile(t, dir, "token", nil)
	if res, _ := g.Handle(context.Background(), c(3), inv); res.Allowed || res.Code != ef.EFStoreUnavailable {
		t.Fatalf("empty token: %+v", res)
	}
}

// TestInvokerErrorIsIndeterminate: an invoker error after a consume records INDETERMINATE and
// returns sink.ErrUpstream.
func TestInvokerErrorIsIndeterminate(t *testing.T) {
	f := newFixture(t)
	res, err := f.gate.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments",
		Destination: f.up.URL, Tool: "send_payment", Args: json.RawMessage(`{"amount":3}`)}, func(context.Context, string) (sink.InvokeResult, error) {
		return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, errors.New("connection reset")
	})
	if !errors.Is(err, sink.ErrUpstream) || res.State != journal.StateIndeterminate || res.Code != ef.EFIndeterminate {
		t.Fatalf("got %+v %v", res, err)
	}
	rec, err := f.store.Record(context.Background(), res.OperationID)
	if err != nil || rec.State != journal.StateIndeterminate {
		t.Fatalf("journal %+v %v", rec, err)
	}
}

// TestToolsListAnnotation: the sidecar holds the policy, so tools/list says which tools may
// escalate, as the standalone gate does.
func TestToolsListAnnotation(t *testing.T) {
	f := newFixture(t)
	if !f.gate.CanEscalate("payments", "wire") || f.gate.CanEscalate("payments", "get_balance") {
		t.Fatal("CanEscalate does not follow the policy")
	}
	if f.stub.requests() != 0 {
		t.Fatal("the annotation asked the service")
	}
}

func TestNewGateConfig(t *testing.T) {
	f := newFixture(t)
	ok := Options{Review: f.stub.client(nil), Policy: f.policy, Store: f.store, Namespace: testNS,
		SinkID: testSink, Servers: []Server{{Name: "payments", URL: "https://payments.example/mcp"}}}
	for _, tc := range []struct {
		name string
		edit func(*Options)
	}{
		{"no review client", func(o *Options) { o.Review = nil }},
		{"no policy", func(o *Options) { o.Policy = nil }},
		{"no store", func(o *Options) { o.Store = nil }},
		{"bad namespace", func(o *Options) { o.Namespace = "Billing" }},
		{"no sink", func(o *Options) { o.SinkID = "" }},
		{"no servers", func(o *Options) { o.Servers = nil }},
		{"duplicate server", func(o *Options) { o.Servers = append(o.Servers, o.Servers[0]) }},
		{"bad server name", func(o *Options) { o.Servers = []Server{{Name: "Pay_ments", URL: "https://x/mcp"}} }},
		{"server URL with user info", func(o *Options) { o.Servers = []Server{{Name: "p", URL: "https://u:p@x/mcp"}} }},
		{"relative server URL", func(o *Options) { o.Servers = []Server{{Name: "p", URL: "/mcp"}} }},
		{"short id key", func(o *Options) { o.IDKey = []byte("short") }},
		{"negative timeout", func(o *Options) { o.ReviewTimeout = -time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			if _, err := NewGate(o); !errors.Is(err, ErrConfig) {
				t.Fatalf("NewGate: %v, want ErrConfig", err)
			}
		})
	}
	g, err := NewGate(ok)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRefusalsRecorded: a call the pod's policy denies is refused at once and its Act record
// goes to the service afterwards (operation Refusal), with the code the agent got; a deny storm
// fills the bounded queue and the rest is dropped and counted, never waited for.
func TestRefusalsRecorded(t *testing.T) {
	f := newFixture(t)
	res := call(t, f.agent(), "email_send", `{"to":"x@example.com"}`)
	if efCode(res) != string(ef.EFPolicyDenied) || f.up.Count("email_send") != 0 {
		t.Fatalf("email_send: %s %s", efCode(res), text(res))
	}
	waitFor(t, func() bool { return f.stub.count(review.OperationRefusal) == 1 })
	if f.stub.count(review.OperationPermit)+f.stub.count(review.OperationReview) != 0 {
		t.Fatal("a local deny asked the service for a decision")
	}

	// The service hangs: records queue up to RefusalQueue, the rest are dropped, and the
	// refusals are answered at once all the same.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	drops := 0
	r := newRefusals(&review.Client{URL: srv.URL, HTTP: srv.Client(), Token: func() (string, error) { return "t", nil }},
		time.Minute, logr.Discard(), func() { drops++ })
	defer r.stop()
	defer close(hang)
	start := time.Now()
	for range RefusalQueue + 100 {
		r.add(review.Request{Operation: review.OperationRefusal})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("queueing %d refusal records took %s", RefusalQueue+100, d)
	}
	// One record is in flight, RefusalQueue wait: the rest is dropped.
	if drops < 99 || drops > 100 || r.drops.Load() != int64(drops) {
		t.Fatalf("%d records dropped (counter %d), want 99 or 100", drops, r.drops.Load())
	}
}

// TestRequestMomentInAPod: request_binding_moment works in a pod. The sink checks the proposal
// against the pod's policy as standalone — a proposal with an option the policy denies is
// refused without asking anyone — and registers the envelope with the authority service
// (operation Propose) with each option's call; the agent gets the moment.
func TestRequestMomentInAPod(t *testing.T) {
	f := newFixture(t)
	prop := func(args2 string, tool2 string) sink.Proposal {
		return sink.Proposal{Synopsis: "A wire is due.", Stem: "Which call may run?", Recommended: 1, Options: []sink.Option{
			{Label: "Wire it", Tool: "wire", Server: "payments", Args: json.RawMessage(`{"amount":9000}`), Reasoning: "As asked."},
			{Label: "Hold it", Tool: tool2, Server: "payments", Args: json.RawMessage(args2), Reasoning: "Safer."},
		}}
	}
	res, err := f.gate.RequestMoment(context.Background(), "s", testAgent, prop(`{"to":"x@example.com"}`, "email_send"))
	if err != nil || res.Allowed || f.stub.count(review.OperationPropose) != 0 {
		t.Fatalf("a proposal with a denied option: %+v %v (%d proposals sent)", res, err, f.stub.count(review.OperationPropose))
	}
	res, err = f.gate.RequestMoment(context.Background(), "s", testAgent, prop(`{"amount":9000,"hold":true}`, "wire"))
	if err != nil || !res.Allowed || res.Moment == nil || res.Moment.ID != moment || res.Moment.Envelope == nil {
		t.Fatalf("proposal: %+v %v", res, err)
	}
	f.stub.mu.Lock()
	defer f.stub.mu.Unlock()
	if len(f.stub.proposals) != 1 {
		t.Fatalf("%d proposals sent", len(f.stub.proposals))
	}
	p := f.stub.proposals[0]
	if p.Session != "s" || p.SinkID != testSink || len(p.Calls) != 2 || p.Calls[1].Tool != "wire" || string(p.Calls[1].Arguments) != `{"amount":9000,"hold":true}` ||
		p.Envelope != string(res.Moment.Envelope.Canonical()) {
		t.Fatalf("the proposal sent: %+v", p)
	}
}

// TestAlternativeOptionDoesNotRunTheRequestedCall: the principal chose the policy's
// alternative (option 1, "Hold the wire") on the moment of a wire; the agent then presents the
// call it first asked for. The service hands the moment's grant to that call (an authority
// bound to the chosen option's call, consumed, with the resolution), and the pod refuses it:
// the authority is not bound to the live call, and the upstream is not called. The chosen
// call itself then runs, once.
func TestAlternativeOptionDoesNotRunTheRequestedCall(t *testing.T) {
	f := newFixture(t)
	cs := f.agent()
	const requested, alternative = `{"amount":9000}`, `{"amount":9000,"hold":true}`
	if res := call(t, cs, "wire", requested); efCode(res) != string(ef.EFEscalationRequired) {
		t.Fatalf("the wire was not escalated: %q %s", efCode(res), text(res))
	}
	f.stub.mu.Lock()
	f.stub.chosen = &chosenOption{idx: 1, args: json.RawMessage(alternative)}
	f.stub.mu.Unlock()

	res := call(t, cs, "wire", requested)
	if !res.IsError || efCode(res) == "" {
		t.Fatalf("the requested call after the alternative was chosen: is_error %v code %q %s", res.IsError, efCode(res), text(res))
	}
	t.Logf("refused with %s: %s (meta %v)", efCode(res), text(res), res.Meta)
	if n := f.up.Count("wire"); n != 0 {
		t.Fatalf("the upstream ran the wire %d times on the alternative's grant", n)
	}
	if strings.Contains(text(res), "done:") {
		t.Fatalf("the agent got an upstream result: %s", text(res))
	}
	// The agent is told what the principal chose, never that the call it presented is
	// authorised (envelope-04 §7.3: a resolution is authority only for its option's action).
	meta, _ := json.Marshal(res.Meta[mcpproxy.MetaResolutions])
	var ds []sink.Delivery
	if err := json.Unmarshal(meta, &ds); err != nil || len(ds) != 1 || ds[0].OptionIdx == nil || *ds[0].OptionIdx != 1 {
		t.Fatalf("resolutions delivered %s (%v), want option 1's", meta, err)
	}
	if ds[0].Authorized || ds[0].ActionDigest != "" || strings.Contains(text(res), "it is authorised: make exactly that call") {
		t.Fatalf("the refused call is delivered as authorised: %s\n%s", meta, text(res))
	}

	res = call(t, cs, "wire", alternative)
	if res.IsError || !strings.Contains(text(res), `"hold":true`) {
		t.Fatalf("the chosen call: is_error %v code %q %s", res.IsError, efCode(res), text(res))
	}
	if n := f.up.Count("wire"); n != 1 {
		t.Fatalf("the upstream ran the wire %d times, want the chosen call once", n)
	}
}
