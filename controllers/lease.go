package controllers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/internal/authority/leasestore"
)

// The authority Leases are internal/authority/leasestore's: its labels select them, its
// expires-at annotation says when the authority expires, and its consumption markers say
// whether it was spent. This package reads and deletes them, never updates them.

// isAuthorityLease reports whether o carries the labels of an authority Lease
// (leasestore.Selector). Only such Leases are ever deleted here; the leader-election Lease and
// everyone else's are never touched.
func isAuthorityLease(o client.Object) bool {
	ls := o.GetLabels()
	return ls[leasestore.LabelManagedBy] == leasestore.ManagedBy && ls[leasestore.LabelComponent] == leasestore.Component
}

// CacheByObject restricts the manager's Lease cache to authority Leases, so the manager neither
// caches nor is woken by anyone else's Leases, and its RoleBinding cache to the ones it
// maintains (NamespaceAccessReconciler). Pass it as cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Label: leasestore.Selector()},
		&rbacv1.RoleBinding{}:   {Label: namespaceAccessSelector()},
	}
}

// leaseView is what the controllers read from an authority Lease.
type leaseView struct {
	// expiresAt is the signed expiry (leasestore.AnnotationExpiresAt); zero when it cannot be
	// read, in which case the authority never counts as expired here.
	expiresAt time.Time
	// consumed: any consumption marker is set (spec.holderIdentity, the state label, the
	// consumed-by annotation), as leasestore decides it: markers that disagree mean spent.
	consumed bool
}

func readLease(l *coordinationv1.Lease) leaseView {
	v := leaseView{
		consumed: (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") ||
			l.Labels[leasestore.LabelState] == leasestore.StateConsumed ||
			l.Annotations[leasestore.AnnotationConsumedBy] != "",
	}
	if t, err := time.Parse(time.RFC3339Nano, l.Annotations[leasestore.AnnotationExpiresAt]); err == nil {
		v.expiresAt = t
	}
	return v
}

// expiredUnconsumed reports whether the authority can no longer be consumed and was not: its
// expiry plus grace (for clock skew between the authority service and the manager) is at or
// before now and nothing marks it consumed. When it is not (yet), wait is how long until it
// would be (zero if never).
func (v leaseView) expiredUnconsumed(now time.Time, grace time.Duration) (expired bool, wait time.Duration) {
	if v.consumed || v.expiresAt.IsZero() {
		return false, 0
	}
	deadline := v.expiresAt.Add(grace)
	if !now.Before(deadline) {
		return true, 0
	}
	return false, deadline.Sub(now)
}

// collectable reports whether l may be deleted at now (leasestore.Collectable: consumed, or
// expired, more than retention ago) and, when not, how long until it may be (zero if never:
// its times cannot be read, and an operator should look at it).
func collectable(l *coordinationv1.Lease, now time.Time, retention time.Duration) (bool, time.Duration) {
	if leasestore.Collectable(l, now, retention) {
		return true, 0
	}
	var since time.Time
	if readLease(l).consumed {
		if l.Spec.AcquireTime != nil {
			since = l.Spec.AcquireTime.Time
		}
	} else {
		since = readLease(l).expiresAt
	}
	if since.IsZero() {
		return false, 0
	}
	// Collectable is strictly after since+retention.
	return false, since.Add(retention).Sub(now) + time.Millisecond
}
