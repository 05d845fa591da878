package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/envelope"
)

// memBackend holds moments in memory and records the resolutions written, each checked as a
// §7.3 resolution of its moment's envelope.
type memBackend struct {
	mu       sync.Mutex
	moments  []console.Moment
	written  map[string]*envelope.Resolution
	refusals map[string]string
}

func (b *memBackend) List(context.Context) ([]console.Moment, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []console.Moment
	for _, m := range b.moments {
		if b.written[m.ID] == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

func (b *memBackend) Resolve(_ context.Context, id string, raw []byte) (console.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if msg, ok := b.refusals[id]; ok {
		return console.Result{}, fmt.Errorf("%w: %s", console.ErrRefused, msg)
	}
	r, err := envelope.ParseResolution(raw)
	if err != nil {
		return console.Result{}, err
	}
	for _, m := range b.moments {
		if m.ID == id {
			if err := envelope.Verify(m.Envelope, r); err != nil {
				return console.Result{}, err
			}
			b.written[id] = r
			return console.Result{Kind: r.Kind, Message: id + " resolved: " + string(r.Kind)}, nil
		}
	}
	return console.Result{}, errors.New("no such moment")
}

// TestBrowserFakeBackend drives the page in headless Chromium against an in-memory backend:
// every invariant in the live DOM, the four resolutions clicked, a discarded envelope shown
// as a diagnostic, and a refusal shown in the refuser's words.
func TestBrowserFakeBackend(t *testing.T) {
	mk := func(synopsis string, d envelope.Draft) *envelope.Envelope {
		d.Synopsis = synopsis
		d.Findings = []string{"send_payment is FINANCIAL.", "The amount is within the cap."}
		d.Recommendations = []string{"Dry-run first.", "Then send."}
		d.Offer = "Ask for detail on any item."
		d.Stem = "How should the payment of invoice INV-2291 proceed?"
		d.Options = []envelope.DraftOption{
			{Label: "Send the payment", Reasoning: "Pays now, as asked.", Tool: "send_payment", Args: []byte(`{"amount":"2500.00"}`)},
			{Label: "Dry-run the payment", Reasoning: "Shows the effect without moving money.", Tool: "send_payment", Args: []byte(`{"amount":"2500.00","dry_run":true}`)},
			{Label: "Pay 100 now <script>alert(1)</script>", Reasoning: "Caps the amount.", Tool: "send_payment", Args: []byte(`{"amount":"100.00"}`)},
		}
		env, err := envelope.Build(d)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	envs := map[string]*envelope.Envelope{
		"bm-option":   mk("Send the payment of EUR 2500.00.", envelope.Draft{RecommendedIdx: 1}),
		"bm-answer":   mk("Answer the payment question.", envelope.Draft{CloseDialogue: true}),
		"bm-question": mk("Question the payment.", envelope.Draft{CloseFreeText: true, RecommendedIdx: 2}),
		"bm-declined": mk("Decline the payment.", envelope.Draft{CloseFreeText: true, CloseDialogue: true}),
		"bm-refused":  mk("A refused payment.", envelope.Draft{}),
	}
	b := &memBackend{written: map[string]*envelope.Resolution{}, refusals: map[string]string{
		"bm-refused": `admission webhook "vbindingmoment.actgate.io" denied the request: only alice@example.com may resolve`}}
	order := []string{"bm-option", "bm-answer", "bm-question", "bm-declined", "bm-refused"}
	acts := map[string]console.Act{}
	for _, id := range order {
		o, _ := envs[id].Option(0)
		acts[id] = console.Act{Name: "act-" + id, Tool: "send_payment", Server: "payments", Class: "FINANCIAL", ActionDigest: o.ActionDigest}
		b.moments = append(b.moments, console.Moment{ID: id, Principal: "alice", Agent: "billing-agent", Act: acts[id], Envelope: envs[id],
			Calls: browserCalls(envs[id]), AgentAuthored: true})
	}
	b.moments = append(b.moments, console.Moment{ID: "bm-malformed", Principal: "alice",
		Problems: []envelope.Problem{{Code: "BM_OPTION_COUNT", Path: "$.question.options", Message: "holds 1"}, {Code: "BM_RECOMMENDED_IDX", Path: "$.question.recommended_idx", Message: "is 3"}},
		Payload:  "Payment of invoice INV-2291 awaits a decision <b>now</b>."})

	con, err := console.New(console.Options{Backend: b, Principal: "alice", Surface: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := console.Listen(console.DefaultAddress)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: con}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := con.URL(ln)

	ctx := consoletest.Browser(t)
	if err := consoletest.Load(ctx, url); err != nil {
		t.Fatal(err)
	}
	for _, id := range order {
		consoletest.CheckInvariants(t, ctx, id, consoletest.Expect{Envelope: envs[id], Act: acts[id], Calls: browserCalls(envs[id]), AgentAuthored: true})
	}
	consoletest.CheckFallback(t, ctx, "bm-malformed", []string{"BM_OPTION_COUNT", "BM_RECOMMENDED_IDX"}, "awaits a decision <b>now</b>.")

	for _, tc := range []struct {
		id   string
		do   func() (consoletest.Outcome, error)
		want envelope.Resolution
	}{
		{"bm-option", func() (consoletest.Outcome, error) { return consoletest.Choose(ctx, "bm-option", 2) },
			envelope.Resolution{Kind: envelope.KindOption, OptionIdx: 2}},
		{"bm-answer", func() (consoletest.Outcome, error) {
			return consoletest.Answer(ctx, "bm-answer", "Pay half now.\nThe rest on delivery.")
		}, envelope.Resolution{Kind: envelope.KindAnswer, Answer: "Pay half now.\nThe rest on delivery."}},
		{"bm-question", func() (consoletest.Outcome, error) { return consoletest.RejectQuestion(ctx, "bm-question") },
			envelope.Resolution{Kind: envelope.KindQuestion}},
		{"bm-declined", func() (consoletest.Outcome, error) { return consoletest.Decline(ctx, "bm-declined") },
			envelope.Resolution{Kind: envelope.KindDeclined}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if err := consoletest.Load(ctx, url); err != nil {
				t.Fatal(err)
			}
			o, err := tc.do()
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != "resolved" {
				t.Fatalf("outcome %+v", o)
			}
			b.mu.Lock()
			got := b.written[tc.id]
			b.mu.Unlock()
			tc.want.EnvelopeDigest = envs[tc.id].Digest()
			if got == nil || *got != tc.want {
				t.Fatalf("written %+v, want %+v", got, tc.want)
			}
		})
	}
	if err := consoletest.Load(ctx, url); err != nil {
		t.Fatal(err)
	}
	o, err := consoletest.Choose(ctx, "bm-refused", 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != "refused" || !strings.Contains(o.Message, "denied the request: only alice@example.com may resolve") {
		t.Errorf("refusal shown as %+v", o)
	}
	consoletest.Screenshot(t, ctx, "console-fake-backend-refused")
}

// browserCalls is the calls of the options TestBrowserFakeBackend's envelopes are built from.
func browserCalls(env *envelope.Envelope) []envelope.Call {
	args := []string{`{"amount":"2500.00"}`, `{"amount":"2500.00","dry_run":true}`, `{"amount":"100.00"}`}
	out := make([]envelope.Call, env.NumOptions())
	for i := range out {
		out[i] = envelope.Call{Server: "payments", Destination: "https://payments.example/mcp", Tool: "send_payment", Args: []byte(args[i])}
	}
	return out
}
