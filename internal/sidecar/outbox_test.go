package sidecar

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// TestOutboxAcrossOutageAndRestart: the authority service is down while outcomes happen; the
// sidecar restarts over the same journal and outbox file; once the service is back every
// outcome reaches it in the state the journal holds, and an acknowledged outcome is not
// reported again by a later start.
func TestOutboxAcrossOutageAndRestart(t *testing.T) {
	f := newFixture(t)
	f.gate.Close()
	path := filepath.Join(t.TempDir(), OutboxFile)
	setFails := func(v bool) {
		f.stub.mu.Lock()
		f.stub.reportFails = v
		f.stub.mu.Unlock()
	}

	setFails(true)
	g, o := f.gateWithOutbox(path)
	ops := map[string]journal.State{}
	outcomes := []sink.InvokeOutcome{sink.OutcomeExecuted, sink.OutcomeFailed, sink.OutcomeIndeterminate}
	for i, out := range outcomes {
		res, _ := g.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments", Destination: f.up.URL,
			Tool: "send_payment", Args: json.RawMessage(`{"amount":` + strconv.Itoa(i+1) + `}`)},
			func(context.Context, string) (sink.InvokeResult, error) {
				return sink.InvokeResult{Result: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`), Outcome: out}, nil
			})
		if !res.Allowed || res.OperationID == "" {
			t.Fatalf("call %d: %+v", i, res)
		}
		ops[res.OperationID] = res.State
	}
	f.waitReports(3) // tried, and refused: the service is down
	if n := o.Pending(); n != 3 {
		t.Fatalf("outbox holds %d outcomes with the service down, want 3", n)
	}
	g.Close()
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart with the service back: every outcome is reported as the journal holds it.
	setFails(false)
	tried := len(f.stub.reported())
	g, o = f.gateWithOutbox(path)
	waitFor(t, func() bool { return o.Pending() == 0 })
	got := map[string]string{}
	for _, r := range f.stub.reported()[tried:] {
		got[r.OperationID] = string(r.State)
		rec, err := f.store.Record(context.Background(), r.OperationID)
		if err != nil || r.EvidenceDigest != rec.EvidenceDigest || r.AuthorityID != rec.AuthorityID {
			t.Fatalf("report %+v, journal %+v %v", r, rec, err)
		}
	}
	for op, st := range ops {
		if got[op] != string(st) {
			t.Fatalf("after the restart the service got %v, want every journal state %v", got, ops)
		}
	}
	g.Close()
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	// A later start reports nothing again: the acknowledgements are in the outbox file.
	acked := len(f.stub.reported())
	g, o = f.gateWithOutbox(path)
	defer func() { g.Close(); _ = o.Close() }()
	time.Sleep(300 * time.Millisecond)
	if n := len(f.stub.reported()); n != acked || o.Pending() != 0 {
		t.Fatalf("a start after the acknowledgements reported %d outcomes again (pending %d)", n-acked, o.Pending())
	}
}

// TestOutboxReportsConcurrently: outcomes are reported up to OutboxInFlight at a time, so a
// slow authority service (every Report answered after 100 ms) does not leave the outbox a
// report per round trip behind the pod's protected calls; every outcome is acknowledged once.
func TestOutboxReportsConcurrently(t *testing.T) {
	f := newFixture(t)
	f.gate.Close()
	f.stub.mu.Lock()
	f.stub.reportDelay = 100 * time.Millisecond
	f.stub.mu.Unlock()
	g, o := f.gateWithOutbox(filepath.Join(t.TempDir(), OutboxFile))
	defer func() { g.Close(); _ = o.Close() }()
	const calls = 24
	ops := map[string]bool{}
	for i := range calls {
		res, _ := g.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments", Destination: f.up.URL,
			Tool: "send_payment", Args: json.RawMessage(`{"amount":` + strconv.Itoa(i+1) + `}`)},
			func(context.Context, string) (sink.InvokeResult, error) {
				return sink.InvokeResult{Result: json.RawMessage(`{"ok":true}`), Outcome: sink.OutcomeExecuted}, nil
			})
		if !res.Allowed || res.OperationID == "" {
			t.Fatalf("call %d: %+v", i, res)
		}
		ops[res.OperationID] = true
	}
	waitFor(t, func() bool { return o.Pending() == 0 })
	f.stub.mu.Lock()
	most := f.stub.maxReportsInFlight
	f.stub.mu.Unlock()
	if most < 2 || most > OutboxInFlight {
		t.Fatalf("at most %d reports were in flight at once, want 2 to %d", most, OutboxInFlight)
	}
	got := map[string]int{}
	for _, r := range f.stub.reported() {
		got[r.OperationID]++
	}
	for op := range ops {
		if got[op] != 1 {
			t.Fatalf("operation %s reported %d times, want once (all: %v)", op, got[op], got)
		}
	}
	if o.Delivered() != calls {
		t.Fatalf("%d reports acknowledged, want %d", o.Delivered(), calls)
	}
}
