package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// TestUnsettledActionNotRedispatched: after a dispatch of an action ends INDETERMINATE, a call
// of the same action — in another session, or through a gate rebuilt over the same journal as
// after a restart — is refused with EF_INDETERMINATE before anything is consumed, and the
// upstream is not called (action-evidence-boundary "prohibit a blind replay"; tool-use-binding
// §23). The service issues a fresh authority for every new act, so without this check a retry
// would run the action again. Once the action has an authoritative outcome it is an ordinary
// new act again.
func TestUnsettledActionNotRedispatched(t *testing.T) {
	f := newFixture(t)
	args := json.RawMessage(`{"amount":7,"to":"ACME"}`)
	callIn := func(g *Gate, session string, inv sink.Invoker) (sink.Result, error) {
		return g.Handle(context.Background(), sink.Call{Session: session, Agent: testAgent, Server: "payments",
			Destination: f.up.URL, Tool: "send_payment", Args: args}, inv)
	}
	invoked := 0
	counting := func(out sink.InvokeResult, err error) sink.Invoker {
		return func(context.Context, string) (sink.InvokeResult, error) { invoked++; return out, err }
	}
	unknown := counting(sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, errors.New("connection reset"))
	ok := counting(sink.InvokeResult{Outcome: sink.OutcomeExecuted, Result: json.RawMessage(`{"content":[]}`)}, nil)

	res, err := callIn(f.gate, "s1", unknown)
	if !errors.Is(err, sink.ErrUpstream) || res.State != journal.StateIndeterminate || invoked != 1 || f.stub.consumeCount() != 1 {
		t.Fatalf("first call: %+v %v, invoked %d, consumes %d", res, err, invoked, f.stub.consumeCount())
	}
	restarted, err := NewGate(f.options())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		g       *Gate
		session string
	}{
		{"same session", f.gate, "s1"},
		{"another session", f.gate, "s2"},
		{"after a restart", restarted, "s3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := callIn(tc.g, tc.session, ok)
			if err != nil || res.Allowed || res.Code != ef.EFIndeterminate || res.State != journal.StateIndeterminate {
				t.Fatalf("retry: %+v %v", res, err)
			}
			if invoked != 1 || f.stub.consumeCount() != 1 {
				t.Fatalf("retry reached the upstream (%d invocations) or consumed (%d consumes)", invoked, f.stub.consumeCount())
			}
		})
	}

	// Another action is not held up. Once it has an authoritative outcome, the same call in
	// the same session is its retry, answered from the journal (retries.go); in another
	// session it is a new act with its own authority (tool-use-binding §23).
	args = json.RawMessage(`{"amount":8,"to":"ACME"}`)
	if res, err := callIn(f.gate, "s1", ok); err != nil || !res.Allowed || res.State != journal.StateExecuted || res.Replayed {
		t.Fatalf("call of a new action: %+v %v", res, err)
	}
	if res, err := callIn(f.gate, "s1", ok); err != nil || !res.Allowed || !res.Replayed || res.Invoked || res.State != journal.StateExecuted {
		t.Fatalf("same-session retry of a settled action: %+v %v", res, err)
	}
	if res, err := callIn(f.gate, "s2", ok); err != nil || !res.Allowed || res.Replayed || res.State != journal.StateExecuted {
		t.Fatalf("another session's call of a settled action: %+v %v", res, err)
	}
	if invoked != 3 || f.stub.consumeCount() != 3 {
		t.Fatalf("invoked %d, consumes %d; want 3 and 3", invoked, f.stub.consumeCount())
	}
}

// TestUnsettledConcurrent: of two concurrent calls of one action, one dispatches and the other
// is refused EF_INDETERMINATE while the first is in flight.
func TestUnsettledConcurrent(t *testing.T) {
	f := newFixture(t)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(context.Context, string) (sink.InvokeResult, error) {
		close(entered)
		<-release
		return sink.InvokeResult{Outcome: sink.OutcomeExecuted, Result: json.RawMessage(`{"content":[]}`)}, nil
	}
	c := sink.Call{Session: "s1", Agent: testAgent, Server: "payments", Destination: f.up.URL, Tool: "send_payment",
		Args: json.RawMessage(`{"amount":9,"to":"ACME"}`)}
	done := make(chan sink.Result, 1)
	go func() {
		res, _ := f.gate.Handle(context.Background(), c, slow)
		done <- res
	}()
	<-entered
	c.Session = "s2"
	res, err := f.gate.Handle(context.Background(), c, func(context.Context, string) (sink.InvokeResult, error) {
		t.Error("the second call was invoked")
		return sink.InvokeResult{}, nil
	})
	close(release)
	if err != nil || res.Code != ef.EFIndeterminate {
		t.Fatalf("concurrent call: %+v %v", res, err)
	}
	if first := <-done; first.State != journal.StateExecuted || f.stub.consumeCount() != 1 {
		t.Fatalf("first call %+v, consumes %d", first, f.stub.consumeCount())
	}
}
