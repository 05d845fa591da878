package authority

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/test/envtest"
)

var t0 = time.Now().UTC().Truncate(time.Millisecond)

func bindingIn(ns string, i int) authority.Binding {
	return authority.Binding{
		ActID:           fmt.Sprintf("act-%05d", i),
		ArgumentsDigest: digestOf(fmt.Sprintf("args-%d", i)),
		ActionDigest:    digestOf(fmt.Sprintf("action-%d", i)),
		Tool:            "send_payment",
		Destination:     "https://payments.example/mcp",
		SinkID:          "billing-agent-sink",
		PolicyEpoch:     "3",
		Namespace:       ns,
	}
}

// leaseOf reads an authority's Lease as the admin, bypassing the store.
func leaseOf(t testing.TB, env *envtest.Env, ns, id string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: id}, l); err != nil {
		t.Fatalf("reading lease %s/%s: %v", ns, id, err)
	}
	return l
}

type leaseFixture struct {
	env    *envtest.Env
	ns     string
	signer *authority.Signer
	clock  *clock
	store  *leasestore.Store
}

func newLeaseFixture(t *testing.T) *leaseFixture {
	env := apiServer(t)
	f := &leaseFixture{env: env, ns: env.Namespace(t), signer: newSigner(t), clock: newClock(t0)}
	f.store = newLeaseStore(t, env.Config, f.signer.Verifier(), f.clock.Now)
	return f
}

func (f *leaseFixture) issue(t testing.TB, i int, ttl time.Duration) authority.Authority {
	t.Helper()
	a, err := f.signer.Sign(bindingIn(f.ns, i), f.clock.Now(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Issue(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLeaseIssueGetConsume(t *testing.T) {
	f := newLeaseFixture(t)
	ctx := t.Context()
	a, err := f.signer.Sign(bindingIn(f.ns, 1), f.clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.Issue(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != authority.StateIssued || rec.Authority.ID != a.ID {
		t.Fatalf("Issue returned %+v", rec)
	}
	l := leaseOf(t, f.env, f.ns, a.ID)
	if l.Labels[leasestore.LabelManagedBy] != "actgate" || l.Labels[leasestore.LabelActID] != "act-00001" ||
		l.Labels[leasestore.LabelState] != leasestore.StateIssued || l.Spec.HolderIdentity != nil {
		t.Fatalf("issued Lease: labels %v, holder %v", l.Labels, l.Spec.HolderIdentity)
	}
	if l.Annotations[leasestore.AnnotationDestination] != a.Binding.Destination || l.Annotations[leasestore.AnnotationArgumentsDigest] != a.Binding.ArgumentsDigest {
		t.Fatalf("binding annotations %v", l.Annotations)
	}

	got, err := f.store.Get(ctx, f.ns, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != authority.StateIssued || got.Authority.Binding != a.Binding || !got.Authority.ExpiresAt.Equal(a.ExpiresAt) {
		t.Fatalf("Get returned %+v", got)
	}
	if _, err := f.store.Issue(ctx, a); !errors.Is(err, authority.ErrAlreadyIssued) {
		t.Fatalf("second Issue: %v, want ErrAlreadyIssued", err)
	}
	// Re-signing the same act and binding later names the same Lease: still refused, unchanged.
	f.clock.Advance(time.Second)
	again, err := f.signer.Sign(a.Binding, f.clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Issue(ctx, again); !errors.Is(err, authority.ErrAlreadyIssued) {
		t.Fatalf("re-issue for the same act: %v, want ErrAlreadyIssued", err)
	}
	if after := leaseOf(t, f.env, f.ns, a.ID); after.ResourceVersion != l.ResourceVersion {
		t.Fatal("a refused Issue changed the Lease")
	}

	c, err := f.store.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.State != authority.StateConsumed || c.ConsumedBy != "op-1" || !c.ConsumedAt.Equal(f.clock.Now()) {
		t.Fatalf("Consume returned %+v", c)
	}
	l = leaseOf(t, f.env, f.ns, a.ID)
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "op-1" || l.Labels[leasestore.LabelState] != leasestore.StateConsumed ||
		l.Spec.AcquireTime == nil || !l.Spec.AcquireTime.Time.Equal(f.clock.Now()) {
		t.Fatalf("consumed Lease: holder %v, labels %v, acquired %v", l.Spec.HolderIdentity, l.Labels, l.Spec.AcquireTime)
	}
	// T-C: a replay is denied and changes nothing.
	if _, err := f.store.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-2"}); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("second Consume: %v, want ErrConsumed", err)
	}
	if after := leaseOf(t, f.env, f.ns, a.ID); after.ResourceVersion != l.ResourceVersion || *after.Spec.HolderIdentity != "op-1" {
		t.Fatal("a replayed consume changed the Lease")
	}
	got, err = f.store.Get(ctx, f.ns, a.ID)
	if err != nil || got.State != authority.StateConsumed || got.ConsumedBy != "op-1" {
		t.Fatalf("Get after consume: %+v, %v", got, err)
	}

	// Missing Lease: deny.
	missing := authority.IDPrefix + strings.Repeat("0", 64)
	if _, err := f.store.Get(ctx, f.ns, missing); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("Get of a missing Lease: %v", err)
	}
	if _, err := f.store.Consume(ctx, missing, a.Binding, authority.Consumption{OperationID: "op-3"}); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("Consume of a missing Lease: %v", err)
	}
	// The same ID in another namespace is another (missing) Lease.
	other := f.env.Namespace(t)
	if _, err := f.store.Get(ctx, other, a.ID); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("Get in another namespace: %v", err)
	}
}

func TestLeaseIssueRefuses(t *testing.T) {
	f := newLeaseFixture(t)
	ctx := t.Context()
	untrusted := newSigner(t)
	byOther, err := untrusted.Sign(bindingIn(f.ns, 1), f.clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tampered, err := f.signer.Sign(bindingIn(f.ns, 2), f.clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tampered.Signature[0] ^= 1
	expired, err := f.signer.Sign(bindingIn(f.ns, 3), f.clock.Now().Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	noNamespace, err := f.signer.Sign(bindingIn("", 4), f.clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    authority.Authority
		want error
	}{
		{"untrusted key", byOther, authority.ErrBadSignature},
		{"tampered signature", tampered, authority.ErrBadSignature},
		{"already expired", expired, authority.ErrExpired},
		{"embedded-mode authority without a namespace", noNamespace, authority.ErrInvalid},
		{"malformed", authority.Authority{ID: "x"}, authority.ErrBadSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.store.Issue(ctx, tc.a); !errors.Is(err, tc.want) {
				t.Fatalf("Issue = %v, want %v", err, tc.want)
			}
		})
	}
	var list coordinationv1.LeaseList
	if err := f.env.Client.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("refused authorities were stored: %d Leases", len(list.Items))
	}
}

// TestLeaseConsumeRefusals: every refusal leaves the Lease exactly as it was (same
// resourceVersion), and afterwards the right sink can still consume it.
func TestLeaseConsumeRefusals(t *testing.T) {
	f := newLeaseFixture(t)
	ctx := t.Context()
	a := f.issue(t, 1, time.Minute)
	rv := leaseOf(t, f.env, f.ns, a.ID).ResourceVersion
	with := func(mod func(*authority.Binding)) authority.Binding { b := a.Binding; mod(&b); return b }
	other := f.env.Namespace(t)
	cases := []struct {
		name   string
		id     string
		expect authority.Binding
		opID   string
		want   error
	}{
		{"other arguments", a.ID, with(func(b *authority.Binding) { b.ArgumentsDigest = digestOf("x") }), "op-1", authority.ErrArgumentsMismatch},
		{"other action", a.ID, with(func(b *authority.Binding) { b.ActionDigest = digestOf("x") }), "op-1", authority.ErrArgumentsMismatch},
		{"swapped server (T-D)", a.ID, with(func(b *authority.Binding) { b.Destination = "https://evil.example/mcp" }), "op-1", authority.ErrDestinationMismatch},
		{"other sink", a.ID, with(func(b *authority.Binding) { b.SinkID = "sink-b" }), "op-1", authority.ErrSinkMismatch},
		{"other epoch", a.ID, with(func(b *authority.Binding) { b.PolicyEpoch = "4" }), "op-1", authority.ErrEpochMismatch},
		{"other act", a.ID, with(func(b *authority.Binding) { b.ActID = "act-other" }), "op-1", authority.ErrScopeMismatch},
		{"other tool", a.ID, with(func(b *authority.Binding) { b.Tool = "refund" }), "op-1", authority.ErrScopeMismatch},
		{"other namespace", a.ID, with(func(b *authority.Binding) { b.Namespace = other }), "op-1", authority.ErrNotFound},
		{"no namespace", a.ID, with(func(b *authority.Binding) { b.Namespace = "" }), "op-1", authority.ErrInvalid},
		{"sink expects nothing", a.ID, authority.Binding{}, "op-1", authority.ErrInvalid},
		{"unknown authority", authority.IDPrefix + strings.Repeat("0", 64), a.Binding, "op-1", authority.ErrNotFound},
		{"malformed ID", "../../etc", a.Binding, "op-1", authority.ErrInvalid},
		{"no operation ID", a.ID, a.Binding, "", authority.ErrInvalid},
		{"operation ID too long", a.ID, a.Binding, strings.Repeat("o", 300), authority.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.store.Consume(ctx, tc.id, tc.expect, authority.Consumption{OperationID: tc.opID}); !errors.Is(err, tc.want) {
				t.Fatalf("Consume = %v, want %v", err, tc.want)
			}
			if l := leaseOf(t, f.env, f.ns, a.ID); l.ResourceVersion != rv || l.Spec.HolderIdentity != nil {
				t.Fatalf("a refused consume changed the Lease (rv %s → %s)", rv, l.ResourceVersion)
			}
		})
	}
	if _, err := f.store.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-ok"}); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseExpiry(t *testing.T) {
	f := newLeaseFixture(t)
	ctx := t.Context()
	a := f.issue(t, 1, 10*time.Second)
	f.clock.Advance(10*time.Second - time.Millisecond)
	b := f.issue(t, 2, 10*time.Second) // issued now: still valid after the next step
	f.clock.Advance(time.Millisecond)  // exactly a's expiry
	if _, err := f.store.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-a"}); !errors.Is(err, authority.ErrExpired) {
		t.Fatalf("Consume at expiry: %v, want ErrExpired", err)
	}
	if l := leaseOf(t, f.env, f.ns, a.ID); l.Spec.HolderIdentity != nil {
		t.Fatal("an expired authority was consumed")
	}
	if _, err := f.store.Consume(ctx, b.ID, b.Binding, authority.Consumption{OperationID: "op-b"}); err != nil {
		t.Fatalf("unexpired authority: %v", err)
	}
}

// TestLeaseTamperedAnnotations: someone with write access to Leases edits an issued one; the
// store no longer trusts it and nothing is consumed.
func TestLeaseTamperedAnnotations(t *testing.T) {
	f := newLeaseFixture(t)
	ctx := t.Context()
	cases := []struct {
		name  string
		patch string
	}{
		{"destination swapped", fmt.Sprintf(`{"metadata":{"annotations":{%q:"https://evil.example/mcp"}}}`, leasestore.AnnotationDestination)},
		{"expiry extended", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, leasestore.AnnotationExpiresAt, t0.Add(24*time.Hour).Format("2006-01-02T15:04:05.000Z"))},
		{"arguments digest replaced", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, leasestore.AnnotationArgumentsDigest, digestOf("bigger payment"))},
		{"signature removed", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, leasestore.AnnotationSignature)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := f.issue(t, 10+i, time.Minute)
			l := leaseOf(t, f.env, f.ns, a.ID)
			if err := f.env.Client.Patch(ctx, l, client.RawPatch(types.MergePatchType, []byte(tc.patch))); err != nil {
				t.Fatal(err)
			}
			expect := a.Binding
			if tc.name == "destination swapped" {
				expect.Destination = "https://evil.example/mcp" // the sink was fooled too
			}
			_, err := f.store.Consume(ctx, a.ID, expect, authority.Consumption{OperationID: "op"})
			if !errors.Is(err, authority.ErrBadSignature) {
				t.Fatalf("Consume of a tampered Lease: %v, want ErrBadSignature", err)
			}
			if _, err := f.store.Get(ctx, f.ns, a.ID); !errors.Is(err, authority.ErrBadSignature) {
				t.Fatalf("Get of a tampered Lease: %v, want ErrBadSignature", err)
			}
			if l := leaseOf(t, f.env, f.ns, a.ID); l.Spec.HolderIdentity != nil {
				t.Fatal("a tampered authority was consumed")
			}
		})
	}
	t.Run("copied into another namespace", func(t *testing.T) {
		a := f.issue(t, 20, time.Minute)
		l := leaseOf(t, f.env, f.ns, a.ID)
		other := f.env.Namespace(t)
		cp := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: other, Labels: l.Labels, Annotations: l.Annotations}, Spec: l.Spec}
		if err := f.env.Client.Create(ctx, cp); err != nil {
			t.Fatal(err)
		}
		expect := a.Binding
		expect.Namespace = other
		if _, err := f.store.Consume(ctx, a.ID, expect, authority.Consumption{OperationID: "op"}); !errors.Is(err, authority.ErrBadSignature) {
			t.Fatalf("Consume of a copied Lease: %v, want ErrBadSignature", err)
		}
	})
}

// TestLeaseConsumeRace: single use under contention. Two store clients, as two authority
// replicas would have, with 32 goroutines each, every goroutine trying to consume every one of
// 500 authorities (in its own order). Exactly one consume per authority succeeds; every other
// attempt is ErrConsumed; and reading every Lease back shows it consumed by exactly the winner.
func TestLeaseConsumeRace(t *testing.T) {
	env := apiServer(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	signer := newSigner(t)
	const (
		replicas    = 2
		goroutines  = 32
		authorities = 500
	)
	stores := make([]*leasestore.Store, replicas)
	for i := range stores {
		stores[i] = newLeaseStore(t, env.Config, signer.Verifier(), nil)
	}

	auths := make([]authority.Authority, authorities)
	var issueWG sync.WaitGroup
	issueErr := make(chan error, authorities)
	next := atomic.Int64{}
	for range 16 {
		issueWG.Go(func() {
			for i := int(next.Add(1)) - 1; i < authorities; i = int(next.Add(1)) - 1 {
				a, err := signer.Sign(bindingIn(ns, i), time.Now(), 10*time.Minute)
				if err == nil {
					_, err = stores[i%replicas].Issue(ctx, a)
				}
				if err != nil {
					issueErr <- err
					return
				}
				auths[i] = a
			}
		})
	}
	issueWG.Wait()
	close(issueErr)
	for err := range issueErr {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		winners  = map[string]string{} // authority ID → operation ID
		wins     atomic.Int64
		attempts atomic.Int64
		others   []error
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for r := range replicas {
		for g := range goroutines {
			wg.Go(func() {
				order := rand.Perm(authorities)
				<-start
				for _, i := range order {
					a := auths[i]
					op := fmt.Sprintf("op-r%d-g%02d-a%03d", r, g, i)
					attempts.Add(1)
					_, err := stores[r].Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: op})
					mu.Lock()
					switch {
					case err == nil:
						wins.Add(1)
						if prev, dup := winners[a.ID]; dup {
							others = append(others, fmt.Errorf("%s consumed twice: by %s and %s", a.ID, prev, op))
						}
						winners[a.ID] = op
					case errors.Is(err, authority.ErrConsumed):
					default:
						others = append(others, err)
					}
					mu.Unlock()
				}
			})
		}
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d consume attempts by %d goroutines in %s", attempts.Load(), replicas*goroutines, time.Since(began).Round(time.Millisecond))
	for _, err := range others {
		t.Error(err)
	}
	if wins.Load() != authorities || len(winners) != authorities {
		t.Fatalf("%d successful consumes over %d authorities, want exactly %d", wins.Load(), len(winners), authorities)
	}

	// The state of the world: every Lease is consumed, by the one operation told it won.
	var list coordinationv1.LeaseList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{leasestore.LabelManagedBy: leasestore.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != authorities {
		t.Fatalf("%d Leases, want %d", len(list.Items), authorities)
	}
	for _, l := range list.Items {
		want, ok := winners[l.Name]
		if !ok {
			t.Errorf("Lease %s: no consume succeeded", l.Name)
			continue
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != want || l.Labels[leasestore.LabelState] != leasestore.StateConsumed {
			t.Errorf("Lease %s: holder %v, state %q; the winner was %s", l.Name, l.Spec.HolderIdentity, l.Labels[leasestore.LabelState], want)
		}
	}
}

// TestLeaseAPIServerUnavailable: a stopped API server, a slow one, and a caller's deadline all
// give errors that map to deny (ErrStoreUnavailable), never a success, and consume nothing.
func TestLeaseAPIServerUnavailable(t *testing.T) {
	t.Run("slow", func(t *testing.T) {
		env := apiServer(t)
		ns := env.Namespace(t)
		signer := newSigner(t)
		proxy, cfg := newSlowProxy(t, fastConfig(env.Config))
		s, err := leasestore.NewForConfig(cfg, leasestore.Options{Verifier: signer.Verifier(), Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		a, err := signer.Sign(bindingIn(ns, 1), time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Issue(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		proxy.SetDelay(time.Second)
		_, err = s.Consume(t.Context(), a.ID, a.Binding, authority.Consumption{OperationID: "op-slow"})
		if !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Consume through a slow API server: %v, want unavailable with a deadline", err)
		}
		if authority.CodeOf(err) != authority.CodeStoreUnavailable {
			t.Fatalf("code %s", authority.CodeOf(err))
		}
		proxy.SetDelay(0)
		if l := leaseOf(t, env, ns, a.ID); l.Spec.HolderIdentity != nil {
			t.Fatal("the timed-out consume took effect")
		}
	})

	t.Run("caller deadline passed", func(t *testing.T) {
		f := newLeaseFixture(t)
		a := f.issue(t, 1, time.Minute)
		dead, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := f.store.Consume(dead, a.ID, a.Binding, authority.Consumption{OperationID: "op"}); !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Consume with a cancelled context: %v", err)
		}
		if l := leaseOf(t, f.env, f.ns, a.ID); l.Spec.HolderIdentity != nil {
			t.Fatal("consumed with a cancelled context")
		}
	})

	t.Run("stopped", func(t *testing.T) {
		env := envtest.Start(t)
		ns := env.Namespace(t)
		signer := newSigner(t)
		s, err := leasestore.NewForConfig(fastConfig(env.Config), leasestore.Options{Verifier: signer.Verifier(), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		a, err := signer.Sign(bindingIn(ns, 1), time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Issue(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		b, err := signer.Sign(bindingIn(ns, 2), time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Stop(); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if _, err := s.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op"}); !errors.Is(err, authority.ErrStoreUnavailable) {
			t.Fatalf("Consume with the API server stopped: %v, want ErrStoreUnavailable", err)
		}
		if _, err := s.Get(ctx, ns, a.ID); !errors.Is(err, authority.ErrStoreUnavailable) {
			t.Fatalf("Get with the API server stopped: %v", err)
		}
		if _, err := s.Issue(ctx, b); !errors.Is(err, authority.ErrStoreUnavailable) {
			t.Fatalf("Issue with the API server stopped: %v", err)
		}
		if _, err := s.Sweep(ctx, "", time.Hour); !errors.Is(err, authority.ErrStoreUnavailable) {
			t.Fatalf("Sweep with the API server stopped: %v", err)
		}
	})
}

func TestLeaseSweep(t *testing.T) {
	f := newLeaseFixture(t)
	ctx := t.Context()
	retention := time.Hour
	consumed := f.issue(t, 1, time.Minute)
	expiring := f.issue(t, 2, time.Minute)
	live := f.issue(t, 3, 24*time.Hour)
	if _, err := f.store.Consume(ctx, consumed.ID, consumed.Binding, authority.Consumption{OperationID: "op"}); err != nil {
		t.Fatal(err)
	}
	// A Lease of someone else in the same namespace is never touched.
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader", Namespace: f.ns}}
	if err := f.env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	if n, err := f.store.Sweep(ctx, f.ns, retention); err != nil || n != 0 {
		t.Fatalf("sweep within retention deleted %d (%v)", n, err)
	}
	f.clock.Advance(retention + 2*time.Minute)
	n, err := f.store.Sweep(ctx, f.ns, retention)
	if err != nil || n != 2 {
		t.Fatalf("sweep past retention deleted %d (%v), want 2", n, err)
	}
	for _, id := range []string{consumed.ID, expiring.ID} {
		if err := f.env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: id}, &coordinationv1.Lease{}); err == nil {
			t.Errorf("Lease %s survived the sweep", id)
		}
	}
	leaseOf(t, f.env, f.ns, live.ID)
	leaseOf(t, f.env, f.ns, "leader")
	// A replay of the collected authority is still denied.
	if _, err := f.store.Consume(ctx, consumed.ID, consumed.Binding, authority.Consumption{OperationID: "op-late"}); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("consume after collection: %v, want ErrNotFound", err)
	}
}
