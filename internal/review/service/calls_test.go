package service

import (
	"slices"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/envelope"
)

// TestMomentCalls: the calls a BindingMoment carries are the calls its options' digests were
// computed from (envelope.CheckCalls accepts them), with the rule's masks applied; an argument
// too large for the field is refused rather than cut.
func TestMomentCalls(t *testing.T) {
	x := testCall(t, `{"amount":9999,"to":"mallory-offshore-account"}`, `{"amount":10}`)
	d, err := gateDraft(x)
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := momentCalls(x, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].Args != `{"amount":9999,"to":"mallory-offshore-account"}` || calls[1].Args != `{"amount":10,"to":"mallory-offshore-account"}` ||
		calls[0].Server != "payments" || calls[0].Destination != "https://payments.example/mcp" || calls[0].Tool != "send_payment" {
		t.Fatalf("calls %+v", calls)
	}
	check := func(calls []envelope.Call) error { return envelope.CheckCalls(env, calls) }
	asEnvelope := func() []envelope.Call {
		out := make([]envelope.Call, len(calls))
		for i, c := range calls {
			out[i] = envelope.Call{Server: c.Server, Destination: c.Destination, Tool: c.Tool, Args: []byte(c.Args), Masked: c.Masked}
		}
		return out
	}
	if err := check(asEnvelope()); err != nil {
		t.Fatalf("the calls do not match the envelope they were written with: %v", err)
	}

	x.d.MaskArguments = []string{"/to"}
	calls, err = momentCalls(x, d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(calls[0].Args, "mallory") || !strings.Contains(calls[0].Args, argmask.Placeholder) || !slices.Equal(calls[0].Masked, []string{"/to"}) {
		t.Fatalf("masked call %+v", calls[0])
	}
	if err := check(asEnvelope()); err != nil {
		t.Fatalf("masked calls: %v", err)
	}

	big := testCall(t, `{"memo":"`+strings.Repeat("x", maxCallArgsBytes)+`"}`, `{"memo":"short"}`)
	bd, err := gateDraft(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := momentCalls(big, bd); err == nil {
		t.Fatal("a call over the field's bound was accepted")
	}
}
