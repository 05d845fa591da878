package sink

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// TestLogsCarryDigestsNotArguments runs every kind of decision with a logger at full verbosity
// and checks that no argument value reaches the log (tool-use-binding §29).
func TestLogsCarryDigestsNotArguments(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.NewJSON(func(obj string) {
		mu.Lock()
		lines = append(lines, obj)
		mu.Unlock()
	}, funcr.Options{Verbosity: 10})
	f := newFixture(t, func(o *Options) { o.Log = logger })
	const secret = "SECRET-4242"
	args := `{"to":"` + secret + `","amount":5000}`
	f.handle(call("s1", "tools", "search", `{"q":"`+secret+`"}`))
	f.handle(call("s1", "tools", "ticket_create", `{"title":"`+secret+`"}`))
	f.handle(call("s1", "tools", "delete_all", `{"path":"`+secret+`"}`))
	c := call("s1", "tools", "email_send", `{"to":"`+secret+`"}`)
	c.Provenance = "retrieval"
	f.handle(c)
	esc := f.handle(call("s1", "pay", "payout_create", args))
	if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
		t.Fatal(err)
	}
	run := f.handle(call("s1", "pay", "payout_create", args))
	f.handle(call("s1", "pay", "payout_create", args))
	p := proposal(
		Option{Label: "Pay", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":1,"to":"` + secret + `"}`)},
		Option{Label: "Pay more", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":2,"to":"` + secret + `"}`)})
	if _, err := f.gate.RequestMoment(context.Background(), "s1", agentID, p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	if strings.Contains(all, secret) {
		t.Fatalf("an argument value reached the log:\n%s", all)
	}
	if !strings.Contains(all, run.ActID) || !strings.Contains(all, "actionDigest") {
		t.Fatalf("the log does not name acts and digests:\n%s", all)
	}
}
