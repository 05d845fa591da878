package controllers_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

// exists reports whether obj (by name in the harness namespace) is still stored.
func (h *harness) exists(t *testing.T, obj client.Object, name string) (bool, error) {
	err := h.c.Get(ctxFor(t), h.key(name), obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// present fails with the first of names that is gone.
func (h *harness) present(t *testing.T, obj client.Object, names ...string) error {
	for _, n := range names {
		ok, err := h.exists(t, obj, n)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%T %s was deleted", obj, n)
		}
	}
	return nil
}

// gone fails with the first of names that is still there.
func (h *harness) gone(t *testing.T, obj client.Object, names ...string) error {
	for _, n := range names {
		ok, err := h.exists(t, obj, n)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%T %s is still there", obj, n)
		}
	}
	return nil
}

// pokeAll pokes the named acts and Leases that still exist.
func (h *harness) pokeAll(t *testing.T, acts, leases []string) {
	t.Helper()
	for _, n := range acts {
		if act, err := h.getAct(t, n); err == nil {
			h.poke(t, act)
		}
	}
	for _, n := range leases {
		l := &coordinationv1.Lease{}
		if err := h.c.Get(ctxFor(t), h.key(n), l); err == nil {
			h.poke(t, l)
		}
	}
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

func ref(name string) *v1alpha1.LocalObjectReference {
	return &v1alpha1.LocalObjectReference{Name: name}
}

func TestRetention(t *testing.T) {
	const retention = time.Hour
	h := start(t, settings{retention: retention})
	au := h.authorities(t)
	now := h.clock.Now()

	// Settled: executed, with its consumed authority and a second, never-used authority for the
	// same act under a later epoch (found by the act-id label); and denied.
	done := newAct("done", "payments")
	doneAuth := au.issue(t, done, time.Minute)
	au.consume(t, doneAuth, "op-done")
	reissued := done.DeepCopy()
	reissued.Spec.PolicyEpoch = 2
	extraAuth := au.issue(t, reissued, time.Second)
	h.createAct(t, done, v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateExecuted, OperationID: "op-done", AuthorityRef: ref(doneAuth.ID)})
	h.createAct(t, newAct("denied", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionDenied,
		State: v1alpha1.ActStateMatch, Code: "EF_POLICY_DENIED"})
	// Never deleted: INDETERMINATE (with its consumed authority) and in flight.
	unknown := newAct("unknown", "payments")
	unknownAuth := au.issue(t, unknown, time.Minute)
	au.consume(t, unknownAuth, "op-unknown")
	h.createAct(t, unknown, v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateIndeterminate, OperationID: "op-unknown", AuthorityRef: ref(unknownAuth.ID)})
	h.createAct(t, newAct("inflight", "payments"), v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateInvoked, OperationID: "op-inflight"})
	// Someone else's Lease labelled with the act ID, but not an authority Lease: never touched.
	h.create(t, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Labels: map[string]string{leasestore.LabelActID: "done"}}})

	settled := h.waitSettled(t, "done", "True/Executed")
	h.waitSettled(t, "denied", "True/Denied")
	h.waitSettled(t, "unknown", "False/Indeterminate")
	h.waitSettled(t, "inflight", "False/InProgress")
	if c := meta.FindStatusCondition(settled.Status.Conditions, v1alpha1.ActSettledCondition); !c.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("Settled lastTransitionTime = %s, want the fake clock's %s", c.LastTransitionTime, now)
	}

	acts := []string{"done", "denied", "unknown", "inflight"}
	leases := []string{doneAuth.ID, extraAuth.ID, unknownAuth.ID, "foreign"}

	// One second short of the retention, everything stays.
	h.clock.Step(retention - time.Second)
	h.pokeAll(t, acts, leases)
	consistently(t, 2*time.Second, func() error {
		if err := h.present(t, &v1alpha1.Act{}, acts...); err != nil {
			return err
		}
		return h.present(t, &coordinationv1.Lease{}, leases...)
	})

	// Past it, the settled acts go, with both authority Leases of "done"; the rest stays.
	h.clock.Step(3 * time.Second)
	h.pokeAll(t, acts, leases)
	eventually(t, 20*time.Second, func() error {
		if err := h.gone(t, &v1alpha1.Act{}, "done", "denied"); err != nil {
			return err
		}
		return h.gone(t, &coordinationv1.Lease{}, doneAuth.ID, extraAuth.ID)
	})
	h.clock.Step(100 * retention)
	h.pokeAll(t, acts, leases)
	consistently(t, 2*time.Second, func() error {
		if err := h.present(t, &v1alpha1.Act{}, "unknown", "inflight"); err != nil {
			return err
		}
		return h.present(t, &coordinationv1.Lease{}, unknownAuth.ID, "foreign")
	})
}

func TestAuthorityExpiry(t *testing.T) {
	const ttl, grace, retention = time.Minute, 30 * time.Second, time.Hour
	h := start(t, settings{grace: grace, retention: retention})
	au := h.authorities(t)

	// Authority issued, never consumed.
	unused := newAct("unused", "payments")
	unusedAuth := au.issue(t, unused, ttl)
	h.createAct(t, unused, v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateAuthorized, AuthorityRef: ref(unusedAuth.ID)})
	// Consumed at the Lease though the act has not caught up: never expired, never deleted.
	taken := newAct("taken", "payments")
	takenAuth := au.issue(t, taken, ttl)
	au.consume(t, takenAuth, "op-taken")
	h.createAct(t, taken, v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed,
		State: v1alpha1.ActStateAuthorized, AuthorityRef: ref(takenAuth.ID)})
	// Orphans: authorities whose acts were never recorded.
	orphanUnused := au.issue(t, newAct("ghost", "payments"), ttl)
	orphanTaken := au.issue(t, newAct("ghost-2", "payments"), ttl)
	au.consume(t, orphanTaken, "op-ghost")

	h.waitSettled(t, "unused", "False/InProgress")
	h.waitSettled(t, "taken", "False/InProgress")
	acts := []string{"unused", "taken"}
	leases := []string{unusedAuth.ID, takenAuth.ID, orphanUnused.ID, orphanTaken.ID}

	// Expired, but within the grace: nothing happens.
	h.clock.Step(ttl + grace - time.Second)
	h.pokeAll(t, acts, leases)
	consistently(t, 2*time.Second, func() error {
		if err := h.present(t, &coordinationv1.Lease{}, leases...); err != nil {
			return err
		}
		act, err := h.getAct(t, "unused")
		if err != nil {
			return err
		}
		return expect("state", act.Status.State, v1alpha1.ActStateAuthorized)
	})

	// Past it the unused authority's act is EXPIRED; its Lease stays as evidence.
	h.clock.Step(2 * time.Second)
	h.pokeAll(t, acts, leases)
	act := h.waitSettled(t, "unused", "True/Expired")
	if act.Status.State != v1alpha1.ActStateExpired {
		t.Fatalf("state = %s", act.Status.State)
	}
	h.waitEvent(t, "unused", controllers.EventAuthorityExpired, corev1.EventTypeNormal, unusedAuth.ID)
	consistently(t, 2*time.Second, func() error {
		if err := h.present(t, &coordinationv1.Lease{}, leases...); err != nil {
			return err
		}
		act, err := h.getAct(t, "taken")
		if err != nil {
			return err
		}
		return expect("state of taken", act.Status.State, v1alpha1.ActStateAuthorized)
	})

	// A retention later: the expired act and its Lease go, and so do both orphans (consumed or
	// expired more than the retention ago, no act). The consumed authority of the act that is
	// still AUTHORIZED stays with it, however late it gets.
	h.clock.Step(retention)
	h.pokeAll(t, acts, leases)
	eventually(t, 20*time.Second, func() error {
		if err := h.gone(t, &v1alpha1.Act{}, "unused"); err != nil {
			return err
		}
		return h.gone(t, &coordinationv1.Lease{}, unusedAuth.ID, orphanUnused.ID, orphanTaken.ID)
	})
	h.clock.Step(100 * retention)
	h.pokeAll(t, acts, leases)
	consistently(t, 2*time.Second, func() error {
		if err := h.present(t, &coordinationv1.Lease{}, takenAuth.ID); err != nil {
			return err
		}
		act, err := h.getAct(t, "taken")
		if err != nil {
			return err
		}
		return expect("state of taken", act.Status.State, v1alpha1.ActStateAuthorized)
	})
}
