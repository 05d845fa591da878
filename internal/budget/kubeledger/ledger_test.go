package kubeledger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/budget"
	"github.com/actgate/actgate/test/envtest"
)

// counter counts the HTTP requests a client sends, by method, and the 409 answers.
type counter struct {
	rt                        http.RoundTripper
	gets, lists, writes, c409 atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/budgetledgers/"):
		c.gets.Add(1)
	case r.Method == http.MethodGet:
		c.lists.Add(1)
	default:
		c.writes.Add(1)
	}
	resp, err := c.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusConflict {
		c.c409.Add(1)
	}
	return resp, err
}

// rig is one API server with a namespace holding a ToolPolicy "payments".
type rig struct {
	e  *envtest.Env
	ns string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	e := envtest.Start(t)
	r := &rig{e: e, ns: e.Namespace(t)}
	p := &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "payments"},
		Spec: v1alpha1.ToolPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Servers: []v1alpha1.ToolServer{{
			Name: "pay", URL: "https://pay.example/mcp", CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: "creds", Key: "token"}}}},
	}
	if err := e.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return r
}

// ledger is a Ledger with its own client (its own connection and remembered objects, as an
// authority replica has) whose requests c counts.
func (r *rig) ledger(t testing.TB, c *counter, opts Options) *Namespaced {
	t.Helper()
	cfg := rest.CopyConfig(r.e.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the API server decides
	if c != nil {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c }
	}
	cl, err := client.New(cfg, client.Options{Scheme: r.e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	opts.Client = cl
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l.In(r.ns)
}

func (r *rig) get(t testing.TB, id string) *v1alpha1.BudgetLedger {
	t.Helper()
	o := &v1alpha1.BudgetLedger{}
	if err := r.e.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: id}, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// spec is a daily budget of at most calls calls and sum EUR at /amount.
func spec(t testing.TB, name string, calls int64, sum string) budget.Spec {
	t.Helper()
	w, err := budget.NewWindow(0, budget.CalendarDay, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s := budget.Spec{Name: name, Window: w, KeyBy: budget.KeyAgent, MaxCalls: calls, Pointer: "/amount", Unit: "EUR"}
	if sum != "" {
		d := budget.MustDecimal(sum)
		s.MaxSum = &d
	}
	return s
}

func (r *rig) charge(t testing.TB, s budget.Spec, amount string, now time.Time) budget.Charge {
	t.Helper()
	c, err := s.Charge(budget.Ref{Namespace: r.ns, Policy: "payments", Rule: "pay"}, "system:serviceaccount:"+r.ns+":agent",
		[]byte(`{"amount":"`+amount+`"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// One API server for the package's envtest tests: starting one costs tens of seconds on a
// shared machine.
func TestLedgerOnAPIServer(t *testing.T) {
	r := newRig(t)
	now := time.Now()
	clock := func() time.Time { return now }

	// 64 callers, each with its own Ledger (as 64 authority replicas would be), charge one
	// budget of 20 calls and 1000 EUR with 50 EUR each: exactly 20 are admitted, whatever the
	// interleaving; the rest are refused as exceeded (not as unavailable), and the ledger says
	// 20 calls, 1000 EUR. The compare-and-swap lost races (409s) and retried.
	t.Run("64 concurrent callers never overspend", func(t *testing.T) {
		s := spec(t, "daily", 20, "1000")
		c := r.charge(t, s, "50", now)
		var cnt counter
		var wg sync.WaitGroup
		var admitted, exceeded atomic.Int64
		errs := make(chan error, 64)
		start := make(chan struct{})
		for i := range 64 {
			l := r.ledger(t, &counter{}, Options{Now: clock, Timeout: time.Minute})
			if i == 0 {
				l = r.ledger(t, &cnt, Options{Now: clock, Timeout: time.Minute})
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := l.Charge(ctxT(t), fmt.Sprintf("op-%02d", i), []budget.Charge{c})
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, budget.ErrExceeded):
					exceeded.Add(1)
				default:
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("charge: %v", err)
		}
		if admitted.Load() != 20 || exceeded.Load() != 44 {
			t.Fatalf("admitted %d, exceeded %d; want 20 and 44", admitted.Load(), exceeded.Load())
		}
		o := r.get(t, c.Ledger)
		if len(o.Status.Ops) != 20 || o.Status.Spent != "20 calls, 1000 EUR" || o.Status.Remaining != "0 calls, 0 EUR" {
			t.Fatalf("ledger status: %d ops, spent %q, remaining %q", len(o.Status.Ops), o.Status.Spent, o.Status.Remaining)
		}
		u, err := r.ledger(t, nil, Options{Now: clock}).Usage(ctxT(t), c.Ledger)
		if err != nil {
			t.Fatal(err)
		}
		if n, sum := u.Spent(now); n != 20 || sum.String() != "1000" {
			t.Fatalf("usage %d calls, %s", n, sum)
		}
		if len(o.OwnerReferences) != 1 || o.OwnerReferences[0].Kind != "ToolPolicy" || o.OwnerReferences[0].Name != "payments" ||
			o.Labels[v1alpha1.LabelBudgetPolicy] != "payments" || o.Spec.Budget != "daily" || o.Spec.Rule != "pay" {
			t.Fatalf("ledger meta/spec: owners %+v labels %v spec %+v", o.OwnerReferences, o.Labels, o.Spec)
		}
		t.Logf("caller 0: %d gets, %d lists, %d writes, %d conflicts", cnt.gets.Load(), cnt.lists.Load(), cnt.writes.Load(), cnt.c409.Load())
	})

	t.Run("conflicting writers retry on a fresh read", func(t *testing.T) {
		s := spec(t, "conflicts", 0, "100")
		c := r.charge(t, s, "10", now)
		var ca, cb counter
		a := r.ledger(t, &ca, Options{Now: clock})
		b := r.ledger(t, &cb, Options{Now: clock})
		// a creates and remembers the ledger; b charges behind a's back; a's remembered copy is
		// stale, so its next write is refused 409 and made again on a quorum read.
		if err := a.Charge(ctxT(t), "a1", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if err := b.Charge(ctxT(t), "b1", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		before := ca.c409.Load()
		if err := a.Charge(ctxT(t), "a2", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if ca.c409.Load() != before+1 {
			t.Fatalf("a's stale write got %d conflicts, want 1", ca.c409.Load()-before)
		}
		// An uncontended charge on a remembered object is one write and no read.
		w, g := ca.writes.Load(), ca.gets.Load()
		if err := a.Charge(ctxT(t), "a3", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if ca.writes.Load()-w != 1 || ca.gets.Load()-g != 0 {
			t.Fatalf("uncontended charge: %d writes, %d gets; want 1 and 0", ca.writes.Load()-w, ca.gets.Load()-g)
		}
		if o := r.get(t, c.Ledger); o.Status.Spent != "4 calls, 40 EUR" || o.Status.Remaining != "60 EUR" {
			t.Fatalf("spent %q remaining %q", o.Status.Spent, o.Status.Remaining)
		}
		// A write that keeps losing is refused as unavailable, not let through: one attempt
		// on a stale remembered copy is one 409, and no attempt is left.
		one := r.ledger(t, nil, Options{Now: clock, MaxAttempts: 1})
		if err := one.Charge(ctxT(t), "o1", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if err := b.Charge(ctxT(t), "b2", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if err := one.Charge(ctxT(t), "o2", []budget.Charge{c}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a write out of attempts: %v, want unavailable", err)
		}
		if o := r.get(t, c.Ledger); o.Status.Spent != "6 calls, 60 EUR" {
			t.Fatalf("spent %q after the refused write", o.Status.Spent)
		}
	})

	t.Run("a charge is idempotent per operation and a refund gives back exactly it, once", func(t *testing.T) {
		s := spec(t, "refunds", 3, "")
		c := r.charge(t, s, "1", now)
		l := r.ledger(t, nil, Options{Now: clock})
		other := r.ledger(t, nil, Options{Now: clock})
		for range 2 {
			if err := l.Charge(ctxT(t), "r1", []budget.Charge{c}); err != nil {
				t.Fatal(err)
			}
		}
		if err := other.Charge(ctxT(t), "r1", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if err := l.Charge(ctxT(t), "r2", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		if o := r.get(t, c.Ledger); o.Status.Spent != "2 calls" {
			t.Fatalf("after r1 thrice and r2: spent %q, want 2 calls", o.Status.Spent)
		}
		// The refund runs on another replica (another Ledger): found by list.
		for range 2 {
			if err := other.Refund(ctxT(t), "r1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := other.Refund(ctxT(t), "never-charged"); err != nil {
			t.Fatal(err)
		}
		if err := l.RefundLedgers(ctxT(t), "r1", []string{c.Ledger, "0000000000000000000000000000000000000000000000000000000000000000"}); err != nil {
			t.Fatal(err)
		}
		o := r.get(t, c.Ledger)
		if o.Status.Spent != "1 calls" || o.Status.Remaining != "2 calls" || len(o.Status.Ops) != 1 || o.Status.Ops[0].ID != "r2" {
			t.Fatalf("after refunds: spent %q remaining %q ops %+v", o.Status.Spent, o.Status.Remaining, o.Status.Ops)
		}
		// l remembers the ledger from before the refunds: a refusal is never decided on it.
		for _, op := range []string{"r3", "r4"} {
			if err := l.Charge(ctxT(t), op, []budget.Charge{c}); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		if err := l.Charge(ctxT(t), "r5", []budget.Charge{c}); !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("fourth call of three: %v, want exceeded", err)
		}
		var ex *budget.ExceededError
		if err := l.Charge(ctxT(t), "r5", []budget.Charge{c}); !errors.As(err, &ex) || ex.SpentCalls != 3 || ex.MaxCalls != 3 {
			t.Fatalf("exceeded error %+v", ex)
		}
		// Settled (EXECUTED) charges are no longer given back.
		if err := other.Settle(ctxT(t), "r3"); err != nil {
			t.Fatal(err)
		}
		if err := l.Refund(ctxT(t), "r3"); err != nil {
			t.Fatal(err)
		}
		if o := r.get(t, c.Ledger); o.Status.Spent != "3 calls" || len(o.Status.Settled) != 1 {
			t.Fatalf("after settle and refund of r3: spent %q settled %+v", o.Status.Spent, o.Status.Settled)
		}
	})

	t.Run("all or none across budgets", func(t *testing.T) {
		// The count budget's ledger sorts first, so it is charged before the sum budget
		// refuses: what the all-or-none compensation gives back is observable.
		sum := spec(t, "sum", 0, "100")
		var count budget.Spec
		for i := range 64 {
			count = spec(t, fmt.Sprintf("count-%d", i), 100, "")
			if r.charge(t, count, "0", now).Ledger < r.charge(t, sum, "0", now).Ledger {
				break
			}
		}
		l := r.ledger(t, nil, Options{Now: clock})
		if err := l.Charge(ctxT(t), "big", []budget.Charge{r.charge(t, count, "80", now), r.charge(t, sum, "80", now)}); err != nil {
			t.Fatal(err)
		}
		cc, sc := r.charge(t, count, "30", now), r.charge(t, sum, "30", now)
		err := l.Charge(ctxT(t), "over", []budget.Charge{sc, cc})
		if !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("charge over the sum: %v", err)
		}
		if o := r.get(t, cc.Ledger); o.Status.Spent != "1 calls" || len(o.Status.Ops) != 1 {
			t.Fatalf("the count budget kept a share of the refused call: spent %q ops %+v", o.Status.Spent, o.Status.Ops)
		}
		if o := r.get(t, sc.Ledger); o.Status.Spent != "1 calls, 80 EUR" {
			t.Fatalf("sum budget spent %q", o.Status.Spent)
		}
		if err := l.Charge(ctxT(t), "dup", []budget.Charge{cc, cc}); !errors.Is(err, budget.ErrLimit) {
			t.Fatalf("two charges to one ledger: %v", err)
		}
		other := cc
		other.Namespace = "kube-system"
		if err := l.Charge(ctxT(t), "ns", []budget.Charge{other}); !errors.Is(err, ErrNamespace) {
			t.Fatalf("a charge for another namespace: %v", err)
		}
	})

	t.Run("a ledger holds a bounded number of charges individually", func(t *testing.T) {
		s := spec(t, "bounded", 0, "")
		s.MaxCalls = 1000
		c := r.charge(t, s, "0", now)
		l := r.ledger(t, nil, Options{Now: clock})
		for i := range v1alpha1.MaxLedgerOps + 5 {
			if err := l.Charge(ctxT(t), fmt.Sprintf("b%03d", i), []budget.Charge{c}); err != nil {
				t.Fatal(err)
			}
		}
		o := r.get(t, c.Ledger)
		if len(o.Status.Ops) != v1alpha1.MaxLedgerOps || o.Status.Spent != fmt.Sprintf("%d calls", v1alpha1.MaxLedgerOps+5) {
			t.Fatalf("%d ops held, spent %q", len(o.Status.Ops), o.Status.Spent)
		}
		// The oldest were folded: their refund gives nothing back (counted more, never less).
		if err := l.Refund(ctxT(t), "b000"); err != nil {
			t.Fatal(err)
		}
		if o := r.get(t, c.Ledger); o.Status.Spent != fmt.Sprintf("%d calls", v1alpha1.MaxLedgerOps+5) {
			t.Fatalf("after refunding a folded charge: %q", o.Status.Spent)
		}
	})

	t.Run("kubectl get budgetledgers shows policy, budget, key, spent, remaining and window end", func(t *testing.T) {
		out := r.e.Kubectl(t, "get", "bl", "-n", r.ns)
		for _, want := range []string{"POLICY", "BUDGET", "KEY", "SPENT", "REMAINING", "WINDOW-END", "daily", "20 calls, 1000 EUR", "0 calls, 0 EUR"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get bl lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("the ledger's spec cannot be rewritten", func(t *testing.T) {
		c := r.charge(t, spec(t, "daily", 20, "1000"), "50", now)
		o := r.get(t, c.Ledger)
		o.Spec.Key = "someone-else"
		if err := r.e.Client.Update(ctxT(t), o); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
			t.Fatalf("update of the spec: %v", err)
		}
	})

	t.Run("the window ends: nothing counts and the ledger is swept", func(t *testing.T) {
		s := spec(t, "sweep", 1, "")
		c := r.charge(t, s, "0", now)
		l := r.ledger(t, nil, Options{Now: clock})
		if err := l.Charge(ctxT(t), "s1", []budget.Charge{c}); err != nil {
			t.Fatal(err)
		}
		later := c.WindowEnd.Add(time.Second)
		next := r.ledger(t, nil, Options{Now: func() time.Time { return later }})
		n, err := next.Sweep(ctxT(t))
		if err != nil || n == 0 {
			t.Fatalf("sweep: %d, %v", n, err)
		}
		o := &v1alpha1.BudgetLedger{}
		if err := r.e.Client.Get(ctxT(t), client.ObjectKey{Namespace: r.ns, Name: c.Ledger}, o); err == nil {
			t.Fatalf("ledger %s survived its window", c.Ledger)
		}
		// The next day's charge counts in its own ledger.
		if err := next.Charge(ctxT(t), "s2", []budget.Charge{r.charge(t, s, "0", later)}); err != nil {
			t.Fatal(err)
		}
	})

	// No API server: every operation is refused as unavailable, nothing is admitted.
	t.Run("API server unreachable: refuse", func(t *testing.T) {
		cfg := rest.CopyConfig(r.e.Config)
		cfg.Host = "https://127.0.0.1:1"
		cl, err := client.New(cfg, client.Options{Scheme: r.e.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(Options{Client: cl, Now: clock, Timeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := r.charge(t, spec(t, "daily", 20, "1000"), "1", now)
		if err := l.In(r.ns).Charge(ctxT(t), "down", []budget.Charge{c}); !errors.Is(err, ErrUnavailable) || errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("charge without an API server: %v", err)
		}
		if err := l.In(r.ns).Refund(ctxT(t), "down"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("refund without an API server: %v", err)
		}
		if _, err := l.In(r.ns).Usage(ctxT(t), c.Ledger); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("usage without an API server: %v", err)
		}
		// A deadline that passes mid-operation is the same refusal.
		slow := r.ledger(t, nil, Options{Now: clock, Timeout: time.Nanosecond})
		if err := slow.Charge(ctxT(t), "slow", []budget.Charge{c}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("charge past its deadline: %v", err)
		}
	})
}
