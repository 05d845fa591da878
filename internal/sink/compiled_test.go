package sink

import (
	"errors"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/policy"
)

// compiledFixture is the fixture with the real compiled ToolPolicy of testdata/policy.yaml.
func compiledFixture(t testing.TB, audit bool, edits ...func(*Options)) *fixture {
	t.Helper()
	spec, err := policy.LoadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if audit {
		spec.Mode = "Audit"
	}
	c, err := policy.Compile("default/sink-e2e", spec, 7)
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, func(o *Options) {
		o.Policy = CompiledPolicy(c)
		for _, edit := range edits {
			edit(o)
		}
	})
}

// TestCompiledPolicyEndToEnd runs the conformance scenarios of tool-use-binding §22 through the
// real policy engine: the upstream's own count is the assertion.
func TestCompiledPolicyEndToEnd(t *testing.T) {
	t.Run("T-A injected recipient", func(t *testing.T) {
		f := compiledFixture(t, false)
		c := call("s1", "tools", "email_send", `{"to":"attacker@ex.com"}`)
		c.Provenance = "retrieval"
		wantDeny(t, f.handle(c), ef.EFInstructionProvenanceFailure)
		c.Provenance = "user"
		if r := f.handle(c); !r.Invoked || r.State != journal.StateExecuted {
			t.Fatalf("user-instructed send: %+v", r)
		}
		if f.up.count("email_send") != 1 {
			t.Fatal("upstream count")
		}
	})
	t.Run("T-B parallel search and payout", func(t *testing.T) {
		f := compiledFixture(t, false)
		s := f.handle(call("s1", "tools", "search", `{"q":"x"}`))
		p := f.handle(call("s1", "pay", "payout_create", payoutArgs))
		if !s.Invoked {
			t.Fatalf("search: %+v", s)
		}
		wantDeny(t, p, ef.EFEscalationRequired)
		if p.Moment == nil || f.up.count("payout_create") != 0 {
			t.Fatalf("payout: %+v", p)
		}
	})
	t.Run("CEL cap", func(t *testing.T) {
		f := compiledFixture(t, false)
		wantDeny(t, f.handle(call("s1", "pay", "payout_create", `{"amount":500000,"to":"x"}`)), ef.EFPolicyDenied)
	})
	t.Run("T-C and escalation", func(t *testing.T) {
		f := compiledFixture(t, false)
		esc := f.escalatePayout("s1")
		if _, err := f.resolve(esc.Moment, "carol", "option", 0, ""); !errors.Is(err, ErrNotPrincipal) {
			t.Fatalf("carol: %v", err)
		}
		if _, err := f.resolve(esc.Moment, "bob", "option", 1, ""); err != nil {
			t.Fatal(err)
		}
		wantDeny(t, f.handle(call("s1", "pay", "payout_create", payoutArgs)), ef.EFEscalationRequired)
		capped := call("s1", "pay", "payout_create", `{"amount":100,"to":"acct-9"}`)
		if r := f.handle(capped); !r.Invoked || r.ActID != esc.ActID {
			t.Fatalf("capped: %+v", r)
		}
		if r := f.handle(capped); r.Invoked || !r.Replayed {
			t.Fatalf("repeat: %+v", r)
		}
		if f.up.count("payout_create") != 1 {
			t.Fatal("upstream count")
		}
	})
	t.Run("T-D swapped server", func(t *testing.T) {
		f := compiledFixture(t, false)
		c := call("s1", "tools", "ticket_create", `{"title":"x"}`)
		c.Destination = "https://tools.attacker.example/mcp"
		wantDeny(t, f.handle(c), ef.EFDestinationMismatch)
		if f.up.total() != 0 {
			t.Fatal("invoked")
		}
	})
	t.Run("T-E origin change", func(t *testing.T) {
		f := compiledFixture(t, false)
		submit := func(origin string) Call {
			c := call("s1", "browser", "computer_submit", `{"form":"checkout","submit":true}`)
			c.Destination = origin
			return c
		}
		esc := f.handle(submit("https://pay.example"))
		wantDeny(t, esc, ef.EFEscalationRequired)
		if _, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil {
			t.Fatal(err)
		}
		// An origin policy does not list: policy refuses it.
		wantDeny(t, f.handle(submit("https://pay.example-evil")), ef.EFDestinationMismatch)
		// An origin policy lists, but not the one the principal authorised: the authority does.
		wantDeny(t, f.handle(submit("https://shop.example")), ef.EFDestinationMismatch)
		if f.up.total() != 0 {
			t.Fatal("submitted at another origin")
		}
		if r := f.handle(submit("https://pay.example")); !r.Invoked {
			t.Fatalf("authorised origin: %+v", r)
		}
	})
	t.Run("two principals", func(t *testing.T) {
		f := compiledFixture(t, false)
		args := `{"amount":9,"iban":"DE00"}`
		esc := f.handle(call("s1", "pay", "wire_transfer", args))
		wantDeny(t, esc, ef.EFEscalationRequired)
		if rr, err := f.resolve(esc.Moment, "alice", "option", 0, ""); err != nil || !rr.Pending {
			t.Fatalf("alice: %+v %v", rr, err)
		}
		wantDeny(t, f.handle(call("s1", "pay", "wire_transfer", args)), ef.EFEscalationRequired)
		if rr, err := f.resolve(esc.Moment, "carol", "option", 0, ""); err != nil || rr.AuthorityID == "" {
			t.Fatalf("carol: %+v %v", rr, err)
		}
		if r := f.handle(call("s1", "pay", "wire_transfer", args)); !r.Invoked {
			t.Fatalf("wire: %+v", r)
		}
	})
	t.Run("audit", func(t *testing.T) {
		f := compiledFixture(t, true)
		r := f.handle(call("s1", "pay", "payout_create", payoutArgs))
		if !r.Invoked || r.AuditCode != ef.EFEscalationRequired {
			t.Fatalf("audit: %+v", r)
		}
	})
}

func TestPolicySinkMismatchRefused(t *testing.T) {
	spec, err := policy.LoadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Sink.ID = "another-sink"
	c, err := policy.Compile("default/sink-e2e", spec, 7)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	_, err = New(Options{SinkID: "sink-test", Policy: CompiledPolicy(c), Store: f.store, Journal: f.store,
		Signer: f.signer, IDs: f.gate.g.ids})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("New with a policy for another sink: %v", err)
	}
}
