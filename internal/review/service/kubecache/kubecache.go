// Package kubecache holds the informers the authority service (internal/review/service) reads
// to find a caller, its policy and its session's binding moments: ToolPolicies cluster-wide,
// Pods and BindingMoments per governed namespace. It never refuses: a miss is read from the API
// server by the service. Recent and RecentMoments remember the service's own writes for the
// few seconds a read may not show them yet.
package kubecache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Cache serves the reads a review makes to find its caller and its session's binding
// moments: ToolPolicies from one informer across the cluster, and Pods and BindingMoments from
// informers per namespace that holds a ToolPolicy (the service may read them only there:
// NamespacePolicyRules, bound by the manager). A namespace's informers start when the first
// ToolPolicy of its namespace appears and stop when the last one goes. Pods are cached
// stripped to what a review reads (name, namespace, UID, labels, service account);
// BindingMoments without their managedFields, indexed by session and by escalation label, so
// a review reads only the moments of its session or action.
//
// A pod the cache does not hold (just created, or its namespace's informer not synced yet) is
// read from the API server instead: the cache saves requests, it never refuses a caller the
// API server would accept. BindingMoments are listed from the API server's watch cache while
// the namespace's moment informer has not synced. What single use rests on, the Act a
// Permit creates, the authority Lease and the Act that records a grant, is never read from
// it.
//
// Every change of a ToolPolicy, and every pod added, deleted or relabelled, wakes the
// policy-endpoint watchers of its namespace.
type Cache struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	log    logr.Logger

	policies crcache.Cache
	// momentLabels are the BindingMoment labels the moment informers index, each under its
	// own name (the service's LabelSession and LabelEscalation).
	momentLabels []string

	mu      sync.Mutex
	ctx     context.Context // Start's; nil before Start
	pods    map[string]*podInformer
	changed func(namespace string)
	// policiesSynced is the ToolPolicy informer's HasSynced; nil before Start.
	policiesSynced func() bool
}

// podInformer is a namespace's informers: its pods and its BindingMoments.
type podInformer struct {
	cache         crcache.Cache
	synced        func() bool
	momentsSynced func() bool
	cancel        context.CancelFunc
}

// New returns a Cache reading through cfg, whose user needs list and watch on ToolPolicies
// cluster-wide and on pods where a ToolPolicy is (the service's PolicyRules and
// NamespacePolicyRules). scheme must hold client-go's types and actgate's v1alpha1; the
// BindingMoment informers index the labels momentLabels. Start it before the Service serves.
func New(cfg *rest.Config, scheme *runtime.Scheme, log logr.Logger, momentLabels ...string) (*Cache, error) {
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	policies, err := crcache.New(cfg, crcache.Options{
		Scheme:                      scheme,
		Mapper:                      staticMapper(),
		ByObject:                    map[client.Object]crcache.ByObject{&v1alpha1.ToolPolicy{}: {}},
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("service: ToolPolicy cache: %w", err)
	}
	return &Cache{cfg: cfg, scheme: scheme, log: log, policies: policies, momentLabels: slices.Clone(momentLabels), pods: map[string]*podInformer{}, changed: func(string) {}}, nil
}

// staticMapper maps the two kinds the Cache reads without asking the API server's discovery,
// so a Cache is built and started while the API server is unreachable.
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(v1alpha1.GroupVersion.WithKind("ToolPolicy"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(v1alpha1.GroupVersion.WithKind("BindingMoment"), meta.RESTScopeNamespace)
	// A namespace-scoped cache asks the mapper about the list kind itself when it lists.
	m.Add(v1alpha1.GroupVersion.WithKind("BindingMomentList"), meta.RESTScopeNamespace)
	return m
}

// Start runs the informers until ctx ends, and returns at once. Until the ToolPolicy informer
// has synced (the API server may be unreachable), reviews read ToolPolicies from the API
// server instead; WaitForSync waits for it.
func (c *Cache) Start(ctx context.Context) error {
	inf, err := c.policies.GetInformer(ctx, &v1alpha1.ToolPolicy{})
	if err != nil {
		return fmt.Errorf("service: ToolPolicy informer: %w", err)
	}
	c.mu.Lock()
	c.ctx = ctx
	c.policiesSynced = inf.HasSynced
	c.mu.Unlock()
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.policyEvent(obj) },
		UpdateFunc: func(_, obj any) { c.policyEvent(obj) },
		DeleteFunc: func(obj any) { c.policyEvent(obj) },
	})
	if err != nil {
		return fmt.Errorf("service: ToolPolicy informer: %w", err)
	}
	go func() {
		if err := c.policies.Start(ctx); err != nil {
			c.log.Error(err, "ToolPolicy cache stopped")
		}
	}()
	return nil
}

// WaitForSync waits until the ToolPolicy informer has synced, or ctx ends.
func (c *Cache) WaitForSync(ctx context.Context) error {
	if !c.policies.WaitForCacheSync(ctx) {
		return errors.New("service: the ToolPolicy cache did not sync")
	}
	return nil
}

// Synced reports whether the ToolPolicy informer holds a complete list.
func (c *Cache) Synced() bool {
	c.mu.Lock()
	f := c.policiesSynced
	c.mu.Unlock()
	return f != nil && f()
}

// SetChanged names the function woken on every change, by namespace.
func (c *Cache) SetChanged(f func(namespace string)) {
	c.mu.Lock()
	c.changed = f
	c.mu.Unlock()
}

func (c *Cache) notify(ns string) {
	c.mu.Lock()
	f := c.changed
	c.mu.Unlock()
	f(ns)
}

// policyEvent keeps a pod informer running exactly where a ToolPolicy is, and wakes the
// namespace's watchers.
func (c *Cache) policyEvent(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1alpha1.ToolPolicy)
	if !ok {
		return
	}
	ns := p.Namespace
	var list v1alpha1.ToolPolicyList
	if err := c.policies.List(context.Background(), &list, client.InNamespace(ns)); err == nil {
		if len(list.Items) == 0 {
			c.stopPods(ns)
		} else {
			c.startPods(ns)
		}
	}
	c.notify(ns)
}

func (c *Cache) startPods(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil || c.pods[ns] != nil {
		return
	}
	pc, err := crcache.New(c.cfg, crcache.Options{
		Scheme:            c.scheme,
		Mapper:            staticMapper(),
		DefaultNamespaces: map[string]crcache.Config{ns: {}},
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Pod{}:             {Transform: stripPod},
			&v1alpha1.BindingMoment{}: {Transform: stripManagedFields},
		},
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		c.log.Error(err, "pod cache not started; pods are read from the API server", "namespace", ns)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	inf, err := pc.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		cancel()
		c.log.Error(err, "pod cache not started; pods are read from the API server", "namespace", ns)
		return
	}
	minf, err := pc.GetInformer(ctx, &v1alpha1.BindingMoment{})
	for _, label := range c.momentLabels {
		if err == nil {
			err = pc.IndexField(ctx, &v1alpha1.BindingMoment{}, label, labelIndex(label))
		}
	}
	if err != nil {
		cancel()
		c.log.Error(err, "pod cache not started; pods and binding moments are read from the API server", "namespace", ns)
		return
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.notify(ns) },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := obj.(*corev1.Pod)
			if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) {
				c.notify(ns)
			}
		},
		DeleteFunc: func(any) { c.notify(ns) },
	})
	c.pods[ns] = &podInformer{cache: pc, synced: inf.HasSynced, momentsSynced: minf.HasSynced, cancel: cancel}
	go func() {
		if err := pc.Start(ctx); err != nil {
			c.log.Error(err, "pod cache stopped", "namespace", ns)
		}
	}()
}

func (c *Cache) stopPods(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pi := c.pods[ns]; pi != nil {
		pi.cancel()
		delete(c.pods, ns)
	}
}

// Pod returns the cached pod ns/name, or false when the cache does not hold it.
func (c *Cache) Pod(ctx context.Context, ns, name string) (*corev1.Pod, bool) {
	c.mu.Lock()
	pi := c.pods[ns]
	c.mu.Unlock()
	if pi == nil || !pi.synced() {
		return nil, false
	}
	var p corev1.Pod
	if err := pi.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return nil, false
	}
	return &p, true
}

// Moments lists the BindingMoments of ns whose label key (one of the momentLabels New was
// given) has value, from the namespace's informer; false when it has none, it has not synced
// or it does not index key.
func (c *Cache) Moments(ctx context.Context, ns, key, value string) ([]v1alpha1.BindingMoment, bool) {
	c.mu.Lock()
	pi := c.pods[ns]
	c.mu.Unlock()
	if pi == nil || !pi.momentsSynced() || !slices.Contains(c.momentLabels, key) {
		return nil, false
	}
	index := key
	var list v1alpha1.BindingMomentList
	if err := pi.cache.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{index: value}); err != nil {
		return nil, false
	}
	return list.Items, true
}

// labelIndex indexes objects by the value of label key (objects without it are not indexed).
func labelIndex(key string) client.IndexerFunc {
	return func(o client.Object) []string {
		if v := o.GetLabels()[key]; v != "" {
			return []string{v}
		}
		return nil
	}
}

// stripManagedFields drops an object's managedFields, which no review reads.
func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// ListPolicies lists the ToolPolicies of ns from the informer.
func (c *Cache) ListPolicies(ctx context.Context, ns string) ([]v1alpha1.ToolPolicy, error) {
	var list v1alpha1.ToolPolicyList
	if err := c.policies.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// stripPod keeps what a review reads of a pod.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{ServiceAccountName: p.Spec.ServiceAccountName},
	}, nil
}
