package kubecache

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Bounds of the objects the authority service remembers having written (Recent).
const (
	recentMomentsMax = 4096
	recentMomentsTTL = 10 * time.Second
	RecentActsMax    = 4096
	RecentActsTTL    = 60 * time.Second
)

// Recent remembers objects as the authority service's own writes returned them, by namespace/name, for
// at most ttl and at most max at once; one that does not fit is not remembered. What reads
// them is correct without them: they save a read, never decide one.
type Recent[T client.Object] struct {
	now func() time.Time
	max int
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]recentEntry[T]
}

type recentEntry[T client.Object] struct {
	obj   T
	added time.Time
}

// NewRecent returns a Recent that keeps at most maxN objects, each for ttl, aged by now.
func NewRecent[T client.Object](now func() time.Time, maxN int, ttl time.Duration) *Recent[T] {
	return &Recent[T]{now: now, max: maxN, ttl: ttl, m: map[string]recentEntry[T]{}}
}

// Add remembers a copy of obj, which a write just returned.
func (r *Recent[T]) Add(obj T) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= r.max {
		r.sweepLocked(now)
		if len(r.m) >= r.max {
			return
		}
	}
	c := obj.DeepCopyObject().(T)
	// Nothing that reads these uses the field managers: a copy without them is smaller.
	c.SetManagedFields(nil)
	r.m[c.GetNamespace()+"/"+c.GetName()] = recentEntry[T]{obj: c, added: now}
}

// Take returns and forgets the object remembered as namespace/name, if it is within its TTL.
func (r *Recent[T]) Take(namespace, name string) (T, bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := namespace + "/" + name
	e, ok := r.m[k]
	delete(r.m, k)
	if !ok || now.Sub(e.added) >= r.ttl {
		var zero T
		return zero, false
	}
	return e.obj, true
}

func (r *Recent[T]) sweepLocked(now time.Time) {
	for k, e := range r.m {
		if now.Sub(e.added) >= r.ttl {
			delete(r.m, k)
		}
	}
}

// RecentMoments are the BindingMoments the authority service created in the last recentMomentsTTL, as
// its creates returned them: its listing of a session's moments adds those its read (the informer, or the API server's
// watch cache) does not show yet, so the escalation that follows its own moment by less than a
// watch event's lag joins it instead of raising another. A moment is forgotten once a read
// shows it or after the TTL; at most recentMomentsMax are kept (a moment not remembered may
// make a later review raise another moment for the principals, never an allow: the grant is
// read by quorum).
type RecentMoments struct {
	*Recent[*v1alpha1.BindingMoment]
}

// NewRecentMoments returns an empty RecentMoments aged by now.
func NewRecentMoments(now func() time.Time) RecentMoments {
	return RecentMoments{NewRecent[*v1alpha1.BindingMoment](now, recentMomentsMax, recentMomentsTTL)}
}

// Merge returns items and the remembered moments of namespace whose label key has value that
// items lacks; the remembered moments items shows are forgotten.
func (r RecentMoments) Merge(namespace, key, value string, items []v1alpha1.BindingMoment) []v1alpha1.BindingMoment {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) == 0 {
		return items
	}
	seen := make(map[string]bool, len(items))
	for i := range items {
		seen[items[i].Name] = true
		delete(r.m, namespace+"/"+items[i].Name)
	}
	for k, e := range r.m {
		switch {
		case now.Sub(e.added) >= r.ttl:
			delete(r.m, k)
		case e.obj.Namespace == namespace && e.obj.Labels[key] == value && !seen[e.obj.Name]:
			items = append(items, *e.obj.DeepCopy())
		}
	}
	return items
}
