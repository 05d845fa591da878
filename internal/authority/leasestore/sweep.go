package leasestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selector selects the authority Leases of actgate (LabelManagedBy and LabelComponent).
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelComponent: Component})
}

// Collectable reports whether an authority Lease may be deleted at now: it is actgate's, and it
// was consumed, or it expired, more than retention ago. A Lease whose times cannot be read is
// kept (an operator looks at it; deleting it would lose the evidence). Retention should exceed
// the longest act TTL, so that an act can never be presented again once its Lease is gone.
func Collectable(l *coordinationv1.Lease, now time.Time, retention time.Duration) bool {
	if l.Labels[LabelManagedBy] != ManagedBy || l.Labels[LabelComponent] != Component {
		return false
	}
	if consumed(l) {
		if l.Spec.AcquireTime == nil {
			return false
		}
		return now.Sub(l.Spec.AcquireTime.Time) > retention
	}
	expires, err := parseTime(l.Annotations[AnnotationExpiresAt])
	if err != nil {
		return false
	}
	return now.Sub(expires) > retention
}

// Sweep deletes the collectable authority Leases in namespace ("" for all namespaces) and
// returns how many it deleted. Each delete is conditional on the resourceVersion that was
// judged collectable, so a Lease that changed since the list is left for the next sweep. It is
// for the operator's retention loop; the authority service never calls it.
func (s *Store) Sweep(ctx context.Context, namespace string, retention time.Duration) (int, error) {
	if retention < 0 {
		return 0, errors.New("leasestore: negative retention")
	}
	list, err := s.leases.Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector().String()})
	if err != nil {
		return 0, unavailable("sweep: list", err)
	}
	now := s.now()
	n := 0
	var errs []error
	for i := range list.Items {
		l := &list.Items[i]
		if !Collectable(l, now, retention) {
			continue
		}
		rv := l.ResourceVersion
		err := s.leases.Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv},
		})
		switch {
		case err == nil:
			n++
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("%s/%s: %w", l.Namespace, l.Name, err))
		}
	}
	if len(errs) > 0 {
		return n, unavailable("sweep: delete", errors.Join(errs...))
	}
	return n, nil
}
