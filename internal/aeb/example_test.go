package aeb_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/aeb"
)

// ExampleAdmit shows the sink's admission of a tool call a human committed through a binding
// moment, then its dispatch timing out, then a blind retry.
func ExampleAdmit() {
	now := time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)
	actionDigest := "sha256:" + strings.Repeat("a", 64) // the sink's digest of {"tool","args"}
	caid, _ := aeb.CAIDFromDigest(aeb.ActionTypeToolCall, actionDigest)
	op := aeb.Operation{
		OperationID: "op-7f3c", ProviderID: "mcp:payments", InitiatorID: "system:serviceaccount:agents:buyer",
		ExecutorID: "actgate-sink:agents", CAID: caid, NormalizedActionDigest: "sha256:" + strings.Repeat("b", 64),
		Requirements: []aeb.Requirement{{Role: aeb.RoleHumanAuthorization, PrincipalKind: aeb.PrincipalHuman,
			Minimum: 1, DistinctPrincipals: true, ExcludeInitiator: true, ExcludeExecutor: true}},
	}
	resolution := aeb.Evidence{
		WrapperDigest: "sha256:" + strings.Repeat("c", 64), NativeReplayUnit: "sha256:" + strings.Repeat("d", 64),
		NativeVerification: aeb.VerificationVerified, MappedCAID: caid, MappedActionDigest: op.NormalizedActionDigest,
		Role: aeb.RoleHumanAuthorization, PrincipalKind: aeb.PrincipalHuman, PrincipalID: "alice@example.com",
		Status: aeb.Status{Verdict: aeb.StatusCurrent, AuthorityPinned: true,
			CheckedAt: now.Add(-time.Second), ValidUntil: now.Add(5 * time.Minute)},
	}
	store := aeb.Reservation{Atomicity: aeb.AtomicityLocalAtomic}

	admission, err := aeb.Admit(op, []aeb.Evidence{resolution}, aeb.PolicyPermit, store, now)
	if err != nil {
		panic(err)
	}
	fmt.Println(admission.Decision, admission.Reservation, admission.Admitted())

	// The authority was consumed, DISPATCH_PENDING journaled, and the upstream timed out.
	record := aeb.PriorOperation{OperationID: op.OperationID, CAID: op.CAID,
		NormalizedActionDigest: op.NormalizedActionDigest, Custody: aeb.CustodyInvoking,
		ProviderOutcome: aeb.ProviderNotInvoked, EffectRelation: aeb.EffectNotObserved}
	observed, _ := aeb.Observe(admission.Assessment(), op, record,
		aeb.Observation{Source: aeb.SourceTimeoutAfterDispatch,
			ProviderOutcome: aeb.ProviderIndeterminate, EffectRelation: aeb.EffectIndeterminate})
	fmt.Println(observed.Outcome(), observed.Custody, observed.Reconciliation, observed.Reasons)

	record.ProviderOutcome, record.EffectRelation = observed.ProviderOutcome, observed.EffectRelation
	retried, _ := aeb.Retry(admission.Assessment(), op, record)
	fmt.Println(retried.Decision, retried.Retry, retried.Reasons)
	// Output:
	// ADMIT RESERVED true
	// INDETERMINATE INVOKING REQUIRED [timeout_after_dispatch]
	// REFUSE REFUSED [blind_retry_refused]
}
