package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func paymentsSpec(t *testing.T) Spec {
	t.Helper()
	w, err := NewWindow(0, CalendarDay, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	max := MustDecimal("10000")
	return Spec{Name: "daily", Window: w, KeyBy: KeyAgent, MaxCalls: 20, MaxSum: &max, Pointer: "/amount", Unit: "EUR"}
}

var ref = Ref{Namespace: "payments", Policy: "pay", Rule: "transfers"}

// TestUsageApply: charges add up exactly; an enforced charge that passes a limit is refused
// with the numbers and changes nothing; one approved by a person (Enforce false) is recorded
// anyway; Apply is idempotent per op; Refund gives back exactly that op; Settle makes it final.
func TestUsageApply(t *testing.T) {
	s := paymentsSpec(t)
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	charge := func(amount string) Charge {
		c, err := s.Charge(ref, "agent-a", []byte(`{"amount":"`+amount+`"}`), now)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var u Usage
	if err := u.Apply("op1", charge("9999.99"), now); err != nil {
		t.Fatal(err)
	}
	if err := u.Apply("op1", charge("9999.99"), now); err != nil {
		t.Fatal(err)
	}
	if n, sum := u.Spent(now); n != 1 || sum.String() != "9999.99" {
		t.Fatalf("after a repeated op: %d calls, %s spent; want 1, 9999.99", n, sum)
	}
	err := u.Apply("op2", charge("0.02"), now)
	var ex *ExceededError
	if !errors.As(err, &ex) || !errors.Is(err, ErrExceeded) || !ex.Sum || ex.Calls || ex.Spent.String() != "9999.99" || ex.AddAmount.String() != "0.02" ||
		ex.MaxSum.String() != "10000" || !ex.WindowEnd.Equal(time.Date(2026, 12, 8, 0, 0, 0, 0, s.Window.Location)) {
		t.Fatalf("0.02 over 9999.99 of 10000: %v (%+v)", err, ex)
	}
	if !strings.Contains(err.Error(), "9999.99 of 10000 EUR") {
		t.Errorf("message %q does not state the numbers", err)
	}
	if err := u.Apply("op2", charge("0.01"), now); err != nil {
		t.Fatalf("exactly the limit: %v", err)
	}
	over := charge("500")
	over.Enforce = false
	if err := u.Apply("op3", over, now); err != nil {
		t.Fatalf("a charge a person approved: %v", err)
	}
	if n, sum := u.Spent(now); n != 3 || sum.String() != "10500" {
		t.Fatalf("%d calls, %s spent; want 3, 10500", n, sum)
	}
	if !u.Refund("op3") || u.Refund("op3") {
		t.Fatal("Refund of op3 twice")
	}
	if !u.Settle("op1") || u.Refund("op1") {
		t.Fatal("a settled op was given back")
	}
	if n, sum := u.Spent(now); n != 2 || sum.String() != "10000" {
		t.Fatalf("%d calls, %s spent; want 2, 10000", n, sum)
	}
	// The next day is a new ledger; this one no longer counts.
	tomorrow := now.Add(24 * time.Hour)
	if n, _ := u.Spent(tomorrow); n != 0 || !u.Empty(tomorrow) {
		t.Fatalf("%d calls count the next day", n)
	}
	if c, _ := s.Charge(ref, "agent-a", []byte(`{"amount":1}`), tomorrow); c.Ledger == u.Ledger {
		t.Fatal("the next day charges the same ledger")
	}
}

func TestUsageCallLimitAndBounds(t *testing.T) {
	w, _ := NewWindow(time.Hour, "", "")
	s := Spec{Name: "calls", Window: w, MaxCalls: 3}
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var u Usage
	for i := 0; i < 3; i++ {
		c, err := s.Charge(ref, "k", nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Apply(fmt.Sprint("op", i), c, now); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := s.Charge(ref, "k", nil, now)
	var ex *ExceededError
	if err := u.Apply("op3", c, now); !errors.As(err, &ex) || !ex.Calls || ex.SpentCalls != 3 || ex.MaxCalls != 3 {
		t.Fatalf("a 4th call of 3: %v", err)
	}
	// A rolling hour later (plus a sub-bucket) the calls have left the window.
	later := now.Add(time.Hour + time.Minute)
	c, _ = s.Charge(ref, "k", nil, later)
	if err := u.Apply("op4", c, later); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	// Malformed charges and keys.
	for _, k := range []string{"", strings.Repeat("k", MaxKeyBytes+1), "a\nb", "a\u200eb", "\xff"} {
		if _, err := s.Charge(ref, k, nil, now); !errors.Is(err, ErrLimit) {
			t.Errorf("key %q: %v", k, err)
		}
	}
	sumSpec := paymentsSpec(t)
	if _, err := sumSpec.Charge(ref, "k", []byte(`{"amount":-5}`), now); !errors.Is(err, ErrLimit) || !errors.Is(err, ErrAmount) {
		t.Errorf("a negative amount: %v", err)
	}
	if err := u.Apply("", c, later); !errors.Is(err, ErrLimit) {
		t.Errorf("empty op: %v", err)
	}
	if err := u.Apply(strings.Repeat("o", MaxOpBytes+1), c, later); !errors.Is(err, ErrLimit) {
		t.Errorf("long op: %v", err)
	}
	other, _ := s.Charge(ref, "other", nil, later)
	if err := u.Apply("op9", other, later); !errors.Is(err, ErrLimit) {
		t.Errorf("another ledger's charge: %v", err)
	}
	// The unsettled-charge bound.
	big := Spec{Name: "big", Window: w, MaxCalls: 1 << 40}
	var v Usage
	for i := 0; i < MaxOpsPerLedger; i++ {
		c, _ := big.Charge(ref, "k", nil, now)
		if err := v.Apply(fmt.Sprint(i), c, now); err != nil {
			t.Fatal(err)
		}
	}
	c, _ = big.Charge(ref, "k", nil, now)
	if err := v.Apply("one-more", c, now); !errors.Is(err, ErrLimit) {
		t.Fatalf("past MaxOpsPerLedger: %v", err)
	}
	v.Settle("0")
	if err := v.Apply("one-more", c, now); err != nil {
		t.Fatalf("after a settle: %v", err)
	}
}

func TestDeriveKey(t *testing.T) {
	c := Caller{Agent: "system:serviceaccount:pay:bot", ServiceAccount: "pay/bot", Namespace: "pay", Policy: "p", Expression: "DE89370400440532013000"}
	for by, want := range map[string]string{"": c.Agent, KeyAgent: c.Agent, KeyServiceAccount: "pay/bot", KeyNamespace: "pay", KeyPolicy: "pay/p", KeyExpression: c.Expression} {
		if k, err := DeriveKey(by, c); err != nil || k != want {
			t.Errorf("DeriveKey(%q) = %q, %v; want %q", by, k, err, want)
		}
	}
	if k, err := DeriveKey(KeyServiceAccount, Caller{Agent: "alice"}); err != nil || k != "alice" {
		t.Errorf("standalone ServiceAccount key = %q, %v", k, err)
	}
	for _, bad := range []Caller{{}, {Expression: strings.Repeat("x", 257)}, {Expression: "a\x00b"}} {
		if _, err := DeriveKey(KeyExpression, bad); !errors.Is(err, ErrKey) {
			t.Errorf("DeriveKey(Expression, %q) = %v", bad.Expression, err)
		}
	}
	if _, err := DeriveKey("Pod", c); !errors.Is(err, ErrKey) {
		t.Error("an unknown kind")
	}
}

// TestMemoryConcurrentCharges: 64 concurrent callers charging one 20-call budget — exactly 20
// charges apply, the rest are refused ErrExceeded; a charge of two budgets is all or none; a
// refund frees exactly one place.
func TestMemoryConcurrentCharges(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	m := NewMemory(func() time.Time { return now })
	s := paymentsSpec(t)
	var ok, exceeded atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.Charge(ref, "agent-a", []byte(`{"amount":100}`), now)
			if err != nil {
				t.Error(err)
				return
			}
			switch err := m.Charge(context.Background(), fmt.Sprint("op", i), []Charge{c}); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrExceeded):
				exceeded.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 20 || exceeded.Load() != 44 {
		t.Fatalf("%d charged, %d exceeded; want 20, 44", ok.Load(), exceeded.Load())
	}
	c, _ := s.Charge(ref, "agent-a", []byte(`{"amount":1}`), now)
	u, err := m.Usage(context.Background(), c.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if n, sum := u.Spent(now); n != 20 || sum.String() != "2000" {
		t.Fatalf("usage %d calls %s; want 20, 2000", n, sum)
	}
	// All or none: a second budget that fits does not keep a charge when the first refuses.
	w, _ := NewWindow(time.Hour, "", "")
	wide := Spec{Name: "wide", Window: w, MaxCalls: 100}
	c1, _ := wide.Charge(ref, "agent-a", nil, now)
	c2, _ := s.Charge(ref, "agent-a", []byte(`{"amount":1}`), now)
	if err := m.Charge(context.Background(), "both", []Charge{c1, c2}); !errors.Is(err, ErrExceeded) {
		t.Fatalf("two budgets, one full: %v", err)
	}
	if u, _ := m.Usage(context.Background(), c1.Ledger); len(u.Ops) != 0 {
		t.Fatal("the budget that fitted kept a charge of a refused operation")
	}
	if err := m.Refund(context.Background(), "never-charged"); err != nil {
		t.Fatal(err)
	}
	u, _ = m.Usage(context.Background(), c.Ledger)
	if err := m.Refund(context.Background(), u.Ops[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Charge(context.Background(), "after-refund", []Charge{c2}); err != nil {
		t.Fatalf("after a refund: %v", err)
	}
	if err := m.Charge(context.Background(), "after-refund-2", []Charge{c2}); !errors.Is(err, ErrExceeded) {
		t.Fatalf("a refund freed more than one place: %v", err)
	}
}

func TestMemoryKeyBound(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	m := NewMemory(func() time.Time { return now })
	w, _ := NewWindow(0, CalendarDay, "")
	s := Spec{Name: "per-payee", Window: w, KeyBy: KeyExpression, MaxCalls: 5}
	for i := 0; i < MaxKeysPerBudget; i++ {
		c, _ := s.Charge(ref, fmt.Sprint("payee-", i), nil, now)
		if err := m.Charge(context.Background(), fmt.Sprint("op", i), []Charge{c}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := s.Charge(ref, "payee-new", nil, now)
	if err := m.Charge(context.Background(), "op-new", []Charge{c}); !errors.Is(err, ErrLimit) {
		t.Fatalf("past MaxKeysPerBudget: %v", err)
	}
	// An existing key still charges; the next day the keys are free again.
	c, _ = s.Charge(ref, "payee-1", nil, now)
	if err := m.Charge(context.Background(), "op-again", []Charge{c}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(24 * time.Hour)
	c, _ = s.Charge(ref, "payee-new", nil, now)
	if err := m.Charge(context.Background(), "op-next-day", []Charge{c}); err != nil {
		t.Fatalf("the next day: %v", err)
	}
	if n := len(m.All()); n != 1 {
		t.Fatalf("%d ledgers held the next day; want 1", n)
	}
}

// TestChargeCall: the amount is read from the raw and the canonical arguments and must agree
// exactly; a number a double cannot hold, or an exponent, is refused (ErrLimit), never counted.
func TestChargeCall(t *testing.T) {
	s := paymentsSpec(t)
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		raw, canon string
		ok         bool
	}{
		{`{"amount":12.50}`, `{"amount":12.5}`, true},
		{`{"amount":"12.50"}`, `{"amount":"12.50"}`, true},
		{`{"amount":1000}`, `{"amount":1000}`, true},
		{`{"amount":1e3}`, `{"amount":1000}`, false},
		{`{"amount":0.30000000000000000001}`, `{"amount":0.3}`, false},
		{`{"amount":12345678901234567.89}`, `{"amount":12345678901234568}`, false},
	} {
		_, err := s.ChargeCall(ref, "k", []byte(c.raw), []byte(c.canon), now)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrLimit)) {
			t.Errorf("ChargeCall(%s, %s) = %v; ok %v", c.raw, c.canon, err, c.ok)
		}
	}
}

// TestJudgeAndFinding: a Deny budget refuses whatever else is exceeded; Escalate budgets alone
// escalate, each stated for the principal with the numbers.
func TestJudgeAndFinding(t *testing.T) {
	esc := paymentsSpec(t)
	esc.Escalate = true
	deny := Spec{Name: "per-payee", Window: esc.Window, MaxCalls: 3}
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	m := NewMemory(func() time.Time { return now })
	prior := esc.PriorSpending(ref, "agent-a", 20, MustDecimal("9800"), now)
	if err := m.Charge(context.Background(), "prior", []Charge{prior}); err != nil {
		t.Fatal(err)
	}
	c1, _ := esc.Charge(ref, "agent-a", []byte(`{"amount":500}`), now)
	c2, _ := deny.Charge(ref, "acct-2", nil, now)
	over, err := Assess(context.Background(), m, []Charge{c1, c2}, now)
	if err != nil || len(over) != 1 {
		t.Fatalf("Assess: %v, %v", over, err)
	}
	d, e := Judge([]Spec{esc, deny}, over)
	if d != nil || len(e) != 1 {
		t.Fatalf("Judge: %v %v", d, e)
	}
	f := Finding(e[0])
	for _, want := range []string{"Budget daily", "20 of 20 calls", "9800 of 10000 EUR", "this call adds 1 call and 500 EUR", "2026-12-08T00:00:00+01:00"} {
		if !strings.Contains(f, want) {
			t.Errorf("finding %q lacks %q", f, want)
		}
	}
	if err := m.Charge(context.Background(), "prior-2", []Charge{deny.PriorSpending(ref, "acct-2", 3, Decimal{}, now)}); err != nil {
		t.Fatal(err)
	}
	over, _ = Assess(context.Background(), m, []Charge{c1, c2}, now)
	if d, e := Judge([]Spec{esc, deny}, over); d == nil || d.Budget != "per-payee" || e != nil {
		t.Fatalf("with a Deny budget exceeded: %v %v", d, e)
	}
}
