package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// reportAttempts bounds the compare-and-swap retries of one Report (a concurrent write of the
// same Act, e.g. a retried report, is re-read and checked again).
const reportAttempts = 3

// report answers a Report: the outcome the sidecar journaled for a dispatch is recorded on its
// Act, in the caller's namespace (the namespace is the caller's identity's, never the
// request's), and only by the pod that made the call (the Act's pod-uid label, the UID its
// bound token names; docs/security.md). The report is authenticated by what recorded the consumption: the permit record
// of an Act a Permit created (found by the report's act id; it must name exactly this
// authority and operation), else the authority's Lease, which must be CONSUMED by exactly this
// operation, and the Act it names must record the same authority and operation. The Act moves
// CONSUMED → EXECUTED | FAILED | INDETERMINATE (action-evidence-boundary "Classify the Effect
// Outcome"; the Act CRD's transition rules); a report of the state the Act is already in is
// answered as recorded (idempotent), and any other state is refused — an INDETERMINATE act
// leaves that state only through authenticated reconciliation, never a sidecar's report.
func (s *Service) report(ctx context.Context, c *caller, req *review.Request) outcome {
	rr := req.Report
	obj, fresh, refused := s.reportedAct(ctx, c, rr)
	if refused != nil {
		return *refused
	}
	for attempt := 1; ; attempt++ {
		if !fresh {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				if apierrors.IsNotFound(err) {
					return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "The authority's act is not recorded.")
				}
				return apiFailure(ctx, "read the act", err)
			}
		}
		fresh = false
		// The Act names the pod whose sidecar made the call (labelCallerPod); that sidecar
		// consumed the authority and dispatched, so only it reports the outcome. Another pod
		// of the namespace, even under the same service account, is refused.
		if c.podUID == "" || obj.Labels[v1alpha1.LabelActPodUID] != c.podUID {
			s.log.V(1).Info("report refused: the act was made by another pod", "act", obj.Spec.ActID,
				"authority", rr.AuthorityID, "pod", c.podName)
			return deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "The act was not made by the caller's pod.")
		}
		st := obj.Status
		// An Act recorded by a Permit has no status until its outcome: its permit record (or,
		// for one recorded with a Lease, the Lease consumed by exactly this operation for this
		// act) is what says it was allowed and spent.
		permitted := st.State == "" && st.Decision == "" && st.AuthorityRef == nil && st.OperationID == ""
		if !permitted && (st.AuthorityRef == nil || st.AuthorityRef.Name != rr.AuthorityID || st.OperationID != rr.OperationID) {
			return deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "The act does not record that authority and operation.")
		}
		decision := st.Decision
		if permitted {
			decision = v1alpha1.ActDecisionAllowed
		}
		done := outcome{status: http.StatusOK, resp: review.Response{
			Allowed: true, Decision: decision, Reason: review.ReasonAuthority, Act: obj.Name,
			Reported: &review.Reported{AuthorityID: rr.AuthorityID, OperationID: rr.OperationID, State: rr.State},
		}}
		switch {
		case st.State == rr.State:
			return s.settleBudgets(ctx, obj, rr, done)
		case st.State == v1alpha1.ActStateConsumed, permitted:
		default:
			return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority,
				fmt.Sprintf("The act is %s; its outcome cannot be reported as %s.", st.State, rr.State))
		}
		orig := obj.DeepCopy()
		if permitted {
			obj.Status.Decision = v1alpha1.ActDecisionAllowed
			obj.Status.AuthorityRef = &v1alpha1.LocalObjectReference{Name: rr.AuthorityID}
			obj.Status.OperationID = rr.OperationID
		}
		obj.Status.State = rr.State
		msg := fmt.Sprintf("Outcome %s reported by the sink for operation %s", rr.State, clipRunes(rr.OperationID, 256))
		if rr.EvidenceDigest != "" {
			msg += " with evidence " + rr.EvidenceDigest
		}
		obj.Status.Message = clipRunes(msg+".", 1024)
		settled, why := settledBy(rr.State)
		meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ActSettledCondition, Status: settled, Reason: why,
			Message: obj.Status.Message, ObservedGeneration: obj.Generation,
		})
		err := s.c.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(s.manager))
		switch {
		case err == nil:
			s.log.V(1).Info("outcome recorded", "act", obj.Spec.ActID, "authority", rr.AuthorityID,
				"operation", rr.OperationID, "state", rr.State, "evidence", rr.EvidenceDigest)
			return s.settleBudgets(ctx, obj, rr, done)
		case apierrors.IsConflict(err) && attempt < reportAttempts:
			continue
		case apierrors.IsNotFound(err):
			return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "The authority's act is not recorded.")
		case apierrors.IsInvalid(err):
			// The CRD's transition rules refused it (the act moved on concurrently).
			return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "The act's state does not admit that outcome.")
		default:
			return apiFailure(ctx, "record the outcome", err)
		}
	}
}

// reportedAct authenticates a Report and names its Act (see report): by the permit record of
// the Act rr.ActID names, else by the authority's Lease. fresh is true when obj holds a read
// of the Act made for it, or the Act as this Service's Permit or grant wrote it
// (Service.recentActs): report's patch is a compare-and-swap on that version, and a conflict
// reads the Act again.
func (s *Service) reportedAct(ctx context.Context, c *caller, rr *review.ReportRequest) (obj *v1alpha1.Act, fresh bool, _ *outcome) {
	fail := func(o outcome) (*v1alpha1.Act, bool, *outcome) { return nil, false, &o }
	obj = &v1alpha1.Act{}
	obj.Namespace = c.namespace
	if rr.ActID != "" {
		obj.Name = actName(rr.ActID)
		if a, ok := s.recentActs.Take(obj.Namespace, obj.Name); ok {
			obj = a
		} else if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				return fail(deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "No act of that ID in the caller's namespace."))
			}
			return fail(apiFailure(ctx, "read the act", err))
		}
		if rec, ok := permitRecordOf(obj); ok {
			if rec.authority.ID != rr.AuthorityID || rec.operation != rr.OperationID || obj.Spec.ActID != rr.ActID {
				s.log.V(1).Info("report refused: the act's permit names another authority or operation", "act", rr.ActID,
					"authority", rr.AuthorityID)
				return fail(deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "The authority was not consumed by that operation."))
			}
			return obj, true, nil
		}
		fresh = true
	}
	rec, err := s.store.Get(ctx, c.namespace, rr.AuthorityID)
	if err != nil {
		s.log.V(1).Info("report refused", "authority", rr.AuthorityID, "cause", authority.CodeOf(err))
		if errors.Is(err, authority.ErrStoreUnavailable) {
			return fail(apiFailure(ctx, "read the authority", err))
		}
		return fail(deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "No authority of that ID in the caller's namespace."))
	}
	if rec.State != authority.StateConsumed || rec.ConsumedBy != rr.OperationID || (rr.ActID != "" && rec.Authority.Binding.ActID != rr.ActID) {
		s.log.V(1).Info("report refused: authority not consumed by that operation", "act", rec.Authority.Binding.ActID,
			"authority", rr.AuthorityID, "state", rec.State)
		return fail(deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "The authority was not consumed by that operation."))
	}
	if name := actName(rec.Authority.Binding.ActID); name != obj.Name {
		obj.Name, fresh = name, false
	}
	return obj, fresh, nil
}

// settledBy is the Settled condition of an outcome state.
func settledBy(s v1alpha1.ActState) (metav1.ConditionStatus, string) {
	switch s {
	case v1alpha1.ActStateExecuted:
		return metav1.ConditionTrue, v1alpha1.ActExecutedReason
	case v1alpha1.ActStateFailed:
		return metav1.ConditionTrue, v1alpha1.ActFailedReason
	}
	return metav1.ConditionFalse, v1alpha1.ActIndeterminateReason
}

// settleBudgets gives back the budget charges of an outcome reported FAILED (a repeated report
// gives back nothing more) and answers done; INDETERMINATE and EXECUTED keep them counted.
func (s *Service) settleBudgets(ctx context.Context, obj *v1alpha1.Act, rr *review.ReportRequest, done outcome) outcome {
	if rr.State != v1alpha1.ActStateFailed {
		return done
	}
	if o := s.refundFailed(ctx, obj, rr.OperationID); o != nil {
		return *o
	}
	return done
}
