package controllers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels of the authority Leases the authority service writes.
const (
	// LabelManagedBy marks a Lease as an actgate authority (value ManagedBy). Only Leases with
	// it are ever deleted here; the leader-election Lease and everyone else's are never touched.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy on authority Leases.
	ManagedBy = "actgate"
	// LabelActID names the act (spec.actID) an authority Lease was issued for.
	LabelActID = "actgate.io/act-id"
)

// isAuthorityLease reports whether l carries the actgate managed-by label.
func isAuthorityLease(o client.Object) bool {
	return o.GetLabels()[LabelManagedBy] == ManagedBy
}

// authorityLeaseSelector selects authority Leases.
func authorityLeaseSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})
}

// CacheByObject restricts the manager's Lease cache to authority Leases, so the manager neither
// caches nor is woken by anyone else's Leases. Pass it as cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Label: authorityLeaseSelector()},
	}
}

// leaseView is what the controllers read from an authority Lease.
type leaseView struct {
	// expiresAt is spec.acquireTime + spec.leaseDurationSeconds; zero when either is missing,
	// in which case the Lease never counts as expired.
	expiresAt time.Time
	// consumed is true when spec.holderIdentity is set: the consume compare-and-swap names its
	// holder. An unreadable Lease counts as consumed, so nothing deletes it as unused.
	consumed bool
}

func readLease(l *coordinationv1.Lease) leaseView {
	var v leaseView
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		v.consumed = true
	}
	if l.Spec.AcquireTime != nil && l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		v.expiresAt = l.Spec.AcquireTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	}
	return v
}

// expiredUnconsumed reports whether the authority can no longer be consumed and was not: its
// expiry plus grace (for clock skew between the sink and the manager) is at or before now and no
// one holds it. When it is not (yet), after is how long until it would be (zero if never).
func (v leaseView) expiredUnconsumed(now time.Time, grace time.Duration) (expired bool, after time.Duration) {
	if v.consumed || v.expiresAt.IsZero() {
		return false, 0
	}
	deadline := v.expiresAt.Add(grace)
	if !now.Before(deadline) {
		return true, 0
	}
	return false, deadline.Sub(now)
}

// actIDLabelValue returns id when it can be a label value (so a Lease could carry it), else "".
func actIDLabelValue(id string) string {
	if id == "" || len(validation.IsValidLabelValue(id)) > 0 {
		return ""
	}
	return id
}
