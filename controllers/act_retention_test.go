package controllers_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
)

// exists reports whether obj (by name in the harness namespace) is still stored.
func (h *harness) exists(t *testing.T, obj client.Object, name string) (bool, error) {
	err := h.c.Get(ctxFor(t), h.key(name), obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// waitSettled waits until the act's Settled condition is want ("Status/Reason").
func (h *harness) waitSettled(t *testing.T, name, want string) *v1alpha1.Act {
	t.Helper()
	var act *v1alpha1.Act
	eventually(t, 20*time.Second, func() error {
		var err error
		if act, err = h.getAct(t, name); err != nil {
			return err
		}
		return expect("Settled of "+name, condition(act.Status.Conditions, v1alpha1.ActSettledCondition), want)
	})
	return act
}

func TestRetention(t *testing.T) {
	const retention = time.Hour
	h := start(t, settings{retention: retention})
	now := h.clock.Now()
	consumedRef := func(name string) *v1alpha1.LocalObjectReference { return &v1alpha1.LocalObjectReference{Name: name} }

	// Settled acts: executed (with its consumed authority Lease, named by authorityRef and also
	// found by the act-id label), denied, and expired.
	h.create(t, h.authorityLease("lease-done", "done", now.Add(-time.Minute), time.Minute, "op-done"))
	h.create(t, h.authorityLease("lease-done-extra", "done", now.Add(-time.Minute), time.Minute, "op-done"))
	h.createAct(t, newAct("done", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateExecuted, OperationID: "op-done", AuthorityRef: consumedRef("lease-done")})
	h.createAct(t, newAct("denied", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionDenied,
		State: v1alpha1.ActStateMatch, Code: "EF_POLICY_DENIED"})
	// Never deleted: INDETERMINATE (with its consumed Lease) and in flight.
	h.create(t, h.authorityLease("lease-unknown", "unknown", now.Add(-time.Minute), time.Minute, "op-unknown"))
	h.createAct(t, newAct("unknown", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateIndeterminate, OperationID: "op-unknown", AuthorityRef: consumedRef("lease-unknown")})
	h.createAct(t, newAct("inflight", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateInvoked, OperationID: "op-inflight"})
	// Someone else's Lease labelled with the act ID but not managed by actgate is never touched.
	foreign := h.authorityLease("foreign", "done", now, time.Minute, "")
	delete(foreign.Labels, controllers.LabelManagedBy)
	h.create(t, foreign)

	settledAt := h.waitSettled(t, "done", "True/Executed")
	h.waitSettled(t, "denied", "True/Denied")
	h.waitSettled(t, "unknown", "False/Indeterminate")
	h.waitSettled(t, "inflight", "False/InProgress")
	if c := meta.FindStatusCondition(settledAt.Status.Conditions, v1alpha1.ActSettledCondition); !c.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("Settled lastTransitionTime = %s, want the fake clock's %s", c.LastTransitionTime, now)
	}

	all := []string{"done", "denied", "unknown", "inflight"}
	pokeAll := func() {
		for _, name := range all {
			if act, err := h.getAct(t, name); err == nil {
				h.poke(t, act)
			}
		}
	}
	present := func(kind string, obj client.Object, names ...string) error {
		for _, n := range names {
			ok, err := h.exists(t, obj, n)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s %s was deleted", kind, n)
			}
		}
		return nil
	}

	// One second short of the retention, everything stays.
	h.clock.Step(retention - time.Second)
	pokeAll()
	consistently(t, 2*time.Second, func() error {
		if err := present("Act", &v1alpha1.Act{}, all...); err != nil {
			return err
		}
		return present("Lease", &coordinationv1.Lease{}, "lease-done", "lease-done-extra", "lease-unknown", "foreign")
	})

	// Past it, the settled acts go with their authority Leases; the rest stays.
	h.clock.Step(2 * time.Second)
	pokeAll()
	eventually(t, 20*time.Second, func() error {
		for _, n := range []string{"done", "denied"} {
			if ok, err := h.exists(t, &v1alpha1.Act{}, n); err != nil || ok {
				return fmt.Errorf("Act %s still there (%v)", n, err)
			}
		}
		for _, n := range []string{"lease-done", "lease-done-extra"} {
			if ok, err := h.exists(t, &coordinationv1.Lease{}, n); err != nil || ok {
				return fmt.Errorf("Lease %s still there (%v)", n, err)
			}
		}
		return nil
	})
	h.clock.Step(100 * retention)
	pokeAll()
	consistently(t, 2*time.Second, func() error {
		if err := present("Act", &v1alpha1.Act{}, "unknown", "inflight"); err != nil {
			return err
		}
		return present("Lease", &coordinationv1.Lease{}, "lease-unknown", "foreign")
	})
}

func TestAuthorityExpiry(t *testing.T) {
	const ttl, grace = time.Minute, 30 * time.Second
	h := start(t, settings{grace: grace})
	now := h.clock.Now()
	ref := func(name string) *v1alpha1.LocalObjectReference { return &v1alpha1.LocalObjectReference{Name: name} }

	// Authority issued, never consumed.
	h.create(t, h.authorityLease("lease-unused", "unused", now, ttl, ""))
	h.createAct(t, newAct("unused", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateAuthorized, AuthorityRef: ref("lease-unused")})
	// Consumed at the Lease (holder set) though the act has not caught up: never expired.
	h.create(t, h.authorityLease("lease-taken", "taken", now, ttl, "op-taken"))
	h.createAct(t, newAct("taken", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateAuthorized, AuthorityRef: ref("lease-taken")})
	// Orphans: no act names them.
	orphanUnused := h.authorityLease("orphan-unused", "ghost", now, ttl, "")
	orphanTaken := h.authorityLease("orphan-taken", "ghost2", now, ttl, "op-ghost")
	h.create(t, orphanUnused, orphanTaken)

	h.waitSettled(t, "unused", "False/InProgress")
	h.waitSettled(t, "taken", "False/InProgress")
	pokeAll := func() {
		for _, n := range []string{"unused", "taken"} {
			if act, err := h.getAct(t, n); err == nil {
				h.poke(t, act)
			}
		}
		for _, n := range []string{"lease-unused", "lease-taken", "orphan-unused", "orphan-taken"} {
			l := &coordinationv1.Lease{}
			if err := h.c.Get(ctxFor(t), h.key(n), l); err == nil {
				h.poke(t, l)
			}
		}
	}

	// Expired, but within the grace: nothing happens.
	h.clock.Step(ttl + grace - time.Second)
	pokeAll()
	consistently(t, 2*time.Second, func() error {
		for _, n := range []string{"lease-unused", "lease-taken", "orphan-unused", "orphan-taken"} {
			if ok, err := h.exists(t, &coordinationv1.Lease{}, n); err != nil || !ok {
				return fmt.Errorf("Lease %s deleted within the grace (%v)", n, err)
			}
		}
		act, err := h.getAct(t, "unused")
		if err != nil {
			return err
		}
		return expect("state", act.Status.State, v1alpha1.ActStateAuthorized)
	})

	// Past it: the unused authority's act is EXPIRED and its Lease and the unused orphan go.
	h.clock.Step(2 * time.Second)
	pokeAll()
	act := h.waitSettled(t, "unused", "True/Expired")
	if act.Status.State != v1alpha1.ActStateExpired {
		t.Fatalf("state = %s", act.Status.State)
	}
	h.waitEvent(t, "unused", controllers.EventAuthorityExpired, corev1.EventTypeNormal, "lease-unused")
	eventually(t, 20*time.Second, func() error {
		for _, n := range []string{"lease-unused", "orphan-unused"} {
			if ok, err := h.exists(t, &coordinationv1.Lease{}, n); err != nil || ok {
				return fmt.Errorf("Lease %s still there (%v)", n, err)
			}
		}
		return nil
	})
	// The consumed authority and its act are left alone, however late it gets.
	h.clock.Step(24 * time.Hour)
	pokeAll()
	consistently(t, 2*time.Second, func() error {
		for _, n := range []string{"lease-taken", "orphan-taken"} {
			if ok, err := h.exists(t, &coordinationv1.Lease{}, n); err != nil || !ok {
				return fmt.Errorf("consumed Lease %s deleted (%v)", n, err)
			}
		}
		act, err := h.getAct(t, "taken")
		if err != nil {
			return err
		}
		return expect("state", act.Status.State, v1alpha1.ActStateAuthorized)
	})
}
