package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/policy"
	reconclient "github.com/actgate/actgate/internal/reconcile"
)

var t0 = time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)

func TestSettledCondition(t *testing.T) {
	const (
		allowed   = v1alpha1.ActDecisionAllowed
		denied    = v1alpha1.ActDecisionDenied
		escalated = v1alpha1.ActDecisionEscalated
	)
	for _, tc := range []struct {
		decision  v1alpha1.ActDecision
		state     v1alpha1.ActState
		want      string
		deletable bool
	}{
		{allowed, v1alpha1.ActStateExecuted, "True/Executed", true},
		{allowed, v1alpha1.ActStateFailed, "True/Failed", true},
		{allowed, v1alpha1.ActStateExpired, "True/Expired", true},
		{allowed, v1alpha1.ActStateIndeterminate, "False/Indeterminate", false},
		{denied, v1alpha1.ActStateIndeterminate, "False/Indeterminate", false},
		{denied, v1alpha1.ActStateMatch, "True/Denied", true},
		{denied, "", "True/Denied", true},
		{denied, v1alpha1.ActStateAuthorized, "True/Denied", true},
		{denied, v1alpha1.ActStateInvoked, "False/InProgress", false},
		{escalated, v1alpha1.ActStateMatch, "False/AwaitingPrincipal", false},
		{escalated, v1alpha1.ActStateAuthorized, "False/InProgress", false},
		{allowed, v1alpha1.ActStateAuthorized, "False/InProgress", false},
		{allowed, v1alpha1.ActStateConsumed, "False/InProgress", false},
		{allowed, v1alpha1.ActStateReserved, "False/InProgress", false},
		{allowed, v1alpha1.ActStateDispatchPending, "False/InProgress", false},
		{allowed, v1alpha1.ActStateInvoked, "False/InProgress", false},
		{v1alpha1.ActDecisionAuditDenied, v1alpha1.ActStateExecuted, "True/Executed", true},
	} {
		t.Run(string(tc.decision)+"/"+string(tc.state), func(t *testing.T) {
			st := v1alpha1.ActStatus{Decision: tc.decision, State: tc.state}
			c := settledCondition(st)
			if got := string(c.Status) + "/" + c.Reason; got != tc.want {
				t.Errorf("Settled = %s, want %s", got, tc.want)
			}
			if c.Message == "" {
				t.Errorf("no message")
			}
			if deletable(st) != tc.deletable {
				t.Errorf("deletable = %v, want %v", deletable(st), tc.deletable)
			}
		})
	}
}

func TestActStatusReconciliation(t *testing.T) {
	act := &v1alpha1.Act{Status: v1alpha1.ActStatus{Decision: v1alpha1.ActDecisionAllowed, State: v1alpha1.ActStateIndeterminate, OperationID: "op-1"}}
	act.Generation = 1
	for _, tc := range []struct {
		finding  reconclient.Finding
		state    v1alpha1.ActState
		evidence v1alpha1.Digest
		settled  string
	}{
		{reconclient.FindingUnauthenticated, v1alpha1.ActStateIndeterminate, "", "False/Indeterminate"},
		{reconclient.FindingMismatch, v1alpha1.ActStateIndeterminate, "", "False/Indeterminate"},
		{reconclient.FindingStale, v1alpha1.ActStateIndeterminate, "", "False/Indeterminate"},
		{reconclient.FindingUnreachable, v1alpha1.ActStateIndeterminate, "", "False/Indeterminate"},
		{reconclient.FindingExecuted, v1alpha1.ActStateExecuted, "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "True/Executed"},
		{reconclient.FindingFailed, v1alpha1.ActStateFailed, "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "True/Failed"},
	} {
		t.Run(string(tc.finding), func(t *testing.T) {
			v := reconclient.Verdict{Finding: tc.finding}
			if tc.finding.Settles() {
				v.State, v.EvidenceDigest = tc.state, tc.evidence
			}
			st := actStatus(act, &actScope{attempted: true, verdict: v}, t0)
			if st.State != tc.state || st.Reconciliation.EvidenceDigest != tc.evidence || st.Reconciliation.Attempts != 1 ||
				st.Reconciliation.LastResult != tc.finding.Result() || !st.Reconciliation.LastAttemptTime.Time.Equal(t0) {
				t.Fatalf("status = %+v, reconciliation %+v", st, st.Reconciliation)
			}
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ActSettledCondition)
			if got := string(c.Status) + "/" + c.Reason; got != tc.settled {
				t.Fatalf("Settled = %s", got)
			}
		})
	}
	if act.Status.Reconciliation != nil || act.Status.Conditions != nil {
		t.Fatalf("actStatus modified its input")
	}
}

func TestToolPolicyStatus(t *testing.T) {
	tp := &v1alpha1.ToolPolicy{Spec: v1alpha1.ToolPolicySpec{Mode: v1alpha1.PolicyModeEnforce}}
	tp.Generation = 3
	compileErr := &policy.CompileError{Policy: "p", Problems: []policy.Problem{{Field: "spec.rules[0].arguments[0].expression", Reason: policy.ReasonInvalidCEL, Detail: "syntax"}}}
	for _, tc := range []struct {
		name            string
		scope           policyScope
		accepted, ready string
	}{
		{"compiled", policyScope{epoch: 2}, "True/Compiled", "True/Enforcing"},
		{"invalid", policyScope{epoch: 1, compileErr: compileErr}, "False/InvalidCEL", "False/NotAccepted"},
		{"invalid and secret missing", policyScope{epoch: 1, compileErr: compileErr, missingSecrets: []string{"x"}}, "False/InvalidCEL", "False/NotAccepted"},
		{"secret missing", policyScope{epoch: 2, missingSecrets: []string{"spec.servers[0].credentialsSecretRef: Secret \"s\" not found"}}, "True/Compiled", "False/SecretNotFound"},
		// A Secret that could not be read is not known to be missing: Unknown, not a guessed False.
		{"secret unreadable", policyScope{epoch: 2, secretsErr: errors.New("etcd is down")}, "True/Compiled", "Unknown/InternalError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := toolPolicyStatus(tp, &tc.scope, t0)
			for typ, want := range map[string]string{v1alpha1.ToolPolicyAcceptedCondition: tc.accepted, v1alpha1.ToolPolicyReadyCondition: tc.ready} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if got := string(c.Status) + "/" + c.Reason; got != want {
					t.Errorf("%s = %s, want %s (%s)", typ, got, want, c.Message)
				}
				if c.ObservedGeneration != 3 {
					t.Errorf("%s observedGeneration %d", typ, c.ObservedGeneration)
				}
			}
			if st.ObservedGeneration != 3 || st.PolicyEpoch != tc.scope.epoch {
				t.Errorf("observedGeneration %d epoch %d", st.ObservedGeneration, st.PolicyEpoch)
			}
		})
	}
	audit := tp.DeepCopy()
	audit.Spec.Mode = v1alpha1.PolicyModeAudit
	c := meta.FindStatusCondition(toolPolicyStatus(audit, &policyScope{epoch: 1}, t0).Conditions, v1alpha1.ToolPolicyReadyCondition)
	if c.Reason != v1alpha1.ToolPolicyAuditingReason || !strings.Contains(c.Message, "nothing is enforced") || strings.Contains(c.Message, "Enforce ") {
		t.Errorf("audit Ready = %s: %s", c.Reason, c.Message)
	}
}

func TestBindingMomentStatus(t *testing.T) {
	bm := &v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{Principal: "alice@example.com", ExpiresAt: metav1.NewTime(t0)}}
	r := &BindingMomentReconciler{}
	for _, tc := range []struct {
		name       string
		now        time.Time
		resolution *v1alpha1.BindingMomentResolution
		state      v1alpha1.BindingMomentState
		cond       string
		requeue    time.Duration
	}{
		{"pending", t0.Add(-time.Minute), nil, v1alpha1.BindingMomentPending, "False/AwaitingPrincipal", time.Minute},
		{"expired at expiresAt", t0, nil, v1alpha1.BindingMomentExpired, "False/Expired", 0},
		{"option", t0.Add(-time.Minute), &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To(int32(1))}, v1alpha1.BindingMomentResolved, "True/OptionSelected", 0},
		{"answer", t0.Add(-time.Minute), &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "no"}, v1alpha1.BindingMomentResolved, "True/Answered", 0},
		{"question", t0.Add(-time.Minute), &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion}, v1alpha1.BindingMomentResolved, "True/Questioned", 0},
		{"declined", t0.Add(-time.Minute), &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined}, v1alpha1.BindingMomentResolved, "True/Declined", 0},
		// Seen only at expiresAt: too late to count, so it is not recorded as a resolution.
		{"resolution seen at expiresAt", t0, &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To(int32(0))}, v1alpha1.BindingMomentExpired, "False/Expired", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bm.DeepCopy()
			in.Spec.Resolution = tc.resolution
			s := &momentScope{bm: in, now: tc.now}
			res := r.decide(s)
			st := bindingMomentStatus(in, s)
			if st.State != tc.state || res.RequeueAfter != tc.requeue {
				t.Fatalf("state %s requeue %s", st.State, res.RequeueAfter)
			}
			if got := condition(st.Conditions); got != tc.cond {
				t.Fatalf("Resolved = %s", got)
			}
			if tc.state == v1alpha1.BindingMomentResolved && (st.ResolvedBy != "alice@example.com" || st.ResolvedAt == nil || !st.ResolvedAt.Time.Equal(tc.now)) {
				t.Fatalf("resolution not recorded: %+v", st)
			}
		})
	}
	// A final state is never left.
	done := bm.DeepCopy()
	done.Status.State = v1alpha1.BindingMomentExpired
	done.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined}
	s := &momentScope{bm: done, now: t0.Add(-time.Hour)}
	r.decide(s)
	if st := bindingMomentStatus(done, s); st.State != v1alpha1.BindingMomentExpired {
		t.Fatalf("Expired moment became %s", st.State)
	}
}

func condition(conds []metav1.Condition) string {
	if len(conds) != 1 {
		return "?"
	}
	return string(conds[0].Status) + "/" + conds[0].Reason
}

func TestReadLease(t *testing.T) {
	type marks struct {
		holder, label, annotation bool
	}
	lease := func(expires string, m marks) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{leasestore.LabelManagedBy: leasestore.ManagedBy, leasestore.LabelComponent: leasestore.Component,
				leasestore.LabelState: leasestore.StateIssued},
			Annotations: map[string]string{},
		}}
		if expires != "" {
			l.Annotations[leasestore.AnnotationExpiresAt] = expires
		}
		if m.holder {
			l.Spec.HolderIdentity = ptr.To("op-1")
			l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(t0))
		}
		if m.label {
			l.Labels[leasestore.LabelState] = leasestore.StateConsumed
		}
		if m.annotation {
			l.Annotations[leasestore.AnnotationConsumedBy] = "op-1"
		}
		return l
	}
	const grace = 10 * time.Second
	exp := "2026-11-29T15:01:00.000Z" // t0 + 1m, in the Lease store's form
	for _, tc := range []struct {
		name    string
		lease   *coordinationv1.Lease
		now     time.Time
		expired bool
		wait    time.Duration
	}{
		{"fresh", lease(exp, marks{}), t0, false, 70 * time.Second},
		{"expired within grace", lease(exp, marks{}), t0.Add(65 * time.Second), false, 5 * time.Second},
		{"expired past grace", lease(exp, marks{}), t0.Add(70 * time.Second), true, 0},
		// Any consumption marker means spent, even when the others disagree.
		{"holder", lease(exp, marks{holder: true}), t0.Add(time.Hour), false, 0},
		{"state label only", lease(exp, marks{label: true}), t0.Add(time.Hour), false, 0},
		{"consumed-by annotation only", lease(exp, marks{annotation: true}), t0.Add(time.Hour), false, 0},
		// An expiry that cannot be read never expires.
		{"no expiry", lease("", marks{}), t0.Add(time.Hour), false, 0},
		{"unparseable expiry", lease("yesterday", marks{}), t0.Add(time.Hour), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expired, wait := readLease(tc.lease).expiredUnconsumed(tc.now, grace)
			if expired != tc.expired || wait != tc.wait {
				t.Fatalf("expiredUnconsumed = %v, %s; want %v, %s", expired, wait, tc.expired, tc.wait)
			}
		})
	}

	// collectable agrees with leasestore.Collectable and says when it will.
	const retention = time.Hour
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease
		now   time.Time
		ok    bool
		wait  time.Duration
	}{
		{"unconsumed before expiry+retention", lease(exp, marks{}), t0.Add(time.Minute), false, retention + time.Millisecond},
		{"unconsumed after expiry+retention", lease(exp, marks{}), t0.Add(time.Minute + retention + time.Second), true, 0},
		{"consumed before consumption+retention", lease(exp, marks{holder: true, label: true, annotation: true}), t0.Add(time.Minute), false, retention - time.Minute + time.Millisecond},
		{"consumed after consumption+retention", lease(exp, marks{holder: true, label: true, annotation: true}), t0.Add(retention + time.Second), true, 0},
		{"unreadable", lease("", marks{}), t0.Add(100 * retention), false, 0},
	} {
		t.Run("collectable/"+tc.name, func(t *testing.T) {
			ok, wait := collectable(tc.lease, tc.now, retention)
			if ok != tc.ok || wait != tc.wait || ok != leasestore.Collectable(tc.lease, tc.now, retention) {
				t.Fatalf("collectable = %v, %s; want %v, %s", ok, wait, tc.ok, tc.wait)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	r := &ActReconciler{Backoff: time.Minute, MaxBackoff: 10 * time.Minute}
	for n, want := range map[int32]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 4: 8 * time.Minute, 5: 10 * time.Minute, 1000: 10 * time.Minute} {
		if got := r.backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
	if got := (&ActReconciler{}).backoff(1); got != DefaultReconcileBackoff {
		t.Errorf("default backoff = %s", got)
	}
}

func TestNote(t *testing.T) {
	long := strings.Repeat("é", 1000)
	n := note(long)
	if len(n) > maxEventNoteSize || !strings.HasSuffix(n, "…") || !strings.HasPrefix(long, strings.TrimSuffix(n, "…")) {
		t.Fatalf("note: %d bytes", len(n))
	}
	if note("short") != "short" {
		t.Fatal("short note changed")
	}
}
