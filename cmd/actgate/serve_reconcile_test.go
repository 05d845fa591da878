package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/reconcile"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/test/testutil"
)

// TestServeReconcilesIndeterminate: through `actgate serve`, a PolicyPermit call whose upstream
// never answers within callTimeout is INDETERMINATE and a retry is refused with EF_INDETERMINATE
// without reaching the upstream. The server's reconciliation endpoint (a real TLS server
// speaking actgate-reconciliation-v1, its CA in caFile) is asked about the operation; once it
// answers EXECUTED, with a valid MAC, the gate settles the dispatch: the retry gets the settled
// outcome and is still not run again, a RECONCILED receipt is in the verifiable receipt log and
// actgate_reconciliation_results_total{result="Executed"} is 1 (action-evidence-boundary,
// "Perform Authenticated Reconciliation").
func TestServeReconcilesIndeterminate(t *testing.T) {
	release := make(chan struct{})
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}, {Name: "send_payment"},
		{Name: "email_send", Handler: func(ctx context.Context, _ json.RawMessage) (*mcp.CallToolResult, error) {
			select { // the answer never arrives in time
			case <-release:
			case <-ctx.Done():
			}
			return mcptest.Text("sent"), nil
		}}}, mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); _ = up.Close() })

	macKey := []byte("0123456789abcdef0123456789abcdef")
	var mu sync.Mutex
	var queries []reconcile.Query
	answer := make(chan struct{}) // the endpoint answers once the test has seen the refusal
	ep := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q, err := reconcile.ParseQuery(body)
		if err != nil || r.Header.Get("Authorization") != "Bearer rec-token" {
			http.Error(w, "bad query", http.StatusBadRequest)
			return
		}
		mu.Lock()
		queries = append(queries, q)
		mu.Unlock()
		select {
		case <-answer:
		case <-r.Context().Done():
			return
		}
		b, err := reconcile.EncodeAnswer(reconcile.Answer{Query: q, Outcome: reconcile.OutcomeExecuted, ObservedAt: time.Now()})
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(reconcile.SignatureHeader, reconcile.Sign(macKey, b))
		_, _ = w.Write(b)
	}))
	t.Cleanup(ep.Close)

	dir := t.TempDir()
	write := func(name string, b []byte) string { return testutil.WriteFile(t, dir, name, b) }
	tok := write("finance.token", []byte("tok\n"))
	recTok := write("rec.token", []byte("rec-token\n"))
	mac := write("rec.mac", macKey)
	ca := write("rec-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ep.Certificate().Raw}))
	doc := string(demoConfig(up.URL, filepath.Join(dir, "data"), tok))
	doc = strings.Replace(doc, "callTimeout: 30s\n", "callTimeout: 1s\nreconciliation: {interval: 1s}\n", 1)
	doc = strings.Replace(doc, fmt.Sprintf("    url: %q\n", up.URL),
		fmt.Sprintf("    url: %q\n    reconciliation: {url: %q}\n", up.URL, ep.URL+"/operations"), 1)
	doc = strings.Replace(doc, fmt.Sprintf("  bearerTokenFile: %q\n", tok),
		fmt.Sprintf("  bearerTokenFile: %q\n  reconciliation: {bearerTokenFile: %q, macKeyFile: %q, caFile: %q}\n", tok, recTok, mac, ca), 1)
	g := &testGate{t: t, dir: dir, cfgFile: write("actgate.yaml", []byte(doc)), up: up}
	g.start()
	cs := g.agent()

	callEmail := func() *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "email_send",
			Arguments: json.RawMessage(`{"to":"carol@example.com"}`), Meta: mcp.Meta{mcpproxy.MetaProvenance: "user"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := callEmail(); efCodeOf(res) != "EF_INDETERMINATE" {
		t.Fatalf("first call: %s", resultText(res))
	}
	if res := callEmail(); efCodeOf(res) != "EF_INDETERMINATE" {
		t.Fatalf("retry before reconciliation: %s", resultText(res))
	}
	if n := up.Count("email_send"); n != 1 {
		t.Fatalf("upstream ran email_send %d times, want 1", n)
	}
	close(answer)

	deadline := time.Now().Add(15 * time.Second)
	var res *mcp.CallToolResult
	for {
		res = callEmail()
		if efCodeOf(res) != "EF_INDETERMINATE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never settled; the endpoint was asked %d times", len(queries))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.IsError || !strings.Contains(resultText(res), "settled its outcome as EXECUTED") {
		t.Fatalf("retry after reconciliation: isError=%v %s", res.IsError, resultText(res))
	}
	if n := up.Count("email_send"); n != 1 {
		t.Fatalf("upstream ran email_send %d times after reconciliation, want 1", n)
	}
	mu.Lock()
	q := queries[0]
	mu.Unlock()
	if q.Tool != "email_send" || q.Server != "finance" || q.OperationID != up.Calls()[0].OperationID {
		t.Fatalf("query %+v; the upstream saw operation %q", q, up.Calls()[0].OperationID)
	}
	if got := counterValue(t, g, metrics.NameReconciliationResults, "Executed"); got != 1 {
		t.Fatalf("reconciliation results Executed = %v", got)
	}

	g.stop()
	pub, err := os.ReadFile(g.cfg.Path(gateconfig.ReceiptPubFile))
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.NewVerifierPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	reconciled := false
	for _, r := range testutil.VerifiedReceipts(t, g.cfg.Path(gateconfig.ReceiptsFile), v) {
		if r.Code == standalone.ReceiptCodeReconciled {
			reconciled = r.OperationID == q.OperationID && r.State == "EXECUTED" && r.Decision == receipt.DecisionOutcome
		}
	}
	if !reconciled {
		t.Fatalf("no %s outcome receipt (EXECUTED) for %s in the receipt log", standalone.ReceiptCodeReconciled, q.OperationID)
	}
}

func efCodeOf(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

func resultText(r *mcp.CallToolResult) string { return testutil.Text(r) }

// counterValue reads one labelled counter of the gate's registry.
func counterValue(t *testing.T, g *testGate, name, result string) float64 {
	t.Helper()
	mfs, err := g.rt.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "result", result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
