package sink

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/receipt"
)

func TestHotPathAllow(t *testing.T) {
	f := newFixture(t)
	res := f.handle(call("s1", "tools", "search", `{"q":"weather"}`))
	if !res.Allowed || !res.Invoked || res.Code != "" || len(res.Upstream) == 0 {
		t.Fatalf("search: %+v", res)
	}
	if got := f.up.count("search"); got != 1 {
		t.Fatalf("upstream search count = %d, want 1", got)
	}
	// The hot path consumes no authority and journals nothing.
	for _, s := range []journal.State{journal.StateDispatchPending, journal.StateExecuted, journal.StateIndeterminate} {
		if n := len(f.records(s)); n != 0 {
			t.Fatalf("%d %s records after a hot-path call", n, s)
		}
	}
	rs := f.receipts()
	if len(rs) != 1 || rs[0].Decision != receipt.DecisionAllow || rs[0].ActID != res.ActID || rs[0].AuthorityID != "" {
		t.Fatalf("receipts = %+v", rs)
	}
}

func TestDenyNeverContactsUpstream(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Call
		code ef.EFCode
	}{
		{"policy deny", call("s1", "pay", "delete_all", `{}`), ef.EFPolicyDenied},
		{"unknown tool", call("s1", "tools", "rm_rf", `{}`), ef.EFUnknownTool},
		{"unknown server", func() Call { c := call("s1", "tools", "search", `{}`); c.Server = "other"; return c }(), ef.EFUnknownTool},
		{"malformed arguments", call("s1", "tools", "search", `{"q":`), ef.EFActInvalid},
		{"duplicate member", call("s1", "tools", "search", `{"q":1,"q":2}`), ef.EFActInvalid},
		{"arguments not an object", call("s1", "tools", "search", `[1]`), ef.EFActInvalid},
		{"no session", call("", "tools", "search", `{}`), ef.EFActInvalid},
		{"no destination", func() Call { c := call("s1", "tools", "search", `{}`); c.Destination = ""; return c }(), ef.EFActInvalid},
		// tool-use-binding §22 T-A / §12 INJECTED_EMAIL_SEND: a recipient injected through
		// retrieved content.
		{"T-A injected recipient", func() Call {
			c := call("s1", "tools", "email_send", `{"to":"attacker@ex.com","body":"invoice"}`)
			c.Provenance = "retrieval"
			return c
		}(), ef.EFInstructionProvenanceFailure},
		// §22 T-D / §12 MCP_SERVER_SWAP: same tool and arguments, a swapped server URL.
		{"T-D swapped destination", func() Call {
			c := call("s1", "pay", "ticket_create", `{"title":"x"}`)
			c.Destination = evilURL
			return c
		}(), ef.EFDestinationMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			res := f.handle(tc.c)
			wantDeny(t, res, tc.code)
			if n := f.up.total(); n != 0 {
				t.Fatalf("upstream contacted %d times on a deny", n)
			}
			// The deny is vendor-shaped (MCP CallToolResult with isError) and carries the code.
			if tc.c.Vendor == act.VendorMCP {
				var rpc struct {
					ID     json.RawMessage `json:"id"`
					Result struct {
						IsError bool `json:"isError"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"result"`
				}
				err := json.Unmarshal(res.Deny, &rpc)
				out := rpc.Result
				if string(rpc.ID) != tc.c.VendorID {
					t.Fatalf("vendor deny answers id %s", rpc.ID)
				}
				if err != nil || !out.IsError || len(out.Content) == 0 ||
					!strings.Contains(out.Content[0].Text, string(tc.code)) {
					t.Fatalf("vendor deny = %s (%v)", res.Deny, err)
				}
				if strings.Contains(string(res.Deny), "attacker") {
					t.Fatal("the deny repeats an argument value")
				}
			}
			if n := len(f.records(journal.StateDispatchPending)) + len(f.records(journal.StateExecuted)); n != 0 {
				t.Fatalf("%d dispatch records after a deny", n)
			}
		})
	}
}

func TestPermitDispatchesOnceAndJournals(t *testing.T) {
	f := newFixture(t)
	res := f.handle(call("s1", "tools", "ticket_create", `{"title":"disk full"}`))
	if !res.Allowed || !res.Invoked || res.State != journal.StateExecuted || res.OperationID == "" {
		t.Fatalf("permit: %+v", res)
	}
	if got := f.up.count("ticket_create"); got != 1 {
		t.Fatalf("upstream count = %d, want 1", got)
	}
	recs := f.records(journal.StateExecuted)
	if len(recs) != 1 {
		t.Fatalf("%d EXECUTED records, want 1", len(recs))
	}
	rec := recs[0]
	if rec.ActID != res.ActID || rec.OperationID != res.OperationID || rec.Upstream != toolsURL || string(rec.Result) != string(res.Upstream) {
		t.Fatalf("record %+v does not describe the dispatch %+v", rec, res)
	}
	// The invoker got the record's operation id as its idempotency key.
	if f.up.opIDs[0] != rec.OperationID {
		t.Fatalf("invoked with operation %s, journaled %s", f.up.opIDs[0], rec.OperationID)
	}
	// History: DISPATCH_PENDING (written with the consume) then EXECUTED.
	if len(rec.History) != 2 || rec.History[0].To != journal.StateDispatchPending || rec.History[1].To != journal.StateExecuted {
		t.Fatalf("history = %+v", rec.History)
	}
	// The authority is consumed, by this operation.
	a, err := f.store.Get(context.Background(), "", rec.AuthorityID)
	if err != nil || a.State != "CONSUMED" || a.ConsumedBy != rec.OperationID {
		t.Fatalf("authority %+v, %v", a, err)
	}
	if a.Authority.Binding.SinkID != "sink-test" || a.Authority.Binding.PolicyEpoch != "7" || a.Authority.Binding.Destination != toolsURL {
		t.Fatalf("authority binding %+v", a.Authority.Binding)
	}
	// The consume commit carried the receipt; the receipt log has the durable receipt before
	// the outcome.
	if len(rec.Receipts) != 1 {
		t.Fatalf("%d receipts in the journal commit", len(rec.Receipts))
	}
	rs := f.receipts()
	if len(rs) != 2 || rs[0].Decision != receipt.DecisionAllow || rs[0].AuthorityID != rec.AuthorityID ||
		rs[0].State != string(journal.StateDispatchPending) || rs[1].Decision != receipt.DecisionOutcome || rs[1].State != string(journal.StateExecuted) {
		t.Fatalf("receipts = %+v", rs)
	}
	for _, r := range rs {
		if strings.Contains(r.Code+r.Tool+r.Server, "disk full") {
			t.Fatal("a receipt carries an argument value")
		}
	}
}

func TestOutcomeClassification(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcome  InvokeOutcome
		err      error
		state    journal.State
		invoked  bool
		code     ef.EFCode
		wantErr  bool
		retry    ef.EFCode // code of an identical call afterwards
		replayed bool
	}{
		{"executed", OutcomeExecuted, nil, journal.StateExecuted, true, "", false, "", true},
		{"authoritative failure", OutcomeFailed, nil, journal.StateFailed, true, "", false, "", true},
		{"timeout after send", OutcomeIndeterminate, errors.New("read: i/o timeout"), journal.StateIndeterminate, true, ef.EFIndeterminate, true, ef.EFIndeterminate, false},
		{"executed claimed with an error", OutcomeExecuted, errors.New("connection reset"), journal.StateIndeterminate, true, ef.EFIndeterminate, true, ef.EFIndeterminate, false},
		{"zero outcome", 0, nil, journal.StateIndeterminate, true, ef.EFIndeterminate, false, ef.EFIndeterminate, false},
		{"not sent", OutcomeNotSent, errors.New("dial: connection refused"), journal.StateFailed, false, "", true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.up.outcome, f.up.err = tc.outcome, tc.err
			c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
			res, err := f.gate.Handle(context.Background(), c, f.up.invoker(c.Tool))
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrUpstream)) {
				t.Fatalf("err = %v", err)
			}
			if res.State != tc.state || res.Invoked != tc.invoked || res.Code != tc.code || !res.Allowed {
				t.Fatalf("result %+v", res)
			}
			if n := len(f.records(tc.state)); n != 1 {
				t.Fatalf("%d records in %s", n, tc.state)
			}
			// A retry of the same call never invokes again (tool-use-binding §9).
			f.up.outcome, f.up.err = OutcomeExecuted, nil
			again := f.handle(c)
			if again.Invoked || f.up.count("ticket_create") != 1 {
				t.Fatalf("retry invoked: %+v, count %d", again, f.up.count("ticket_create"))
			}
			if again.Replayed != tc.replayed || again.Code != tc.retry {
				t.Fatalf("retry: %+v", again)
			}
			if tc.replayed && (string(again.Upstream) != string(res.Upstream) || again.State != tc.state) {
				t.Fatalf("retry result %s (%s), recorded %s", again.Upstream, again.State, res.Upstream)
			}
		})
	}
}

func TestRetryWindow(t *testing.T) {
	f := newFixture(t)
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	first := f.handle(c)
	// Same session, same action, same destination, inside the authority's window: a retry.
	if r := f.handle(c); !r.Replayed || r.Invoked || r.ActID != first.ActID {
		t.Fatalf("retry: %+v", r)
	}
	// Another session: a new act with its own authority.
	if r := f.handle(call("s2", "tools", "ticket_create", `{"title":"x"}`)); !r.Invoked || r.Replayed {
		t.Fatalf("other session: %+v", r)
	}
	// Different arguments: a new act.
	if r := f.handle(call("s1", "tools", "ticket_create", `{"title":"y"}`)); !r.Invoked {
		t.Fatalf("other arguments: %+v", r)
	}
	// After the authority expired, the same call is a new act (§23).
	f.clock.Advance(DefaultAuthorityTTL + time.Second)
	if r := f.handle(c); !r.Invoked || r.Replayed || r.ActID == first.ActID {
		t.Fatalf("after the window: %+v", r)
	}
	if got := f.up.count("ticket_create"); got != 4 {
		t.Fatalf("upstream count = %d, want 4", got)
	}
	// The replay left a receipt that says so.
	var replays int
	for _, r := range f.receipts() {
		if r.Code == ReceiptCodeReplayed {
			replays++
		}
	}
	if replays != 1 {
		t.Fatalf("%d replay receipts", replays)
	}
}

// TestParallelSearchAndPayout is tool-use-binding §22 T-B / §12 PARALLEL_PAY_AND_SEARCH: two
// calls of one assistant message are separate acts; the search runs, the payout escalates.
func TestParallelSearchAndPayout(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	var search, payout Result
	wg.Go(func() { search = f.handle(call("s1", "tools", "search", `{"q":"invoice 42"}`)) })
	wg.Go(func() { payout = f.handle(call("s1", "pay", "payout_create", `{"amount":5000,"to":"acct-9"}`)) })
	wg.Wait()
	if !search.Invoked || f.up.count("search") != 1 {
		t.Fatalf("search: %+v", search)
	}
	wantDeny(t, payout, ef.EFEscalationRequired)
	if payout.Moment == nil || f.up.count("payout_create") != 0 {
		t.Fatalf("payout: %+v, upstream %d", payout, f.up.count("payout_create"))
	}
	if search.ActID == payout.ActID {
		t.Fatal("parallel calls share an act id")
	}
}

func TestContextTimeoutNeverInvokes(t *testing.T) {
	t.Run("expired before the call", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
		res, err := f.gate.Handle(ctx, c, f.up.invoker(c.Tool))
		if err != nil {
			t.Fatal(err)
		}
		wantDeny(t, res, ef.EF060)
		if f.up.total() != 0 {
			t.Fatal("invoked after the deadline")
		}
		if !res.Code.Retryable() {
			t.Fatal("EF_060 must be retryable (as validation, §23)")
		}
	})
	for _, tool := range []string{"search", "ticket_create"} {
		t.Run("deadline during validation/"+tool, func(t *testing.T) {
			f := newFixture(t)
			f.policy.delay = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			c := call("s1", "tools", tool, `{"title":"x"}`)
			res, err := f.gate.Handle(ctx, c, f.up.invoker(c.Tool))
			if err != nil {
				t.Fatal(err)
			}
			wantDeny(t, res, ef.EF060)
			if f.up.total() != 0 {
				t.Fatal("invoked after the deadline")
			}
			if n := len(f.records(journal.StateDispatchPending)); n != 0 {
				t.Fatalf("%d DISPATCH_PENDING records", n)
			}
		})
	}
}

func TestStoreClosedDenies(t *testing.T) {
	f := newFixture(t)
	f.store.Close()
	res := f.handle(call("s1", "tools", "ticket_create", `{"title":"x"}`))
	wantDeny(t, res, ef.EFStoreUnavailable)
	if f.up.total() != 0 {
		t.Fatal("invoked with the store closed")
	}
	// The hot path does not need the store.
	if r := f.handle(call("s1", "tools", "search", `{}`)); !r.Invoked {
		t.Fatalf("search: %+v", r)
	}
}

// TestRestartAfterConsumeBeforeInvoke is tool-use-binding §22 T-G: the host dies after the
// consume and before the invoke; on restart the act is not invoked again.
func TestRestartAfterConsumeBeforeInvoke(t *testing.T) {
	f := newFixture(t)
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	// The "crash": the store goes away inside the invocation, before anything is sent, so the
	// outcome cannot be recorded and DISPATCH_PENDING stays on disk.
	crashed := false
	inv := func(ctx context.Context, op string) (InvokeResult, error) {
		crashed = true
		f.store.Close()
		return InvokeResult{Outcome: OutcomeNotSent}, errors.New("process killed")
	}
	res, err := f.gate.Handle(context.Background(), c, inv)
	if !crashed || err == nil {
		t.Fatalf("crash not simulated: %+v %v", res, err)
	}
	f.restart()
	// Recovery made the stranded record INDETERMINATE before serving.
	if n := len(f.records(journal.StateDispatchPending)); n != 0 {
		t.Fatalf("%d DISPATCH_PENDING records after restart", n)
	}
	ind := f.records(journal.StateIndeterminate)
	if len(ind) != 1 || ind[0].Reason != journal.ReasonRecoveredOnStart {
		t.Fatalf("INDETERMINATE records = %+v", ind)
	}
	// The retry gets an INDETERMINATE error, never an invoke — in its session and in another.
	for _, s := range []string{"s1", "s2"} {
		cc := c
		cc.Session = s
		r := f.handle(cc)
		wantDeny(t, r, ef.EFIndeterminate)
		if r.State != journal.StateIndeterminate {
			t.Fatalf("state %s", r.State)
		}
	}
	if f.up.total() != 0 {
		t.Fatalf("upstream invoked %d times after the restart", f.up.total())
	}
}

func TestRestartKeepsRecordedResults(t *testing.T) {
	f := newFixture(t)
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	first := f.handle(c)
	f.restart()
	r := f.handle(c)
	if !r.Replayed || r.Invoked || string(r.Upstream) != string(first.Upstream) {
		t.Fatalf("retry after restart: %+v", r)
	}
	if f.up.count("ticket_create") != 1 {
		t.Fatal("invoked again after restart")
	}
}

func TestAuditModeLetsThroughAndSaysSo(t *testing.T) {
	f := newFixture(t)
	f.policy.audit = true
	for _, tc := range []struct {
		c    Call
		code ef.EFCode
	}{
		{call("s1", "pay", "delete_all", `{}`), ef.EFPolicyDenied},
		{call("s1", "pay", "payout_create", `{"amount":5}`), ef.EFEscalationRequired},
		{call("s1", "tools", "search", `{}`), ""},
		{call("s1", "tools", "ticket_create", `{"title":"x"}`), ""},
	} {
		res := f.handle(tc.c)
		if !res.Allowed || !res.Invoked || res.AuditCode != tc.code || res.Code != "" || res.Moment != nil {
			t.Fatalf("%s: %+v", tc.c.Tool, res)
		}
	}
	if f.up.total() != 4 {
		t.Fatalf("upstream count %d, want 4", f.up.total())
	}
	// Audit mode consumes nothing and journals nothing: it is not enforcement.
	if n := len(f.records(journal.StateExecuted)); n != 0 {
		t.Fatalf("%d EXECUTED records in audit mode", n)
	}
	var audit []string
	for _, r := range f.receipts() {
		if r.Decision == receipt.DecisionAuditAllow {
			audit = append(audit, r.Code)
		} else if r.Decision != receipt.DecisionAllow {
			t.Fatalf("audit-mode receipt %+v", r)
		}
	}
	if strings.Join(audit, ",") != "EF_POLICY_DENIED,EF_ESCALATION_REQUIRED" {
		t.Fatalf("audit-allow receipts %v", audit)
	}
}

func TestEpochChangeRefusesOutstandingAuthority(t *testing.T) {
	f := newFixture(t)
	res := f.handle(call("s1", "pay", "payout_create", `{"amount":5}`))
	if _, err := f.gate.Resolve(context.Background(), res.Moment.ID, "alice", resolution(res.Moment.Digest, "option", 0, "")); err != nil {
		t.Fatal(err)
	}
	// The policy changes before the agent's call: the authority's epoch is no longer current
	// (tool-use-binding §16 MUST 5, "uncertain epoch").
	f.policy.epoch.Store(8)
	r := f.handle(call("s1", "pay", "payout_create", `{"amount":5}`))
	wantDeny(t, r, ef.EF002)
	if f.up.total() != 0 {
		t.Fatal("invoked under a stale epoch")
	}
}

// TestReconciledOutcomeIsReplayed: an INDETERMINATE dispatch refuses its retry until
// authenticated reconciliation settles it in the journal; then the retry gets the reconciled
// result, still without a second invocation.
func TestReconciledOutcomeIsReplayed(t *testing.T) {
	f := newFixture(t)
	f.up.outcome = OutcomeIndeterminate
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	first := f.handle(c)
	if first.State != journal.StateIndeterminate {
		t.Fatalf("%+v", first)
	}
	wantDeny(t, f.handle(c), ef.EFIndeterminate)
	rec, err := f.store.Record(context.Background(), first.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	result := []byte(`{"content":[{"type":"text","text":"ticket 7 exists"}]}`)
	if _, err := f.store.Reconcile(context.Background(), rec.OperationID, journal.Reconciliation{
		Authenticated: true, OperationID: rec.OperationID, ActionDigest: rec.ActionDigest, Upstream: rec.Upstream,
		Outcome: journal.StateExecuted, EvidenceDigest: EvidenceDigest(result), Result: result,
	}); err != nil {
		t.Fatal(err)
	}
	r := f.handle(c)
	if !r.Replayed || r.Invoked || r.State != journal.StateExecuted || string(r.Upstream) != string(result) {
		t.Fatalf("after reconciliation: %+v", r)
	}
	if f.up.count("ticket_create") != 1 {
		t.Fatalf("upstream count %d", f.up.count("ticket_create"))
	}
}

// heldJournal holds the first terminal Transition after it committed, until release is
// closed: the moment between the journal recording an outcome and the dispatch index learning
// it.
type heldJournal struct {
	journal.Journal
	once      sync.Once
	committed chan struct{}
	release   chan struct{}
}

func (j *heldJournal) Transition(ctx context.Context, op string, to journal.State, o journal.Outcome) (journal.DispatchRecord, error) {
	rec, err := j.Journal.Transition(ctx, op, to, o)
	if err == nil && to.Terminal() {
		j.once.Do(func() {
			close(j.committed)
			<-j.release
		})
	}
	return rec, err
}

// TestRetryAfterOutcomeCommitted: a retry that arrives once the journal holds the dispatch's
// outcome, before the dispatching call has returned, gets the recorded result; it is neither
// refused as in flight nor invoked again.
func TestRetryAfterOutcomeCommitted(t *testing.T) {
	j := &heldJournal{committed: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, func(o *Options) { j.Journal = o.Journal; o.Journal = j })
	c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
	first := make(chan Result, 1)
	go func() { first <- f.handle(c) }()
	<-j.committed
	again := f.handle(c)
	close(j.release)
	r := <-first
	if !r.Invoked || r.State != journal.StateExecuted {
		t.Fatalf("first call: %+v", r)
	}
	if !again.Replayed || again.Invoked || again.State != journal.StateExecuted || string(again.Upstream) != string(r.Upstream) {
		t.Fatalf("retry after the outcome was committed: %+v, want the recorded result", again)
	}
	if got := f.up.count("ticket_create"); got != 1 {
		t.Fatalf("upstream invoked %d times, want 1", got)
	}
}
