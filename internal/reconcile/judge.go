package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/aeb"
)

// Finding is what one reconciliation attempt established. Only FindingExecuted and
// FindingFailed move an act out of INDETERMINATE.
type Finding string

// Findings, each with the status.reconciliation.lastResult it records (Result).
const (
	// FindingExecuted: authenticated, matching, fresh: the exact effect occurred.
	FindingExecuted Finding = "Executed"
	// FindingFailed: authenticated, matching, fresh: the effect did not occur.
	FindingFailed Finding = "Failed"
	// FindingUnknown: authenticated, matching and fresh, but the provider has no conclusive
	// record (outcome UNKNOWN).
	FindingUnknown Finding = "Unknown"
	// FindingStale: authenticated, but observed before the act existed, dated in the future,
	// older than the freshness window, or an answer to an earlier query (replayed nonce).
	FindingStale Finding = "Stale"
	// FindingMalformed: authenticated, but not a well-formed answer.
	FindingMalformed Finding = "Malformed"
	// FindingMismatch: authenticated, but naming another operation, action, tool or server.
	FindingMismatch Finding = "Mismatch"
	// FindingUnauthenticated: the answer (or the server) could not be authenticated.
	FindingUnauthenticated Finding = "Unauthenticated"
	// FindingUnreachable: no answer.
	FindingUnreachable Finding = "Unreachable"
)

// Result is the Act status.reconciliation.lastResult that records f. The API has no Stale,
// Unknown or Malformed result: all three are NoEvidence ("no, or only stale, record"); the
// Event the controller emits names the finding itself.
func (f Finding) Result() v1alpha1.ReconciliationResult {
	switch f {
	case FindingExecuted:
		return v1alpha1.ReconciliationExecuted
	case FindingFailed:
		return v1alpha1.ReconciliationFailed
	case FindingMismatch:
		return v1alpha1.ReconciliationMismatch
	case FindingUnauthenticated:
		return v1alpha1.ReconciliationUnauthenticated
	case FindingUnreachable:
		return v1alpha1.ReconciliationUnreachable
	}
	return v1alpha1.ReconciliationNoEvidence
}

// Settles reports whether f moves the act out of INDETERMINATE.
func (f Finding) Settles() bool { return f == FindingExecuted || f == FindingFailed }

// Classify returns the finding of a failed Ask: ErrUnreachable, ErrUnauthenticated,
// ErrMalformed, ErrReplayed. It returns false for ErrConfig (no query was made) and for errors
// that are not Ask's.
func Classify(err error) (Finding, bool) {
	switch {
	case errors.Is(err, ErrUnreachable):
		return FindingUnreachable, true
	case errors.Is(err, ErrUnauthenticated):
		return FindingUnauthenticated, true
	case errors.Is(err, ErrMalformed):
		return FindingMalformed, true
	case errors.Is(err, ErrReplayed):
		return FindingStale, true
	}
	return "", false
}

// Expectation is what the act says the answer must be about.
type Expectation struct {
	// Query holds the operation ID, action digest, tool and server asked about (Nonce unused).
	Query
	// Agent and SinkID are the act's initiator and executor (spec.agent, spec.sinkID).
	Agent  string
	SinkID string
	// NotBefore is the earliest time an observation of this operation can have been made: the
	// act's creation, which precedes its dispatch. An observation from before it describes
	// something else.
	NotBefore time.Time
}

// Verdict is the judgment of one answer.
type Verdict struct {
	Finding Finding
	// Reason is the AEB reason code of the decision.
	Reason aeb.Reason
	// State is EXECUTED or FAILED when Finding settles the act, else empty.
	State v1alpha1.ActState
	// EvidenceDigest is the answer's digest when Finding settles the act, else empty.
	EvidenceDigest v1alpha1.Digest
}

// Judge decides what answer a establishes about exp at the trusted time now, accepting
// observations for window after they were made. It runs aeb.Reconcile: authenticated (a came
// from Ask, so it is), bound to the same provider, operation and exact action, fresh, and
// terminal; anything short leaves the act INDETERMINATE. An error means exp itself is unusable
// (e.g. its action digest is not a digest); the act stays as it is.
func Judge(exp Expectation, a Answer, window time.Duration, now time.Time) (Verdict, error) {
	op, err := operation(exp.Query, exp.Agent, exp.SinkID)
	if err != nil {
		return Verdict{}, err
	}
	prior := aeb.PriorOperation{
		OperationID: op.OperationID, CAID: op.CAID, NormalizedActionDigest: op.NormalizedActionDigest,
		Custody: aeb.CustodyInvoking, ProviderOutcome: aeb.ProviderIndeterminate, EffectRelation: aeb.EffectIndeterminate,
	}
	// What the answer says, spelled the same way as the expectation, so any difference in
	// operation, action digest, tool or server is a binding mismatch.
	said, err := operation(a.Query, exp.Agent, exp.SinkID)
	if err != nil {
		return Verdict{Finding: FindingMismatch, Reason: aeb.ReasonReconciliationBindingMismatch}, nil
	}
	provider, effect := aeb.ProviderIndeterminate, aeb.EffectIndeterminate
	switch a.Outcome {
	case OutcomeExecuted:
		provider, effect = aeb.ProviderCommitted, aeb.EffectObservedAsRequested
	case OutcomeFailed:
		provider, effect = aeb.ProviderProvenNotCommitted, aeb.EffectNotObserved
	}
	rec := aeb.ReconciliationEvidence{
		Authenticated: true, ProviderID: said.ProviderID, OperationID: said.OperationID,
		CAID: said.CAID, NormalizedActionDigest: said.NormalizedActionDigest,
		ProviderOutcome: provider, EffectRelation: effect,
	}
	fresh := aeb.Freshness{DispatchedAt: exp.NotBefore, ObservedAt: a.ObservedAt, ValidUntil: a.ObservedAt.Add(window)}
	res, err := aeb.Reconcile(assessment(), op, prior, rec, fresh, now)
	if err != nil {
		return Verdict{}, fmt.Errorf("reconcile: judge: %w", err)
	}
	v := Verdict{Reason: firstReason(res.Reasons)}
	switch {
	case res.Decision == aeb.DecisionReconciled && res.Outcome() == aeb.OutcomeExecuted:
		v.Finding, v.State, v.EvidenceDigest = FindingExecuted, v1alpha1.ActStateExecuted, v1alpha1.Digest(a.EvidenceDigest)
	case res.Decision == aeb.DecisionReconciled && res.Outcome() == aeb.OutcomeFailed:
		v.Finding, v.State, v.EvidenceDigest = FindingFailed, v1alpha1.ActStateFailed, v1alpha1.Digest(a.EvidenceDigest)
	case v.Reason == aeb.ReasonReconciliationBindingMismatch || v.Reason == aeb.ReasonOperationBindingMismatch:
		v.Finding = FindingMismatch
	case v.Reason == aeb.ReasonReconciliationStale:
		v.Finding = FindingStale
	case v.Reason == aeb.ReasonUnauthenticatedReconciliation:
		v.Finding = FindingUnauthenticated
	default:
		v.Finding = FindingUnknown
	}
	return v, nil
}

// assessment is the evidence half of an act that reached dispatch: it was authorized, or it
// would not have been dispatched. Reconciliation does not revisit it.
func assessment() aeb.Assessment {
	return aeb.Assessment{
		Verification: aeb.VerificationVerified, Acceptance: aeb.AcceptanceAccepted,
		ActionMatch: aeb.ActionMatchMatch, Satisfaction: aeb.SatisfactionSatisfied,
		Authorization: aeb.AuthorizationAuthorized, Reasons: []aeb.Reason{},
	}
}

// operation spells q in AEB terms: the provider is the policy's server, the CAID comes from the
// action digest, and the normalized action binds server, tool and action digest together.
func operation(q Query, agent, sinkID string) (aeb.Operation, error) {
	caid, err := aeb.CAIDFromDigest(aeb.ActionTypeToolCall, q.ActionDigest)
	if err != nil {
		return aeb.Operation{}, fmt.Errorf("reconcile: action digest: %w", err)
	}
	return aeb.Operation{
		OperationID:            ident("op", q.OperationID),
		ProviderID:             ident("server", q.Server),
		InitiatorID:            ident("agent", agent),
		ExecutorID:             ident("sink", sinkID),
		CAID:                   caid,
		NormalizedActionDigest: normalized(q),
		// The requirement was met before dispatch; AEB needs one to be named, never none.
		Requirements: []aeb.Requirement{{Role: aeb.RolePolicyPermit, PrincipalKind: aeb.PrincipalMachine, Minimum: 1}},
	}, nil
}

// normalized is the digest of the material the answer is bound to.
func normalized(q Query) string {
	b, _ := json.Marshal([]string{"actgate.reconciliation-binding.1", q.Server, q.Tool, q.ActionDigest, q.OperationID})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ident spells s in the AEB identifier syntax: as is when it fits, else a digest under prefix.
// The exact strings are bound by the normalized digest in any case.
func ident(prefix, s string) string {
	if s != "" && len(s) <= 200 && identChars(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return prefix + "-" + hex.EncodeToString(sum[:20])
}

func identChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == ':' || c == '_' || c == '.' || c == '@' || c == '/' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func firstReason(rs []aeb.Reason) aeb.Reason {
	if len(rs) == 0 {
		return ""
	}
	return rs[0]
}
