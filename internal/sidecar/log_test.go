package sidecar

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/actgate/actgate/internal/sink"
)

// TestLogsCarryDigestsNotArguments runs every kind of decision through the sidecar's gate with
// a logger at full verbosity: the log names acts and digests, never an argument value
// (docs/architecture.md "Privacy").
func TestLogsCarryDigestsNotArguments(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	var lines []string
	logger := funcr.NewJSON(func(obj string) {
		mu.Lock()
		lines = append(lines, obj)
		mu.Unlock()
	}, funcr.Options{Verbosity: 10})
	o := f.options()
	o.Log = logger
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "SECRET-ARG-5150"
	inv := func(context.Context, string) (sink.InvokeResult, error) {
		return sink.InvokeResult{Result: json.RawMessage(`{"content":[]}`), Outcome: sink.OutcomeExecuted}, nil
	}
	var acts []string
	for _, tool := range []string{"get_balance", "send_payment", "email_send", "wire", "audit_me", "consume_refused", "rogue"} {
		res, err := g.Handle(context.Background(), sink.Call{Session: "s", Agent: testAgent, Server: "payments",
			Destination: f.up.URL, Tool: tool, Args: json.RawMessage(`{"to":"` + secret + `","amount":7}`)}, inv)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		acts = append(acts, res.ActID)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	if strings.Contains(all, secret) {
		t.Fatalf("an argument value reached the log:\n%s", all)
	}
	if !strings.Contains(all, "actionDigest") || !strings.Contains(all, acts[1]) {
		t.Fatalf("the log does not name the acts and their digests:\n%s", all)
	}
}
