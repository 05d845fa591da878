package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/sink"
)

// TestReceipts: every decision of the sidecar is in its signed, hash-chained receipt log
// (receipts.go): a hot-path allow, a permit's allow and its outcome, a retry answered from the
// journal, a deny and an escalation — with the act, its digests, the authority and operation, and
// nothing of the arguments. The log verifies with the public key the sidecar wrote beside it.
func TestReceipts(t *testing.T) {
	f := newFixture(t)
	cs := f.agent()
	const secret = "ACME-receipts-4711"
	call(t, cs, "get_balance", `{"account":"`+secret+`"}`)
	call(t, cs, "send_payment", `{"amount":250,"to":"`+secret+`"}`)
	call(t, cs, "send_payment", `{"amount":250,"to":"`+secret+`"}`) // a retry: replayed
	if r := call(t, cs, "email_send", `{"to":"`+secret+`"}`); efCode(r) == "" {
		t.Fatalf("email_send was not refused: %s", text(r))
	}
	if r := call(t, cs, "wire", `{"amount":9000,"to":"`+secret+`"}`); efCode(r) != string(ef.EFEscalationRequired) {
		t.Fatalf("wire: %s", efCode(r))
	}
	rs := f.receipts()
	type line struct{ tool, decision, code, state string }
	var got []line
	for _, r := range rs {
		got = append(got, line{r.Tool, r.Decision, r.Code, r.State})
		if r.ActID == "" || !strings.HasPrefix(r.ArgumentsDigest, "sha256:") {
			t.Errorf("receipt without act or arguments digest: %+v", r)
		}
	}
	want := []line{
		{"get_balance", receipt.DecisionAllow, "", ""},
		{"send_payment", receipt.DecisionAllow, sink.ReceiptCodeDispatch, string(journal.StateDispatchPending)},
		{"send_payment", receipt.DecisionOutcome, "", string(journal.StateExecuted)},
		{"send_payment", receipt.DecisionOutcome, sink.ReceiptCodeReplayed, string(journal.StateExecuted)},
		{"email_send", receipt.DecisionDeny, string(ef.EFPolicyDenied), ""},
		{"wire", receipt.DecisionEscalate, string(ef.EFEscalationRequired), ""},
	}
	if len(got) != len(want) {
		t.Fatalf("receipts %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("receipt %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// The permit's allow names the consumed authority and the operation the upstream received.
	calls := f.up.Calls()
	var op string
	for _, c := range calls {
		if c.Tool == "send_payment" {
			op = c.OperationID
		}
	}
	if rs[1].AuthorityID != f.stub.consumes[0].AuthorityID || rs[1].OperationID != op || rs[2].OperationID != op ||
		rs[3].AuthorityID != rs[1].AuthorityID || rs[3].OperationID != op {
		t.Errorf("permit receipts name authority %s operation %s/%s; consumed %s, upstream got %s",
			rs[1].AuthorityID, rs[1].OperationID, rs[2].OperationID, f.stub.consumes[0].AuthorityID, op)
	}
	// The hot-path allow names the operation id the upstream received.
	if rs[0].OperationID == "" || rs[0].OperationID != calls[0].OperationID {
		t.Errorf("hot-path receipt operation %q, upstream got %q", rs[0].OperationID, calls[0].OperationID)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, ReceiptsFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatal("an argument value reached the receipt log")
	}
}

// TestReceiptLogFailureRefuses: with its receipt log failed (closed here), the sidecar invokes
// nothing. The hot path refuses before calling the upstream; a permit is consumed and journaled
// DISPATCH_PENDING, then, with no durable receipt, settled FAILED (not_dispatched) and refused
// — as internal/sink does — and the outcome is reported for the Act.
func TestReceiptLogFailureRefuses(t *testing.T) {
	f := newFixture(t)
	cs := f.agent()
	if err := f.log.Close(); err != nil {
		t.Fatal(err)
	}
	if r := call(t, cs, "get_balance", `{"account":"A-1"}`); efCode(r) != string(ef.EFStoreUnavailable) {
		t.Fatalf("hot path with a failed receipt log: %s %s", efCode(r), text(r))
	}
	if r := call(t, cs, "send_payment", `{"amount":250,"to":"ACME"}`); efCode(r) != string(ef.EFStoreUnavailable) {
		t.Fatalf("permit with a failed receipt log: %s %s", efCode(r), text(r))
	}
	if n := len(f.up.Calls()); n != 0 {
		t.Fatalf("the upstream ran %d calls", n)
	}
	if f.stub.consumeCount() != 1 {
		t.Fatalf("%d consumes, want 1", f.stub.consumeCount())
	}
	rec, err := f.store.Record(context.Background(), f.stub.consumes[0].OperationID)
	if err != nil || rec.State != journal.StateFailed || rec.Reason != sink.ReasonNotDispatched {
		t.Fatalf("journal: %+v %v; want FAILED %s", rec, err, sink.ReasonNotDispatched)
	}
	if reps := f.waitReports(1); len(reps) != 1 || reps[0].State != "FAILED" {
		t.Fatalf("reports: %+v", reps)
	}
	// The host loop is refused the same way, before it may run anything.
	status, body := f.post(hostloop.EnforcePath, `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_01B","name":"get_balance","input":{"account":"A-2"}},"session":"conv-2"}`)
	var d hostloop.Decision
	if err := json.Unmarshal(body, &d); err != nil || status != http.StatusOK || d.Allow || d.Code != ef.EFStoreUnavailable {
		t.Fatalf("host-loop enforce with a failed receipt log: HTTP %d %s", status, body)
	}
}

// TestHostLoopReceipts: the host loop's enforce and complete are in the log too: the allow,
// durable before the answer that lets the host run the tool, then the outcome it reports.
func TestHostLoopReceipts(t *testing.T) {
	f := newFixture(t)
	status, body := f.post(hostloop.EnforcePath, `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_01A","name":"send_payment","input":{"amount":250,"to":"ACME"}},"session":"conv-1","provenance":"user"}`)
	var d hostloop.Decision
	if err := json.Unmarshal(body, &d); err != nil || status != http.StatusOK || !d.Allow {
		t.Fatalf("enforce: HTTP %d %s", status, body)
	}
	// Durable before the answer: on disk without a flush.
	b, err := os.ReadFile(filepath.Join(f.dir, ReceiptsFile))
	if err != nil || !strings.Contains(string(b), d.OperationID) {
		t.Fatalf("the allow of %s was not durable when enforce answered", d.OperationID)
	}
	if status, body = f.post(hostloop.CompletePath, `{"operation_id":"`+d.OperationID+`","outcome":"executed","result":{"paid":true}}`); status != http.StatusOK {
		t.Fatalf("complete: HTTP %d %s", status, body)
	}
	rs := f.receipts()
	if len(rs) != 2 || rs[0].Decision != receipt.DecisionAllow || rs[0].OperationID != d.OperationID ||
		rs[1].Decision != receipt.DecisionOutcome || rs[1].State != string(journal.StateExecuted) || rs[1].OperationID != d.OperationID ||
		rs[1].Server != "payments" || rs[1].Tool != "send_payment" {
		t.Fatalf("receipts %+v", rs)
	}
}
