package controllers

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// lowestNonZero returns the result that asks to run again soonest.
func lowestNonZero(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter <= 0:
		return b
	case b.RequeueAfter <= 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	}
	return a
}

// after returns a result that runs again after d (at least a second, so a clock at the boundary
// does not spin).
func after(d time.Duration) ctrl.Result {
	if d < time.Second {
		d = time.Second
	}
	return ctrl.Result{RequeueAfter: d}
}
