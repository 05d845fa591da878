package aeb

import (
	"errors"
	"testing"
	"time"
)

// TestEvaluateAdmissionBoundaries covers the admission boundaries the AEB-1 vectors do not.
func TestEvaluateAdmissionBoundaries(t *testing.T) {
	withStatus := func(f func(*Status)) func(*Case) {
		return func(c *Case) { f(&c.Evidence[0].Status) }
	}
	withReq := func(r Requirement) func(*Case) {
		return func(c *Case) { c.Operation.Requirements = []Requirement{r} }
	}
	withEvidence := func(ev ...Evidence) func(*Case) {
		return func(c *Case) { c.Evidence = ev }
	}
	second := approval("human:approver:2", 2)
	sameHuman := approval("human:approver:1", 3)
	indeterminateEv := approval("human:approver:1", 1)
	indeterminateEv.NativeVerification = VerificationIndeterminate
	failedEv := approval("human:approver:2", 2)
	failedEv.NativeVerification = VerificationFailed
	machine := approval("machine:policy:1", 4)
	machine.PrincipalKind = PrincipalMachine
	revokedOther := approval("human:approver:2", 2)
	revokedOther.Status.Verdict = StatusRevoked
	revokedOther.MappedCAID = caidB
	noExclusions := Requirement{Role: RoleHumanAuthorization, PrincipalKind: PrincipalHuman, Minimum: 1}

	stale := refused(VerificationVerified, AcceptanceIndeterminate, ActionMatchMatch,
		SatisfactionIndeterminate, AuthorizationIndeterminate, DecisionIndeterminate, ReasonEvidenceStale)

	for _, tc := range []struct {
		name string
		c    Case
		want want
	}{
		{"baseline admits", admissionCase(), wantAdmit},
		// valid_until is exclusive: evidence that expires at the evaluation instant is stale.
		{"evidence expires exactly at evaluated_at", admissionCase(withStatus(func(s *Status) {
			s.ValidUntil = evalAt
		})), stale},
		{"evidence valid one second past evaluated_at", admissionCase(withStatus(func(s *Status) {
			s.ValidUntil = evalAt.Add(time.Second)
		})), wantAdmit},
		{"status checked exactly at evaluated_at", admissionCase(withStatus(func(s *Status) {
			s.CheckedAt = evalAt
		})), wantAdmit},
		// A status from the future of the trusted clock cannot be relied on.
		{"status checked after evaluated_at", admissionCase(withStatus(func(s *Status) {
			s.CheckedAt = evalAt.Add(time.Second)
		})), refused(VerificationVerified, AcceptanceIndeterminate, ActionMatchMatch,
			SatisfactionIndeterminate, AuthorizationIndeterminate, DecisionIndeterminate, ReasonStatusUnavailable)},
		// Revocation is not freshness: a revoked artifact is rejected even if also stale.
		{"revoked and past validity", admissionCase(withStatus(func(s *Status) {
			s.Verdict, s.ValidUntil = StatusRevoked, evalAt
		})), refused(VerificationVerified, AcceptanceRejected, ActionMatchMatch,
			SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonEvidenceRevoked)},
		{"native verification indeterminate", admissionCase(withEvidence(indeterminateEv)),
			refused(VerificationIndeterminate, AcceptanceIndeterminate, ActionMatchIndeterminate,
				SatisfactionIndeterminate, AuthorizationIndeterminate, DecisionIndeterminate,
				ReasonNativeVerificationIndeterminate)},
		// Fail closed: one failed artifact refuses the bundle even though the other fills the slot.
		{"one failed artifact beside a sufficient one", admissionCase(withEvidence(approval("human:approver:1", 1), failedEv)),
			refused(VerificationFailed, AcceptanceRejected, ActionMatchIndeterminate,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonNativeVerificationFailed)},
		{"no evidence at all", admissionCase(withEvidence()),
			refused(VerificationFailed, AcceptanceRejected, ActionMatchIndeterminate,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse,
				ReasonNativeVerificationFailed, ReasonRequiredRoleUnsatisfied)},
		// Every failed check is reported, in ascending order.
		{"revoked and bound to another action", admissionCase(withEvidence(approval("human:approver:1", 1), revokedOther)),
			refused(VerificationVerified, AcceptanceRejected, ActionMatchMismatch,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse,
				ReasonEvidenceRevoked, ReasonExactActionMismatch)},
		// A machine principal never fills a named-human slot, whatever role its adapter claims.
		{"machine principal in a human slot", admissionCase(withEvidence(machine)),
			refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonRequiredRoleUnsatisfied)},
		{"duplicate principal counts once with distinct_principals", admissionCase(withReq(humanReq(2)),
			withEvidence(approval("human:approver:1", 1), sameHuman)),
			refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonDistinctPrincipalQuorumUnsatisfied)},
		{"duplicate principal counts twice without distinct_principals", admissionCase(
			withReq(Requirement{Role: RoleHumanAuthorization, PrincipalKind: PrincipalHuman, Minimum: 2}),
			withEvidence(approval("human:approver:1", 1), sameHuman)), wantAdmit},
		{"two distinct approvers fill a quorum of two", admissionCase(withReq(humanReq(2)),
			withEvidence(approval("human:approver:1", 1), second)), wantAdmit},
		{"initiator as approver when exclusion is off", admissionCase(withReq(noExclusions),
			withEvidence(approval(initiator, 1))), wantAdmit},
		{"initiator as approver when excluded", admissionCase(withEvidence(approval(initiator, 1))),
			refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonInitiatorSelfApprovalRefused)},
		// The initiator's own approval does not count, but another approver still fills the slot.
		{"initiator approval beside an eligible approver", admissionCase(
			withEvidence(approval(initiator, 1), second)), wantAdmit},
		{"executor in a quorum of two", admissionCase(withReq(humanReq(2)),
			withEvidence(approval("human:approver:1", 1), approval(executor, 2))),
			refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
				SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonExecutorSelfApprovalRefused)},
		{"policy permit fills its slot beside a human", admissionCase(func(c *Case) {
			c.Operation.Requirements = []Requirement{
				{Role: RolePolicyPermit, PrincipalKind: PrincipalMachine, Minimum: 1, ExcludeInitiator: true, ExcludeExecutor: true},
				humanReq(1),
			}
			permit := approval("policy:payments/default@7", 5)
			permit.Role, permit.PrincipalKind = RolePolicyPermit, PrincipalMachine
			c.Evidence = []Evidence{permit, approval("human:approver:1", 1)}
		}), wantAdmit},
		// Two unfilled slots report both reasons.
		{"two slots fail for different reasons", admissionCase(func(c *Case) {
			c.Operation.Requirements = []Requirement{
				{Role: RolePolicyPermit, PrincipalKind: PrincipalMachine, Minimum: 1},
				humanReq(1),
			}
			c.Evidence = []Evidence{approval(initiator, 1)}
		}), refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
			SatisfactionUnsatisfied, AuthorizationNotAuthorized, DecisionRefuse,
			ReasonInitiatorSelfApprovalRefused, ReasonRequiredRoleUnsatisfied)},
		{"local policy deny", admissionCase(func(c *Case) { c.LocalPolicy = PolicyDeny }),
			refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
				SatisfactionSatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonLocalPolicyDenied)},
		// A definite local deny outranks evidence that cannot be decided.
		{"local policy deny with stale evidence", admissionCase(func(c *Case) {
			c.LocalPolicy = PolicyDeny
			c.Evidence[0].Status.ValidUntil = evalAt
		}), refused(VerificationVerified, AcceptanceIndeterminate, ActionMatchMatch,
			SatisfactionIndeterminate, AuthorizationNotAuthorized, DecisionRefuse,
			ReasonEvidenceStale, ReasonLocalPolicyDenied)},
		// The store is not consulted before AUTHORIZED: no replay is reported.
		{"unauthorized replay is not attempted", admissionCase(func(c *Case) {
			c.LocalPolicy = PolicyDeny
			c.Reservation.ConsumedNativeReplayUnits = []string{c.Evidence[0].NativeReplayUnit}
			c.Reservation.Atomicity = AtomicityUnavailable
		}), refused(VerificationVerified, AcceptanceAccepted, ActionMatchMatch,
			SatisfactionSatisfied, AuthorizationNotAuthorized, DecisionRefuse, ReasonLocalPolicyDenied)},
		// Chain order: a known replay is reported before the store's unavailability.
		{"native replay and unavailable store", admissionCase(func(c *Case) {
			c.Reservation.ConsumedNativeReplayUnits = []string{c.Evidence[0].NativeReplayUnit}
			c.Reservation.Atomicity = AtomicityUnavailable
		}), passing.lifecycle(ReservationNativeEvidenceReplay, CustodyUnreserved, ProviderNotInvoked,
			EffectNotObserved, RetryRefused, ReconciliationNotApplicable, DecisionRefuse, ReasonNativeEvidenceReplay)},
		{"operation id held by another action", admissionCase(func(c *Case) {
			p := held(CustodyInvoking, ProviderIndeterminate, EffectIndeterminate)
			p.NormalizedActionDigest = digestB
			c.Reservation.PriorOperations = []PriorOperation{p}
		}), passing.lifecycle(ReservationOperationReplay, CustodyInvoking, ProviderIndeterminate,
			EffectIndeterminate, RetryRefused, ReconciliationRequired, DecisionRefuse, ReasonOperationBindingMismatch)},
		{"operation id held in DISPATCH_PENDING", admissionCase(func(c *Case) {
			c.Reservation.PriorOperations = []PriorOperation{held(CustodyInvoking, ProviderNotInvoked, EffectNotObserved)}
		}), passing.lifecycle(ReservationOperationReplay, CustodyInvoking, ProviderNotInvoked,
			EffectNotObserved, RetryRefused, ReconciliationRequired, DecisionRefuse, ReasonOperationReplay)},
		// Another operation of the same action is a new action instance, not a replay.
		{"prior operation with another id", admissionCase(func(c *Case) {
			p := held(CustodyTerminal, ProviderProvenNotCommitted, EffectNotObserved)
			p.OperationID = "operation:earlier:1"
			c.Reservation.PriorOperations = []PriorOperation{p}
		}), wantAdmit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Evaluate(tc.c)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			assertResult(t, got, tc.want)
			if got.Admitted() != (tc.want.d == DecisionAdmit) {
				t.Errorf("Admitted() = %v for decision %s", got.Admitted(), got.Decision)
			}
		})
	}
}

// TestAdmitMatchesEvaluate: the production entry point decides exactly as the conformance
// adapter for the same inputs.
func TestAdmitMatchesEvaluate(t *testing.T) {
	for _, c := range []Case{
		admissionCase(),
		admissionCase(func(c *Case) { c.Evidence[0].PrincipalID = initiator }),
		admissionCase(func(c *Case) { c.Reservation.Atomicity = AtomicityUnavailable }),
	} {
		want, err := Evaluate(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Admit(c.Operation, c.Evidence, c.LocalPolicy, c.Reservation, c.EvaluatedAt)
		if err != nil {
			t.Fatal(err)
		}
		assertResult(t, got, want2(want))
	}
}

func want2(r Result) want {
	return want{r.Verification, r.Acceptance, r.ActionMatch, r.Satisfaction, r.Authorization,
		r.Reservation, r.Custody, r.ProviderOutcome, r.EffectRelation, r.Retry, r.Reconciliation,
		r.Decision, r.Reasons}
}

// TestAdmitRejectsInvalidInput: malformed input has no decision, and the zero Result does not
// admit.
func TestAdmitRejectsInvalidInput(t *testing.T) {
	good := admissionCase()
	for _, tc := range []struct {
		name string
		mut  func(*Case)
		at   time.Time
		code ErrorCode
		path string
	}{
		{"no requirement", func(c *Case) { c.Operation.Requirements = nil }, evalAt, CodeInvalidArray, "operation.requirements"},
		{"minimum zero", func(c *Case) { c.Operation.Requirements[0].Minimum = 0 }, evalAt, CodeInvalidInteger, "operation.requirements[0].minimum"},
		{"two slots for one role and kind", func(c *Case) {
			c.Operation.Requirements = append(c.Operation.Requirements, humanReq(2))
		}, evalAt, CodeDuplicateValue, "operation.requirements"},
		{"zero clock", func(*Case) {}, time.Time{}, CodeInvalidInstant, "evaluated_at"},
		{"empty policy", func(c *Case) { c.LocalPolicy = "" }, evalAt, CodeInvalidEnum, "local_policy"},
		{"lower-case enum", func(c *Case) { c.Evidence[0].NativeVerification = "verified" }, evalAt, CodeInvalidEnum, "evidence[0].native_verification"},
		{"same artifact twice", func(c *Case) { c.Evidence = append(c.Evidence, c.Evidence[0]) }, evalAt, CodeDuplicateValue, "evidence[1]"},
		{"checked after valid_until", func(c *Case) {
			c.Evidence[0].Status.CheckedAt = c.Evidence[0].Status.ValidUntil.Add(time.Second)
		}, evalAt, CodeInvalidCombination, "evidence[0].status"},
		{"non-ASCII principal", func(c *Case) { c.Evidence[0].PrincipalID = "human:ａlice" }, evalAt, CodeInvalidString, "evidence[0].principal_id"},
		{"unknown atomicity", func(c *Case) { c.Reservation.Atomicity = "eventual" }, evalAt, CodeInvalidEnum, "reservation.atomicity"},
		{"terminal record with unknown outcome", func(c *Case) {
			c.Reservation.PriorOperations = []PriorOperation{held(CustodyTerminal, ProviderIndeterminate, EffectIndeterminate)}
		}, evalAt, CodeInvalidCombination, "reservation.prior_operations[0]"},
		{"invoking record with terminal outcome", func(c *Case) {
			c.Reservation.PriorOperations = []PriorOperation{held(CustodyInvoking, ProviderCommitted, EffectObservedAsRequested)}
		}, evalAt, CodeInvalidCombination, "reservation.prior_operations[0]"},
		{"record in custody RESERVED", func(c *Case) {
			c.Reservation.PriorOperations = []PriorOperation{held(CustodyReserved, ProviderNotInvoked, EffectNotObserved)}
		}, evalAt, CodeInvalidEnum, "reservation.prior_operations[0].custody"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Operation.Requirements = append([]Requirement(nil), good.Operation.Requirements...)
			c.Evidence = append([]Evidence(nil), good.Evidence...)
			tc.mut(&c)
			got, err := Admit(c.Operation, c.Evidence, c.LocalPolicy, c.Reservation, tc.at)
			var ie *InputError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("err = %v, want *InputError", err)
			}
			if ie.Code != tc.code || ie.Path != tc.path {
				t.Errorf("error = %s at %s, want %s at %s", ie.Code, ie.Path, tc.code, tc.path)
			}
			if got.Admitted() {
				t.Errorf("invalid input admitted: %+v", got)
			}
		})
	}
}
