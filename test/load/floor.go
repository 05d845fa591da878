package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
)

// The API floor (docs/performance.md "The API floor under the protected path") is the mix's
// operations with only the API writes the protected path cannot do without, made by the
// generator's workers straight against the sidecar target's API server, with no sink, no
// authority service, no upstream and no MCP: what the API server and etcd alone give the mix
// at that concurrency on this machine. The writes per operation:
//
//   - hot, and a replay: none (the sidecar answers both in the pod);
//   - permit: the Act's create carrying the consumed authority (on the call's path), its
//     outcome's status patch (off it, 8 in flight as the sidecar's outbox);
//   - escalation, and the substituted payee that escalates anew: the Act's create and the
//     BindingMoment's create;
//   - the principal's resolution: the BindingMoment's update;
//   - the granted retry: the grant's compare-and-swap on the escalated Act and the call's
//     Act's create carrying it consumed (on the call's path), the outcome's status patch (off it).
//
// The objects are copies of the ones the sink's run just wrote, so they are the same size and
// pass the same schema and validation rules.

// FloorReport is the API floor of one run.
type FloorReport struct {
	Elapsed    float64            `json:"elapsed_s"`
	Calls      int                `json:"calls"` // the tool calls the operations stand for, counted as the sink's run counts them
	Throughput float64            `json:"calls_per_s"`
	Writes     int64              `json:"writes"`   // API requests made, every one a write
	Acts       int                `json:"acts"`     // Acts in the floor's namespace after it, listed
	Executed   int                `json:"executed"` // of those, the ones whose outcome was written
	Series     map[string]Latency `json:"series"`   // permit, escalate, resolve, granted, substitute
	// ProtectedP99 is the p99 over every protected call of the floor (permit, escalate,
	// granted, substitute).
	ProtectedP99 float64 `json:"protected_p99_ms"`
}

// floorTemplates are the objects of a sink's run the floor copies.
type floorTemplates struct {
	permitAct    *v1alpha1.Act           // an email_send Act with its permit record and outcome
	escalatedAct *v1alpha1.Act           // a send_payment Act that escalated
	grantedAct   *v1alpha1.Act           // a send_payment Act with its grant consumed and outcome
	moment       *v1alpha1.BindingMoment // a resolved BindingMoment
}

// floorTemplatesIn picks the templates from the Acts and BindingMoments of namespace ns.
func floorTemplatesIn(ctx context.Context, c client.Client, ns string) (floorTemplates, error) {
	var t floorTemplates
	var acts v1alpha1.ActList
	if err := c.List(ctx, &acts, client.InNamespace(ns)); err != nil {
		return t, err
	}
	for i := range acts.Items {
		a := &acts.Items[i]
		permitted := a.Annotations[v1alpha1.AnnotationActPermitOperation] != "" && a.Status.State == v1alpha1.ActStateExecuted
		switch {
		case a.Spec.Tool == toolEmail && permitted && t.permitAct == nil:
			t.permitAct = a
		case a.Spec.Tool == toolPayment && permitted && t.grantedAct == nil:
			t.grantedAct = a
		case a.Spec.Tool == toolPayment && len(a.Status.BindingMomentRefs) > 0 && t.escalatedAct == nil:
			t.escalatedAct = a
		}
	}
	var moments v1alpha1.BindingMomentList
	if err := c.List(ctx, &moments, client.InNamespace(ns)); err != nil {
		return t, err
	}
	for i := range moments.Items {
		if moments.Items[i].Spec.Resolution != nil {
			t.moment = &moments.Items[i]
			break
		}
	}
	return t, nil
}

// needs says which template the kind lacks, "" when it has them all.
func (t floorTemplates) needs(k Kind) string {
	switch {
	case (k == KindPermit || k == KindReplay) && t.permitAct == nil:
		return "an executed email_send Act"
	case (k == KindEscalate || k == KindSubstitute) && (t.escalatedAct == nil || t.moment == nil):
		return "an escalated send_payment Act and a resolved BindingMoment"
	case k == KindEscalate && t.grantedAct == nil:
		return "an executed send_payment Act"
	}
	return ""
}

// floorPhase is one floor run's shared state.
type floorPhase struct {
	c      client.Client
	ns     string
	t      floorTemplates
	writes atomic.Int64
	outbox chan outcome
	errMu  sync.Mutex
	err    error
}

// outcome is an Act of the floor and the status its template ended in.
type outcome struct {
	act    *v1alpha1.Act
	status *v1alpha1.ActStatus
}

// floorWorker is one worker of the floor.
type floorWorker struct {
	p          *floorPhase
	id, seq    int
	rnd        *rand.Rand
	lat        latencies
	calls      int
	hasPermit  bool
	hasGranted bool
	done       int
}

// runFloor runs the floor of mix at concurrency n for d against the API server of cfg, in a
// namespace of its own, with the objects of the sink's run in namespace from as templates.
// The workers draw the operations of the sink's run (the same seed and kinds).
func runFloor(ctx context.Context, cfg *rest.Config, sch *runtime.Scheme, from string, n int, d time.Duration, mix Mix, seed uint64) (*FloorReport, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return nil, err
	}
	t, err := floorTemplatesIn(ctx, c, from)
	if err != nil {
		return nil, err
	}
	for _, k := range mix.kinds() {
		if need := t.needs(k); need != "" {
			return nil, fmt.Errorf("floor: the sink's run left no template for %s (%s)", k, need)
		}
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "floor-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		return nil, err
	}
	p := &floorPhase{c: c, ns: nsObj.Name, t: t, outbox: make(chan outcome, 4096)}
	var reporters sync.WaitGroup
	for range 8 {
		reporters.Go(func() {
			for o := range p.outbox {
				p.report(ctx, o)
			}
		})
	}
	workers := make([]*floorWorker, n)
	for i := range workers {
		workers[i] = &floorWorker{p: p, id: i, rnd: rand.New(rand.NewPCG(seed, uint64(i))), lat: latencies{}}
	}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for (time.Now().Before(deadline) || w.done < len(mix.firstKinds(w.id, n))) && ctx.Err() == nil && p.failed() == nil {
				w.op(ctx, mix.nextKind(w.rnd, w.id, n, w.done))
				w.done++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(p.outbox)
	reporters.Wait()
	if err := p.failed(); err != nil {
		return nil, err
	}
	rep := &FloorReport{Elapsed: elapsed.Seconds(), Writes: p.writes.Load()}
	var acts v1alpha1.ActList
	if err := c.List(ctx, &acts, client.InNamespace(p.ns)); err != nil {
		return nil, err
	}
	rep.Acts = len(acts.Items)
	for _, a := range acts.Items {
		if a.Status.State == v1alpha1.ActStateExecuted {
			rep.Executed++
		}
	}
	all := latencies{}
	var protected []time.Duration
	for _, w := range workers {
		rep.Calls += w.calls
		for s, ds := range w.lat {
			all[s] = append(all[s], ds...)
			if s != seriesResolve {
				protected = append(protected, ds...)
			}
		}
	}
	rep.Throughput = float64(rep.Calls) / elapsed.Seconds()
	rep.Series = summarize(all)
	slices.Sort(protected)
	rep.ProtectedP99 = ms(percentile(protected, 99))
	return rep, nil
}

func (p *floorPhase) fail(err error) {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

func (p *floorPhase) failed() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

// createAct creates a copy of the template tmpl named name, without its status.
func (p *floorPhase) createAct(ctx context.Context, tmpl *v1alpha1.Act, name string) (*v1alpha1.Act, error) {
	a := &v1alpha1.Act{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: maps.Clone(tmpl.Labels), Annotations: maps.Clone(tmpl.Annotations)},
		Spec: *tmpl.Spec.DeepCopy()}
	a.Spec.ActID = name
	p.writes.Add(1)
	if err := p.c.Create(ctx, a, client.FieldOwner("actgate-load-floor")); err != nil {
		return nil, fmt.Errorf("floor: create Act: %w", err)
	}
	return a, nil
}

// report writes the outcome of an Act as the outcome Report does: a status merge patch
// guarded by the resourceVersion.
func (p *floorPhase) report(ctx context.Context, o outcome) {
	a := o.act
	orig := a.DeepCopy()
	a.Status = *o.status.DeepCopy()
	p.writes.Add(1)
	if err := p.c.Status().Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner("actgate-load-floor")); err != nil {
		p.fail(fmt.Errorf("floor: outcome of Act %s: %w", a.Name, err))
	}
}

func (w *floorWorker) name(kind string) string {
	w.seq++
	return fmt.Sprintf("floor-%s-w%d-%d", kind, w.id, w.seq)
}

// timed records f's latency under series when it succeeds.
func (w *floorWorker) timed(series string, f func() error) bool {
	start := time.Now()
	err := f()
	if err != nil {
		w.p.fail(err)
		return false
	}
	w.lat[series] = append(w.lat[series], time.Since(start))
	return true
}

func (w *floorWorker) op(ctx context.Context, kind Kind) {
	switch kind {
	case KindHot:
		w.calls++
	case KindPermit:
		w.permit(ctx)
	case KindReplay:
		if !w.hasPermit && !w.hasGranted && !w.permit(ctx) {
			return
		}
		for _, has := range []bool{w.hasPermit, w.hasGranted} {
			if has {
				w.calls++
			}
		}
	case KindEscalate:
		esc, ok := w.escalateAndResolve(ctx, seriesEscalate)
		if !ok {
			return
		}
		w.calls++
		w.timed(seriesGranted, func() error {
			orig := esc.DeepCopy()
			esc.Annotations = maps.Clone(esc.Annotations)
			if esc.Annotations == nil {
				esc.Annotations = map[string]string{}
			}
			esc.Annotations["actgate.io/load-floor-grant"] = esc.Name
			w.p.writes.Add(1)
			if err := w.p.c.Patch(ctx, esc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner("actgate-load-floor")); err != nil {
				return fmt.Errorf("floor: grant on Act %s: %w", esc.Name, err)
			}
			a, err := w.p.createAct(ctx, w.p.t.grantedAct, w.name("g"))
			if err == nil {
				w.p.outbox <- outcome{a, &w.p.t.grantedAct.Status}
				w.hasGranted = true
			}
			return err
		})
	case KindSubstitute:
		if _, ok := w.escalateAndResolve(ctx, seriesEscalate); !ok {
			return
		}
		w.calls++
		w.timed(seriesSubstitute, func() error {
			_, _, err := w.escalation(ctx)
			return err
		})
	}
}

func (w *floorWorker) permit(ctx context.Context) bool {
	w.calls++
	return w.timed(seriesPermit, func() error {
		a, err := w.p.createAct(ctx, w.p.t.permitAct, w.name("p"))
		if err == nil {
			w.p.outbox <- outcome{a, &w.p.t.permitAct.Status}
			w.hasPermit = true
		}
		return err
	})
}

// escalation creates an escalated Act and its BindingMoment, unresolved.
func (w *floorWorker) escalation(ctx context.Context) (*v1alpha1.Act, *v1alpha1.BindingMoment, error) {
	a, err := w.p.createAct(ctx, w.p.t.escalatedAct, w.name("e"))
	if err != nil {
		return nil, nil, err
	}
	tm := w.p.t.moment
	m := &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Name: w.name("m"), Namespace: w.p.ns, Labels: maps.Clone(tm.Labels), Annotations: maps.Clone(tm.Annotations)},
		Spec: *tm.Spec.DeepCopy()}
	m.Spec.ActRef = v1alpha1.LocalObjectReference{Name: a.Name}
	m.Spec.Resolution = nil
	w.p.writes.Add(1)
	if err := w.p.c.Create(ctx, m, client.FieldOwner("actgate-load-floor")); err != nil {
		return nil, nil, fmt.Errorf("floor: create BindingMoment: %w", err)
	}
	return a, m, nil
}

// escalateAndResolve is the escalation (timed as series) and the principal's resolution; it
// returns the escalated Act as created (the grant's compare-and-swap is on that
// resourceVersion: nothing wrote the Act since).
func (w *floorWorker) escalateAndResolve(ctx context.Context, series string) (*v1alpha1.Act, bool) {
	w.calls++
	var a *v1alpha1.Act
	var m *v1alpha1.BindingMoment
	if !w.timed(series, func() (err error) { a, m, err = w.escalation(ctx); return err }) {
		return nil, false
	}
	ok := w.timed(seriesResolve, func() error {
		m.Spec.Resolution = w.p.t.moment.Spec.Resolution.DeepCopy()
		w.p.writes.Add(1)
		if err := w.p.c.Update(ctx, m, client.FieldOwner("actgate-load-floor")); err != nil {
			return fmt.Errorf("floor: resolve BindingMoment %s: %w", m.Name, err)
		}
		return nil
	})
	return a, ok
}
