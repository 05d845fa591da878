package service

import (
	"sync"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Bounds of the moments a Service remembers having created (recentMoments).
const (
	recentMomentsMax = 4096
	recentMomentsTTL = 10 * time.Second
)

// recentMoments are the BindingMoments this Service created in the last recentMomentsTTL, as
// its creates returned them: listGroups adds those its read (the informer, or the API server's
// watch cache) does not show yet, so the escalation that follows its own moment by less than a
// watch event's lag joins it instead of raising another. A moment is forgotten once a read
// shows it or after the TTL; at most recentMomentsMax are kept, and one that does not fit is
// not remembered (a later review may then raise another moment for the principals, never an
// allow: the grant is read by quorum).
type recentMoments struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]recentMoment // namespace/name
}

type recentMoment struct {
	m     *v1alpha1.BindingMoment
	added time.Time
}

func newRecentMoments(now func() time.Time) *recentMoments {
	return &recentMoments{now: now, m: map[string]recentMoment{}}
}

// add remembers m, which a create just returned.
func (r *recentMoments) add(m *v1alpha1.BindingMoment) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= recentMomentsMax {
		r.sweepLocked(now)
		if len(r.m) >= recentMomentsMax {
			return
		}
	}
	r.m[m.Namespace+"/"+m.Name] = recentMoment{m: m.DeepCopy(), added: now}
}

func (r *recentMoments) sweepLocked(now time.Time) {
	for k, e := range r.m {
		if now.Sub(e.added) >= recentMomentsTTL {
			delete(r.m, k)
		}
	}
}

// merge returns items and the remembered moments of namespace whose label key has value that
// items lacks; the remembered moments items shows are forgotten.
func (r *recentMoments) merge(namespace, key, value string, items []v1alpha1.BindingMoment) []v1alpha1.BindingMoment {
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
		case now.Sub(e.added) >= recentMomentsTTL:
			delete(r.m, k)
		case e.m.Namespace == namespace && e.m.Labels[key] == value && !seen[e.m.Name]:
			items = append(items, *e.m.DeepCopy())
		}
	}
	return items
}
