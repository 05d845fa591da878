package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/receipt"
)

// goodRun is a consistent run: two hot reads, one permitted email, one escalated payment that
// ran after approval, a replay answered from the journal, a substitution refused.
func goodRun() (World, Tally) {
	pay := `{"amount":5,"to":"w0-e1"}`
	w := World{
		Upstream: []mcptest.Call{
			{Tool: toolBalance, Args: json.RawMessage(`{"account":"w0-1"}`), OperationID: "op-h1"},
			{Tool: toolBalance, Args: json.RawMessage(`{"account":"w0-2"}`), OperationID: "op-h2"},
			{Tool: toolEmail, Args: json.RawMessage(`{"to":"a@example.com","subject":"s"}`), OperationID: "op-p1"},
			{Tool: toolPayment, Args: json.RawMessage(`{"to":"w0-e1","amount":5}`), OperationID: "op-g1"},
		},
		Dispatches: []journal.DispatchRecord{
			{OperationID: "op-p1", AuthorityID: "authz-p1", Tool: toolEmail, State: journal.StateExecuted},
			{OperationID: "op-g1", AuthorityID: "authz-g1", Tool: toolPayment, State: journal.StateExecuted},
		},
		Consumed:  []Consumption{{AuthorityID: "authz-p1", ConsumedBy: "op-p1"}, {AuthorityID: "authz-g1", ConsumedBy: "op-g1"}},
		HotAllows: []HotAllow{{Tool: toolBalance, OperationID: "op-h1"}, {Tool: toolBalance, OperationID: "op-h2"}},
		Receipts:  &ReceiptCheck{Receipts: 9},
	}
	t := newTally()
	t.Calls = 7
	t.Invoked = map[string]int{toolBalance: 2, toolEmail: 1, toolPayment: 1}
	t.InvokedArgs = []ToolArgs{
		{toolBalance, canonArgs(json.RawMessage(`{"account":"w0-1"}`))}, {toolBalance, canonArgs(json.RawMessage(`{"account":"w0-2"}`))},
		{toolEmail, canonArgs(json.RawMessage(`{"subject":"s","to":"a@example.com"}`))}, {toolPayment, canonArgs(json.RawMessage(pay))},
	}
	t.Refused = []ToolArgs{{toolPayment, canonArgs(json.RawMessage(pay))}, {toolPayment, canonArgs(json.RawMessage(`{"amount":5,"to":"mallory-w0-s2"}`))}}
	t.Substituted = []ToolArgs{{toolPayment, canonArgs(json.RawMessage(`{"amount":5,"to":"mallory-w0-s2"}`))}}
	t.Codes = map[string]int{"EF_ESCALATION_REQUIRED": 2}
	return w, t
}

func statusOf(cs []Check, name string) Check {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return Check{Status: "missing"}
}

// TestChecksFail feeds the checks deliberately broken worlds: each must FAIL the invariant it
// breaks, while the consistent world passes every check (so none of them passes by default).
func TestChecksFail(t *testing.T) {
	w, tl := goodRun()
	for _, c := range RunChecks(w, tl) {
		if c.Status != StatusPass {
			t.Fatalf("consistent run: %s %s %s %v", c.Name, c.Status, c.Detail, c.Errors)
		}
	}

	cases := []struct {
		name    string
		check   string
		breakIt func(w *World, t *Tally)
	}{
		{"upstream ran a protected call once more than EXECUTED", CheckUpstreamExecuted, func(w *World, _ *Tally) {
			w.Upstream = append(w.Upstream, mcptest.Call{Tool: toolEmail, Args: json.RawMessage(`{"to":"b@example.com"}`), OperationID: "op-p1"})
		}},
		{"upstream ran a hot call the sink never recorded", CheckUpstreamExecuted, func(w *World, _ *Tally) {
			w.Upstream = append(w.Upstream, mcptest.Call{Tool: toolBalance, Args: json.RawMessage(`{"account":"x"}`), OperationID: "op-h9"})
		}},
		{"upstream call without an operation id", CheckUpstreamExecuted, func(w *World, _ *Tally) {
			w.Upstream[2].OperationID = ""
		}},
		{"EXECUTED record the upstream never saw", CheckUpstreamExecuted, func(w *World, _ *Tally) {
			w.Dispatches = append(w.Dispatches, journal.DispatchRecord{OperationID: "op-x", AuthorityID: "authz-x", Tool: toolEmail, State: journal.StateExecuted})
			w.Consumed = append(w.Consumed, Consumption{AuthorityID: "authz-x", ConsumedBy: "op-x"})
		}},
		{"an authority dispatched twice", CheckSingleUse, func(w *World, _ *Tally) {
			w.Dispatches = append(w.Dispatches, journal.DispatchRecord{OperationID: "op-p2", AuthorityID: "authz-p1", Tool: toolEmail, State: journal.StateFailed})
		}},
		{"an authority consumed twice in the store", CheckSingleUse, func(w *World, _ *Tally) {
			w.Consumed = append(w.Consumed, Consumption{AuthorityID: "authz-p1", ConsumedBy: "op-p2"})
		}},
		{"store consumer differs from the dispatch", CheckSingleUse, func(w *World, _ *Tally) { w.Consumed[0].ConsumedBy = "op-zz" }},
		{"dispatched but not consumed", CheckSingleUse, func(w *World, _ *Tally) { w.Consumed = w.Consumed[1:] }},
		{"consumed without a dispatch record", CheckSingleUse, func(w *World, _ *Tally) {
			w.Consumed = append(w.Consumed, Consumption{AuthorityID: "authz-lost", ConsumedBy: "op-lost"})
		}},
		{"DISPATCH_PENDING left", CheckNoDangling, func(w *World, _ *Tally) {
			w.Dispatches = append(w.Dispatches, journal.DispatchRecord{OperationID: "op-d", AuthorityID: "authz-d", Tool: toolEmail, State: journal.StateDispatchPending})
		}},
		{"INVOKED left", CheckNoDangling, func(w *World, _ *Tally) { w.Dispatches[0].State = journal.StateInvoked }},
		{"CONSUMED left", CheckNoDangling, func(w *World, _ *Tally) { w.Dispatches[0].State = journal.StateConsumed }},
		{"substituted arguments reached the upstream", CheckDeniedNeverReached, func(w *World, t *Tally) {
			w.Upstream = append(w.Upstream, mcptest.Call{Tool: toolPayment, Args: json.RawMessage(`{"to":"mallory-w0-s2","amount":5}`), OperationID: "op-g1"})
		}},
		{"a refused call reached the upstream", CheckDeniedNeverReached, func(w *World, t *Tally) {
			t.Refused = append(t.Refused, ToolArgs{toolEmail, canonArgs(json.RawMessage(`{"to":"a@example.com","subject":"s"}`))})
			t.InvokedArgs = t.InvokedArgs[:2]
		}},
		{"a replay ran a second time", CheckDeniedNeverReached, func(w *World, t *Tally) {
			w.Upstream = append(w.Upstream, w.Upstream[3])
		}},
		{"the upstream ran more than the agents saw", CheckDeniedNeverReached, func(w *World, t *Tally) { t.Invoked[toolBalance] = 1 }},
		{"receipt log does not verify", CheckReceiptChain, func(w *World, _ *Tally) {
			w.Receipts = &ReceiptCheck{Receipts: 9, Err: fmt.Errorf("RECEIPT_ALTERED seq 3")}
		}},
		{"an unexpected answer", CheckExpectedAnswers, func(_ *World, t *Tally) { t.unexpected("hot: get_balance", "worker 0 hot: refused") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, tl := goodRun()
			tc.breakIt(&w, &tl)
			cs := RunChecks(w, tl)
			c := statusOf(cs, tc.check)
			if c.Status != StatusFail || len(c.Errors) == 0 {
				t.Fatalf("%s: %s (%s), want FAIL", tc.check, c.Status, c.Detail)
			}
			if Passed(cs) {
				t.Fatal("Passed reports a run with a failed check as passing")
			}
		})
	}
}

// TestReceiptsNA: a target without receipts is N/A, not PASS, and does not fail the run.
func TestReceiptsNA(t *testing.T) {
	w, tl := goodRun()
	w.Receipts, w.ReceiptsNA = nil, "this target writes no receipts"
	cs := RunChecks(w, tl)
	if c := statusOf(cs, CheckReceiptChain); c.Status != StatusNA || c.Detail != w.ReceiptsNA {
		t.Fatalf("receipt-chain without receipts: %+v", c)
	}
	if !Passed(cs) {
		t.Fatal("N/A failed the run")
	}
}

// TestVerifyReceipts: a log written by internal/receipt verifies; the same log with one
// receipt's tool changed does not, and the check FAILs.
func TestVerifyReceipts(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(key, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPath, logPath := filepath.Join(dir, "receipts.pub.pem"), filepath.Join(dir, "receipts.jsonl")
	if err := os.WriteFile(pubPath, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := receipt.Open(receipt.Options{Path: logPath, Signer: sv})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := l.Append(receipt.Receipt{ActID: fmt.Sprintf("act-%d", i), Tool: toolBalance, Decision: receipt.DecisionAllow,
			ArgumentsDigest: "sha256:" + strings.Repeat("a", 64), OperationID: fmt.Sprintf("op-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rc := verifyReceipts(logPath, pubPath)
	if rc.Err != nil || rc.Receipts != 3 {
		t.Fatalf("untouched log: %+v", rc)
	}
	hot, err := hotAllows(logPath)
	if err != nil || len(hot) != 3 || hot[1].OperationID != "op-1" {
		t.Fatalf("hot allows %+v, %v", hot, err)
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	altered := strings.Replace(string(b), `"tool":"get_balance"`, `"tool":"get_balancf"`, 1)
	if altered == string(b) {
		t.Fatal("nothing to alter")
	}
	if err := os.WriteFile(logPath, []byte(altered), 0o600); err != nil {
		t.Fatal(err)
	}
	w, tl := goodRun()
	w.Receipts = verifyReceipts(logPath, pubPath)
	if c := statusOf(RunChecks(w, tl), CheckReceiptChain); c.Status != StatusFail || !strings.Contains(strings.Join(c.Errors, " "), "RECEIPT_ALTERED") {
		t.Fatalf("altered log: %+v", c)
	}
}

// TestParseMix: weights parse; bad mixes are refused with a message naming the problem.
func TestParseMix(t *testing.T) {
	good := []struct {
		in   string
		want Mix
	}{
		{DefaultMix, Mix{KindHot: 60, KindPermit: 20, KindEscalate: 8, KindReplay: 6, KindSubstitute: 6}},
		{"hot=1", Mix{KindHot: 1}},
		{" hot = 3 , replay=0,", Mix{KindHot: 3, KindReplay: 0}},
	}
	for _, tc := range good {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMix(tc.in)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("ParseMix(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	bad := []struct{ in, want string }{
		{"", "no positive weight"},
		{"hot=0", "no positive weight"},
		{"hot", "not kind=weight"},
		{"warm=1", "not one of"},
		{"hot=1,hot=2", "twice"},
		{"hot=-1", "not an integer"},
		{"hot=x", "not an integer"},
		{"hot=99999999999", "not an integer"},
	}
	for _, tc := range bad {
		t.Run("bad/"+tc.in, func(t *testing.T) {
			_, err := ParseMix(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseMix(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

// FuzzParseMix: any input parses or is refused; never a panic, never a mix without weight.
func FuzzParseMix(f *testing.F) {
	for _, s := range []string{DefaultMix, "hot=1", "", "hot=", "=1", "hot=1,,permit=2", "replay=1000000", "hot=1=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMix(s)
		if err != nil {
			return
		}
		total := 0
		for _, k := range kinds {
			total += m[k]
		}
		if total <= 0 || len(m) > len(kinds) {
			t.Fatalf("ParseMix(%q) = %v", s, m)
		}
	})
}

// TestFlags: only loopback listeners; bad flags are usage errors.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{}, true},
		{[]string{"-listen", "::1", "-target", "standalone"}, true},
		{[]string{"-listen", "0.0.0.0"}, false},
		{[]string{"-listen", "10.0.0.1"}, false},
		{[]string{"-listen", "localhost"}, false},
		{[]string{"-target", "cluster"}, false},
		{[]string{"-concurrency", "0"}, false},
		{[]string{"-concurrency", "1,x"}, false},
		{[]string{"-duration", "0s"}, false},
		{[]string{"-mix", "warm=1"}, false},
		{[]string{"extra"}, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(tc.args, &strings.Builder{})
			if (err == nil) != tc.ok {
				t.Fatalf("parseFlags(%q): %v", tc.args, err)
			}
		})
	}
	if code := realMain([]string{"-listen", "0.0.0.0"}, &strings.Builder{}, &strings.Builder{}); code != exitUsage {
		t.Fatalf("a non-loopback listener: exit %d, want %d", code, exitUsage)
	}
}

// TestNoRunIsNoPass: a generator that could not run anything reports FAIL and exits 1.
func TestNoRunIsNoPass(t *testing.T) {
	var stdout, stderr strings.Builder
	code := realMain([]string{"-target", "standalone", "-concurrency", "1", "-duration", "1s", "-actgate", "/nonexistent/actgate"}, &stdout, &stderr)
	if code != exitFail || !strings.Contains(stdout.String(), "FAIL") || strings.Contains(stdout.String(), "PASS: every invariant") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}
