package aeb

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	evalAt     = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)
	caidA      = "caid:1:order.purchase.1:jcs-sha256:" + strings.Repeat("A", 43)
	caidB      = "caid:1:order.purchase.1:jcs-sha256:" + strings.Repeat("B", 43)
	digestA    = "sha256:" + strings.Repeat("a", 64)
	digestB    = "sha256:" + strings.Repeat("b", 64)
	initiator  = "agent:initiator:1"
	executor   = "executor:payments:1"
	providerID = "provider:payments"
)

func hexDigest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func humanReq(min int) Requirement {
	return Requirement{Role: RoleHumanAuthorization, PrincipalKind: PrincipalHuman, Minimum: min,
		DistinctPrincipals: true, ExcludeInitiator: true, ExcludeExecutor: true}
}

func baseOperation() Operation {
	return Operation{
		OperationID: "operation:test:1", ProviderID: providerID,
		InitiatorID: initiator, ExecutorID: executor,
		CAID: caidA, NormalizedActionDigest: digestA,
		Requirements: []Requirement{humanReq(1)},
	}
}

// approval is a verified, current, pinned human approval of the base action; n makes its
// wrapper and replay unit distinct from other approvals.
func approval(principal string, n byte) Evidence {
	return Evidence{
		WrapperDigest: hexDigest("0123456789"[n%10]), NativeReplayUnit: hexDigest("cdef0123456789"[n%14]),
		NativeVerification: VerificationVerified,
		MappedCAID:         caidA, MappedActionDigest: digestA,
		Role: RoleHumanAuthorization, PrincipalKind: PrincipalHuman, PrincipalID: principal,
		Status: Status{Verdict: StatusCurrent, AuthorityPinned: true,
			CheckedAt: evalAt.Add(-time.Minute), ValidUntil: evalAt.Add(time.Hour)},
	}
}

func admissionCase(mutate ...func(*Case)) Case {
	c := Case{
		Version: CaseVersion, ID: "test", Mode: ModeAdmission, EvaluatedAt: evalAt,
		Operation:   baseOperation(),
		Evidence:    []Evidence{approval("human:approver:1", 1)},
		LocalPolicy: PolicyPermit,
		Reservation: Reservation{Atomicity: AtomicityLocalAtomic, PriorOperations: []PriorOperation{},
			ConsumedNativeReplayUnits: []string{}},
	}
	for _, m := range mutate {
		m(&c)
	}
	return c
}

func held(custody Custody, p ProviderOutcome, e EffectRelation) PriorOperation {
	return PriorOperation{OperationID: "operation:test:1", CAID: caidA, NormalizedActionDigest: digestA,
		Custody: custody, ProviderOutcome: p, EffectRelation: e}
}

// want is the expected result, written compactly: the five evidence decisions, then the seven
// lifecycle decisions, then the reasons.
type want struct {
	v   Verification
	acc Acceptance
	m   ActionMatch
	s   Satisfaction
	z   Authorization
	res ReservationOutcome
	cus Custody
	po  ProviderOutcome
	er  EffectRelation
	rt  RetryDecision
	rc  ReconciliationDecision
	d   Decision
	rs  []Reason
}

func (w want) result() Result {
	rs := w.rs
	if rs == nil {
		rs = []Reason{}
	}
	return Result{w.v, w.acc, w.m, w.s, w.z, w.res, w.cus, w.po, w.er, w.rt, w.rc, w.d, rs}
}

var (
	wantAdmit = want{VerificationVerified, AcceptanceAccepted, ActionMatchMatch, SatisfactionSatisfied,
		AuthorizationAuthorized, ReservationReserved, CustodyReserved, ProviderNotInvoked, EffectNotObserved,
		RetryNotApplicable, ReconciliationNotApplicable, DecisionAdmit, nil}
	// passing is the evidence half of every post-dispatch expectation below.
	passing = want{v: VerificationVerified, acc: AcceptanceAccepted, m: ActionMatchMatch,
		s: SatisfactionSatisfied, z: AuthorizationAuthorized}
)

// refused returns an admission refusal with the evidence decisions given and nothing reserved.
func refused(v Verification, acc Acceptance, m ActionMatch, s Satisfaction, z Authorization, d Decision, rs ...Reason) want {
	return want{v, acc, m, s, z, ReservationNotAttempted, CustodyUnreserved, ProviderNotInvoked,
		EffectNotObserved, RetryNotApplicable, ReconciliationNotApplicable, d, rs}
}

func (w want) lifecycle(res ReservationOutcome, cus Custody, po ProviderOutcome, er EffectRelation,
	rt RetryDecision, rc ReconciliationDecision, d Decision, rs ...Reason) want {
	w.res, w.cus, w.po, w.er, w.rt, w.rc, w.d, w.rs = res, cus, po, er, rt, rc, d, rs
	return w
}

func assertResult(t *testing.T, got Result, w want) {
	t.Helper()
	exp := w.result()
	if got.Reasons == nil {
		t.Errorf("reasons is nil, want %v", exp.Reasons)
	}
	g, e := got, exp
	g.Reasons, e.Reasons = nil, nil
	if !reflect.DeepEqual(g, e) {
		t.Errorf("result:\n got  %+v\n want %+v", got, exp)
	}
	if strings.Join(reasonStrings(got.Reasons), ",") != strings.Join(reasonStrings(exp.Reasons), ",") {
		t.Errorf("reasons = %v, want %v", got.Reasons, exp.Reasons)
	}
	assertInvariants(t, got)
}

func reasonStrings(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
