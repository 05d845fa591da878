package aeb

import "time"

// evidenceInput is what the evidence chain reads: the frozen observed action with its pinned
// requirement, the presented evidence (as reported by native verifiers), local policy, and the
// trusted evaluation time.
type evidenceInput struct {
	op       Operation
	evidence []Evidence
	policy   LocalPolicy
	at       time.Time
}

// Assess runs the evidence chain of AEB "Required Processing Model": VERIFIED → ACCEPTED → MATCH →
// SATISFIED → AUTHORIZED. It touches no store: reserving is Admit's job.
//
// Unlike the reservation chain, this chain does not stop at the first failure. AEB-1 keeps every
// decision separate and reports each one (a revoked artifact is still reported MATCH; see the
// revoked_evidence vector), and the reasons are the set of every failed check. Each step does
// see the earlier steps' decisions where the spec orders them: an artifact that is not VERIFIED
// takes part in no MATCH, and nothing is SATISFIED unless every artifact is ACCEPTED and MATCH.
// Fail closed: one bad artifact in the bundle makes the whole bundle unsatisfied, even if the
// remaining artifacts would fill the requirement.
func Assess(op Operation, evidence []Evidence, policy LocalPolicy, at time.Time) (Assessment, error) {
	if err := firstErr(
		validateOperation(op, "operation"),
		validateEvidenceList(evidence, "evidence"),
		checkEnum(policy.Valid(), "local_policy"),
		checkTime(at, "evaluated_at"),
	); err != nil {
		return Assessment{}, err
	}
	return assess(evidenceInput{op: op, evidence: evidence, policy: policy, at: at}), nil
}

func assess(in evidenceInput) Assessment {
	v, vr := verify(in)
	acc, ar := accept(in, v)
	m, mr := match(in, v)
	s, sr := satisfy(in, acc, m)
	z, zr := authorize(in, s)
	return Assessment{
		Verification:  v,
		Acceptance:    acc,
		ActionMatch:   m,
		Satisfaction:  s,
		Authorization: z,
		Reasons:       reasonSet(vr, ar, mr, sr, zr),
	}
}

// verify: AEB "Verify Each Native Artifact". A verifier failure or an ambiguous result is a
// bounded refusal, never an allow path. No evidence at all is FAILED, not vacuously VERIFIED:
// there is nothing the boundary could join to the action.
func verify(in evidenceInput) (Verification, []Reason) {
	failed := len(in.evidence) == 0
	indeterminate := false
	for _, e := range in.evidence {
		switch e.NativeVerification {
		case VerificationVerified:
		case VerificationIndeterminate:
			indeterminate = true
		default:
			failed = true
		}
	}
	var reasons []Reason
	if failed {
		reasons = append(reasons, ReasonNativeVerificationFailed)
	}
	if indeterminate {
		reasons = append(reasons, ReasonNativeVerificationIndeterminate)
	}
	switch {
	case failed:
		return VerificationFailed, reasons
	case indeterminate:
		return VerificationIndeterminate, reasons
	}
	return VerificationVerified, nil
}

// accept: AEB "Relying-Party Inputs and Pins" and "Security Considerations" (Freshness and
// revocation are separate checks). A status source the relying party did not pin cannot be its
// own trust anchor (rejected); a revoked artifact is rejected; an unavailable status, a status
// checked "in the future" of the trusted clock, or an artifact at or past valid_until
// (exclusive) cannot be decided either way (indeterminate).
func accept(in evidenceInput, v Verification) (Acceptance, []Reason) {
	var revoked, unpinned, stale, unavailable bool
	for _, e := range in.evidence {
		s := e.Status
		revoked = revoked || s.Verdict == StatusRevoked
		unpinned = unpinned || !s.AuthorityPinned
		unavailable = unavailable || s.Verdict == StatusUnavailable || s.CheckedAt.After(in.at)
		stale = stale || (s.Verdict == StatusCurrent && !in.at.Before(s.ValidUntil))
	}
	var reasons []Reason
	for _, f := range []struct {
		hit    bool
		reason Reason
	}{
		{revoked, ReasonEvidenceRevoked},
		{unpinned, ReasonStatusAuthorityNotPinned},
		{stale, ReasonEvidenceStale},
		{unavailable, ReasonStatusUnavailable},
	} {
		if f.hit {
			reasons = append(reasons, f.reason)
		}
	}
	switch {
	case v == VerificationFailed || revoked || unpinned:
		return AcceptanceRejected, reasons
	case v != VerificationVerified || stale || unavailable:
		return AcceptanceIndeterminate, reasons
	}
	return AcceptanceAccepted, reasons
}

// match: AEB "Establish CAID Material-Action MATCH". Only natively verified artifacts take part
// in mapping; with any unverified artifact the match is INDETERMINATE. Both the CAID and the
// normalized-action digest must equal the boundary's own: equal CAIDs over different
// normalized actions are a substitution, not a match. Equivalence is never guessed.
func match(in evidenceInput, v Verification) (ActionMatch, []Reason) {
	if v != VerificationVerified {
		return ActionMatchIndeterminate, nil
	}
	var caidMismatch, digestMismatch bool
	for _, e := range in.evidence {
		caidMismatch = caidMismatch || e.MappedCAID != in.op.CAID
		digestMismatch = digestMismatch || e.MappedActionDigest != in.op.NormalizedActionDigest
	}
	var reasons []Reason
	if caidMismatch {
		reasons = append(reasons, ReasonExactActionMismatch)
	}
	if digestMismatch {
		reasons = append(reasons, ReasonNormalizedActionMismatch)
	}
	if len(reasons) > 0 {
		return ActionMatchMismatch, reasons
	}
	return ActionMatchMatch, nil
}

// satisfy: AEB "Evaluate AEC Evidence Satisfaction", including the separation-of-duty rules the
// relying party pins (AEB "Relying-Party Inputs and Pins"). Every slot is checked; the reasons
// are those of every slot that is not filled.
func satisfy(in evidenceInput, acc Acceptance, m ActionMatch) (Satisfaction, []Reason) {
	var reasons []Reason
	for _, req := range in.op.Requirements {
		if r, failed := fillSlot(in, req); failed {
			reasons = append(reasons, r)
		}
	}
	switch {
	case acc == AcceptanceRejected || m == ActionMatchMismatch || len(reasons) > 0:
		return SatisfactionUnsatisfied, reasons
	case acc != AcceptanceAccepted || m != ActionMatchMatch:
		return SatisfactionIndeterminate, reasons
	}
	return SatisfactionSatisfied, nil
}

// slotStep narrows the artifacts that can fill one slot. The steps run in order and the first
// that leaves fewer than the slot's minimum names the reason, as in cert-manager's policy chain.
type slotStep struct {
	// applies says whether the requirement asks for this step.
	applies func(Requirement) bool
	// keep says whether an artifact survives the step.
	keep   func(Operation, Requirement, Evidence) bool
	reason Reason
}

func slotSteps() []slotStep {
	always := func(Requirement) bool { return true }
	return []slotStep{
		// The artifact's role and principal kind must both be the slot's: a workload identity
		// or a machine permit never silently fills a human-authorization slot.
		{always, func(_ Operation, r Requirement, e Evidence) bool {
			return e.Role == r.Role && e.PrincipalKind == r.PrincipalKind
		}, ReasonRequiredRoleUnsatisfied},
		// Separation of duties: the initiator cannot approve its own operation.
		{func(r Requirement) bool { return r.ExcludeInitiator }, func(op Operation, _ Requirement, e Evidence) bool {
			return e.PrincipalID != op.InitiatorID
		}, ReasonInitiatorSelfApprovalRefused},
		// Separation of duties: nor can the executor.
		{func(r Requirement) bool { return r.ExcludeExecutor }, func(op Operation, _ Requirement, e Evidence) bool {
			return e.PrincipalID != op.ExecutorID
		}, ReasonExecutorSelfApprovalRefused},
	}
}

// fillSlot reports the first reason the slot cannot be filled. Every presented artifact is a
// candidate; satisfy separately refuses the bundle if any artifact is unverified, unaccepted or
// unmatched, so counting them here cannot turn a bad bundle into SATISFIED.
func fillSlot(in evidenceInput, req Requirement) (Reason, bool) {
	eligible := in.evidence
	for _, step := range slotSteps() {
		if !step.applies(req) {
			continue
		}
		var kept []Evidence
		for _, e := range eligible {
			if step.keep(in.op, req, e) {
				kept = append(kept, e)
			}
		}
		if len(kept) < req.Minimum {
			return step.reason, true
		}
		eligible = kept
	}
	// A quorum of distinct principals counts people, not artifacts: two approvals by one
	// principal are one approval.
	if req.DistinctPrincipals {
		principals := map[string]bool{}
		for _, e := range eligible {
			principals[e.PrincipalID] = true
		}
		if len(principals) < req.Minimum {
			return ReasonDistinctPrincipalQuorumUnsatisfied, true
		}
	}
	return "", false
}

// authorize: AEB "Make the Local Authorization Decision" — separate from and after SATISFIED.
// A local DENY is definite whatever the evidence says; otherwise AUTHORIZED needs SATISFIED.
func authorize(in evidenceInput, s Satisfaction) (Authorization, []Reason) {
	switch {
	case in.policy != PolicyPermit:
		return AuthorizationNotAuthorized, []Reason{ReasonLocalPolicyDenied}
	case s == SatisfactionSatisfied:
		return AuthorizationAuthorized, nil
	case s == SatisfactionIndeterminate:
		return AuthorizationIndeterminate, nil
	}
	return AuthorizationNotAuthorized, nil
}
