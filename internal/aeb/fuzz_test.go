package aeb

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeEvaluate feeds arbitrary bytes to the strict decoder and every decoded case to
// Evaluate. Neither may panic; a rejected input is an *InputError with a code; an accepted case
// always has a decision that satisfies every lifecycle invariant (an ADMIT has every
// prerequisite in its passing value), the same decision twice, and the same decision after a
// JSON round trip.
func FuzzDecodeEvaluate(f *testing.F) {
	for _, v := range loadSuite(f).Vectors {
		f.Add([]byte(v.Input))
	}
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"@version":1}`, `{"a":1,"a":2}`, "\"\xff\"", `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCase(b)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Code == "" || ie.Path == "" || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("decode error without a code: %v", err)
			}
			return
		}
		r, err := Evaluate(c)
		if err != nil {
			t.Fatalf("Evaluate rejected a decoded case: %v", err)
		}
		for _, msg := range invariantViolations(r) {
			t.Errorf("invariant: %s\ncase: %s", msg, b)
		}
		again, _ := Evaluate(c)
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("non-deterministic: %+v then %+v", r, again)
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := DecodeCase(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if r2, _ := Evaluate(c2); !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the decision: %+v then %+v", r, r2)
		}
	})
}

// FuzzEvaluateStructured explores the decision space directly: each input byte picks one
// dimension of a case (mode, verifier verdicts, status, times, principals, requirement flags,
// policy, store state, observation, reconciliation), so the fuzzer reaches combinations byte
// mutation of JSON rarely would. Valid cases must satisfy the invariants; the production steps
// must agree with Evaluate.
func FuzzEvaluateStructured(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{3, 1, 0, 1, 0, 2, 1, 0, 1, 1, 0, 2, 0, 1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := structuredCase(b)
		if ValidateCase(c) != nil {
			return
		}
		r, err := Evaluate(c)
		if err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
		for _, msg := range invariantViolations(r) {
			t.Errorf("invariant: %s\ncase: %+v", msg, c)
		}
		if c.Mode == ModeAdmission {
			got, err := Admit(c.Operation, c.Evidence, c.LocalPolicy, c.Reservation, c.EvaluatedAt)
			if err != nil || !reflect.DeepEqual(got, r) {
				t.Fatalf("Admit = %+v, %v; Evaluate = %+v", got, err, r)
			}
		}
	})
}

// structuredCase builds a case from fuzz bytes; reading past the end yields zeros.
func structuredCase(b []byte) Case {
	i := 0
	next := func(n int) int {
		if i >= len(b) {
			i++
			return 0
		}
		v := int(b[i]) % n
		i++
		return v
	}
	pick := func(vs ...string) string { return vs[next(len(vs))] }
	flag := func() bool { return next(2) == 1 }
	principals := []string{"human:approver:1", "human:approver:2", initiator, executor}
	outcomes := [][2]string{
		{"NOT_INVOKED", "NOT_OBSERVED"}, {"INDETERMINATE", "INDETERMINATE"},
		{"COMMITTED", "OBSERVED_AS_REQUESTED"}, {"COMMITTED", "DIVERGED"}, {"COMMITTED", "NOT_OBSERVED"},
		{"PROVEN_NOT_COMMITTED", "NOT_OBSERVED"},
	}

	c := admissionCase()
	c.Mode = Mode(pick("ADMISSION", "INVOCATION_OBSERVATION", "RETRY", "RECONCILIATION"))
	c.LocalPolicy = LocalPolicy(pick("PERMIT", "PERMIT", "PERMIT", "DENY"))
	c.Operation.Requirements = []Requirement{{
		Role: RoleHumanAuthorization, PrincipalKind: PrincipalKind(pick("HUMAN", "HUMAN", "MACHINE")),
		Minimum: 1 + next(3), DistinctPrincipals: flag(), ExcludeInitiator: flag(), ExcludeExecutor: flag(),
	}}
	if flag() {
		c.Operation.Requirements = append(c.Operation.Requirements, Requirement{
			Role: RolePolicyPermit, PrincipalKind: PrincipalMachine, Minimum: 1})
	}
	c.Evidence = nil
	for n := next(4); n > 0; n-- {
		e := approval(principals[next(len(principals))], byte(len(c.Evidence)))
		e.NativeVerification = Verification(pick("VERIFIED", "VERIFIED", "VERIFIED", "FAILED", "INDETERMINATE"))
		if next(4) == 0 {
			e.MappedCAID = caidB
		}
		if next(4) == 0 {
			e.MappedActionDigest = digestB
		}
		if next(3) == 0 {
			e.Role, e.PrincipalKind = RolePolicyPermit, PrincipalMachine
		}
		e.Status.Verdict = StatusVerdict(pick("CURRENT", "CURRENT", "CURRENT", "REVOKED", "UNAVAILABLE"))
		e.Status.AuthorityPinned = next(5) != 0
		e.Status.CheckedAt = evalAt.Add(time.Duration(next(5)-3) * time.Second)
		e.Status.ValidUntil = e.Status.CheckedAt.Add(time.Duration(next(5)) * time.Second)
		c.Evidence = append(c.Evidence, e)
	}
	c.Reservation.Atomicity = Atomicity(pick("local_atomic", "local_atomic", "unavailable"))
	if len(c.Evidence) > 0 && next(3) == 0 {
		c.Reservation.ConsumedNativeReplayUnits = []string{c.Evidence[0].NativeReplayUnit}
	}
	if flag() {
		o := outcomes[next(len(outcomes))]
		p := held(Custody(pick("INVOKING", "TERMINAL")), ProviderOutcome(o[0]), EffectRelation(o[1]))
		if next(4) == 0 {
			p.CAID = caidB
		}
		c.Reservation.PriorOperations = []PriorOperation{p}
	}
	if flag() {
		o := outcomes[1+next(len(outcomes)-1)]
		c.Observation = &Observation{Source: ObservationSource(pick("PROVIDER_EVIDENCE", "TIMEOUT_AFTER_DISPATCH")),
			ProviderOutcome: ProviderOutcome(o[0]), EffectRelation: EffectRelation(o[1])}
	}
	if flag() {
		o := outcomes[1+next(len(outcomes)-1)]
		c.Reconciliation = &ReconciliationEvidence{Authenticated: flag(), ProviderID: pick(providerID, "provider:other"),
			OperationID: c.Operation.OperationID, CAID: pick(caidA, caidA, caidB), NormalizedActionDigest: digestA,
			ProviderOutcome: ProviderOutcome(o[0]), EffectRelation: EffectRelation(o[1])}
	}
	return c
}
