package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// Labels and annotations the service writes on Acts and BindingMoments.
const (
	// LabelSession holds sessionLabel(session id): the act's or moment's agent session.
	LabelSession = "actgate.io/session"
	// AnnotationSessionID is the exact session id.
	AnnotationSessionID = "actgate.io/session-id"
	// AnnotationAgent is the service-account user of the agent that made the call.
	AnnotationAgent = "actgate.io/agent"
	// AnnotationPod and AnnotationPodUID name the agent's pod, as its bound token names it.
	AnnotationPod    = "actgate.io/pod"
	AnnotationPodUID = "actgate.io/pod-uid"
	// LabelEscalation, on a gate-authored BindingMoment, holds escalationLabel of its call: the
	// agent's identity (service account and pod), server, destination and action digest, so a
	// further escalation of that action from any session of the agent finds it.
	LabelEscalation = "actgate.io/escalation"
	// AnnotationServer, AnnotationDestination, AnnotationTool and AnnotationActionDigest
	// describe the escalated call on its BindingMoments.
	AnnotationServer       = "actgate.io/server"
	AnnotationDestination  = "actgate.io/destination"
	AnnotationTool         = "actgate.io/tool"
	AnnotationActionDigest = "actgate.io/action-digest"
	// AnnotationGrantedAct and AnnotationGrantedAuthority, on an escalated Act, record the one
	// act its binding moments' resolution was granted to, and that act's authority. Written by
	// compare-and-swap: a resolution authorises one call.
	AnnotationGrantedAct       = "actgate.io/granted-act"
	AnnotationGrantedAuthority = "actgate.io/granted-authority"
	// AnnotationDelivered, on an escalated Act, records that an expiry or an answer of its
	// binding moments was delivered to the agent (its value is the escalation state).
	AnnotationDelivered = "actgate.io/delivered"
)

// sessionLabel is the LabelSession value of a session id: a digest, since session ids need not
// be label values.
func sessionLabel(session string) string {
	sum := sha256.Sum256([]byte("actgate.io/session\x00" + session))
	return "s-" + hex.EncodeToString(sum[:])[:40]
}

// escalationLabel is the LabelEscalation value of a call, "" when the caller's pod is not
// known (then no escalation is shared across sessions).
func escalationLabel(x *call) string {
	if x.c.podUID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("actgate.io/escalation\x00" + x.c.user + "\x00" + x.c.podUID + "\x00" +
		x.server + "\x00" + x.destination + "\x00" + x.actionDigest()))
	return "e-" + hex.EncodeToString(sum[:])[:40]
}

// actName is the name of the Act object of an act id: the id itself when it is a valid object
// name (actgate's act ids are), else a digest of it.
func actName(id string) string {
	if len(validation.IsDNS1123Subdomain(id)) == 0 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "act-" + hex.EncodeToString(sum[:])[:40]
}

// stateRank is the lifecycle order the Act CRD enforces (state cannot move backwards).
func stateRank(s v1alpha1.ActState) int {
	switch s {
	case v1alpha1.ActStateVerified:
		return 1
	case v1alpha1.ActStateMatch:
		return 2
	case v1alpha1.ActStateSatisfied:
		return 3
	case v1alpha1.ActStateAuthorized:
		return 4
	case v1alpha1.ActStateConsumed, v1alpha1.ActStateReserved:
		return 5
	case v1alpha1.ActStateDispatchPending:
		return 6
	case v1alpha1.ActStateInvoked:
		return 7
	case v1alpha1.ActStateIndeterminate:
		return 8
	case v1alpha1.ActStateExecuted, v1alpha1.ActStateFailed, v1alpha1.ActStateExpired:
		return 9
	}
	return 0
}

// recordAct creates the Act of a reviewed call. A retried review of the same act finds its Act
// with the same spec and continues; an Act of that name with another spec is an act id reused
// for another call, and an Act whose permit record says its authority was consumed (by a
// Permit, or by a grant consumed in its Review) is refused, except for the retried Review of
// the operation that consumed it, before its outcome: x.retried is set to the record, which
// that Review gets again.
func (s *Service) recordAct(ctx context.Context, x *call) *outcome {
	a := x.obj
	err := s.c.Create(ctx, a, client.FieldOwner(s.manager))
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		o := apiFailure(ctx, "record the act", err)
		return &o
	}
	want := a.Spec
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		o := apiFailure(ctx, "record the act", err)
		return &o
	}
	if !equality.Semantic.DeepEqual(a.Spec, want) {
		o := deny(http.StatusOK, ef.EFActInvalid, review.ReasonBadRequest, "The act id was already used for another call.")
		return &o
	}
	if rec, permitted := permitRecordOf(a); permitted {
		if x.consumeOp != "" && rec.operation == x.consumeOp && rec.authority.ID == mustID(x.binding) && a.Status.State == "" {
			x.retried = &rec
			return nil
		}
		// The act's authority was consumed when its permit record was written: nothing more is
		// issued for it, and its status is the outcome Report's.
		o := deny(http.StatusOK, ef.EF005, review.ReasonAuthority, "This act's authority is already consumed.")
		return &o
	}
	return nil
}

// actStatus is a status change: the decision and, when it moves forward, the state.
type actStatus struct {
	decision     v1alpha1.ActDecision
	state        v1alpha1.ActState
	code         ef.EFCode
	message      string
	authority    string
	moments      []string
	operationID  string
	settled      metav1.ConditionStatus
	settleReason string
}

// setActStatus writes st into the Act's status with a merge patch. A state that would move the
// act backwards (a retried review of an act already further along) is left as it is.
func (s *Service) setActStatus(ctx context.Context, a *v1alpha1.Act, st actStatus) error {
	orig := a.DeepCopy()
	if st.decision != "" {
		a.Status.Decision = st.decision
	}
	a.Status.Code = string(st.code)
	if st.message != "" {
		a.Status.Message = clipRunes(st.message, 1024)
	}
	if st.authority != "" {
		a.Status.AuthorityRef = &v1alpha1.LocalObjectReference{Name: st.authority}
	}
	if len(st.moments) > 0 {
		a.Status.BindingMomentRefs = nil
		for _, m := range st.moments {
			a.Status.BindingMomentRefs = append(a.Status.BindingMomentRefs, v1alpha1.LocalObjectReference{Name: m})
		}
	}
	if st.operationID != "" {
		a.Status.OperationID = st.operationID
	}
	// A terminal state (rank 9) is final; the CRD refuses any change to it.
	if cur := stateRank(a.Status.State); st.state != "" && cur < 9 && stateRank(st.state) >= cur {
		a.Status.State = st.state
		if st.settled != "" {
			meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{
				Type: v1alpha1.ActSettledCondition, Status: st.settled, Reason: st.settleReason,
				Message: clipRunes(a.Status.Message, 1024), ObservedGeneration: a.Generation,
			})
		}
	}
	if equality.Semantic.DeepEqual(orig.Status, a.Status) {
		return nil
	}
	return s.c.Status().Patch(ctx, a, client.MergeFrom(orig), client.FieldOwner(s.manager))
}

// deniedStatus is the status of an act refused at state.
func deniedStatus(code ef.EFCode, msg string, state v1alpha1.ActState) actStatus {
	return actStatus{decision: v1alpha1.ActDecisionDenied, state: state, code: code, message: msg,
		settled: metav1.ConditionTrue, settleReason: v1alpha1.ActDeniedReason}
}

func clipRunes(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// labelCallerPod records on a new Act the pod whose sidecar made the call: that sidecar
// consumes the act's authority and dispatches it, and the Act controller holds a consumed act
// INDETERMINATE once that pod is gone without an outcome reported.
func labelCallerPod(a *v1alpha1.Act, c *caller) {
	if c.podUID == "" || len(validation.IsValidLabelValue(c.podUID)) > 0 {
		return
	}
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Labels[v1alpha1.LabelActPodUID] = c.podUID
	a.Annotations[v1alpha1.AnnotationActPod] = c.podName
}

// actLabels are the labels of an Act: the same act label as its Leases and BindingMoments
// carry, so the operator finds all three by one selector, and the session.
func actLabels(actID, session string) map[string]string {
	return map[string]string{
		leasestore.LabelManagedBy: leasestore.ManagedBy,
		leasestore.LabelActID:     leasestore.ActLabelValue(actID),
		LabelSession:              sessionLabel(session),
	}
}
