package policy

import (
	"errors"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Why a resolver does not count towards a human authorization. The sink branches on them when
// it counts BindingMoment resolutions.
var (
	// ErrNotHumanAuthorization: the decision does not require human authorization, so no
	// resolution can count towards it.
	ErrNotHumanAuthorization = errors.New("policy: the decision does not require human authorization")
	// ErrNotPrincipal: the resolver is not one of the rule's principals.
	ErrNotPrincipal = errors.New("policy: the resolver is not a principal of the governing rule")
	// ErrInitiator: the resolver is the agent that initiated the call. It never counts, whatever
	// separationOfDuties says (docs/architecture.md "Principals": the agent's service account can
	// never resolve its own escalation).
	ErrInitiator = errors.New("policy: the initiating agent cannot authorize its own call")
	// ErrExecutor: the resolver is the sink that will execute the call, and separation of
	// duties is on (action-evidence-boundary, "separation-of-duty rule").
	ErrExecutor = errors.New("policy: the executing sink cannot authorize a call it executes")
)

// MinPrincipals is how many distinct eligible principals must each resolve the decision's
// binding moment with the option for this exact call: 0 when the decision does not require
// human authorization, else the requirement's minPrincipals (at least 1).
func MinPrincipals(d Decision) int {
	if d.Evidence.Role != v1alpha1.EvidenceRoleHumanAuthorization {
		return 0
	}
	if d.Evidence.MinPrincipals < 1 {
		return 1
	}
	return int(d.Evidence.MinPrincipals)
}

// separationOfDuties is the decision's rule, defaulting to true.
func separationOfDuties(d Decision) bool {
	return d.Evidence.SeparationOfDuties == nil || *d.Evidence.SeparationOfDuties
}

// eligible: p may fill the human slot for a call initiated by agent and executed by executor.
// The initiator is always excluded; the executor only under separation of duties.
func eligible(p, agent, executor string, sod bool) bool {
	switch {
	case p == "":
		return false
	case agent != "" && p == agent:
		return false
	case sod && executor != "" && p == executor:
		return false
	}
	return true
}

// ValidResolver reports whether principal may count towards the human authorization d
// requires, for a call initiated by agent and executed by executor (the sink id): nil, or one
// of ErrNotHumanAuthorization, ErrNotPrincipal, ErrInitiator, ErrExecutor. Identities are
// compared exactly (Kubernetes user names are case-sensitive).
func ValidResolver(d Decision, principal, agent, executor string) error {
	if d.Evidence.Role != v1alpha1.EvidenceRoleHumanAuthorization {
		return ErrNotHumanAuthorization
	}
	listed := false
	for _, p := range d.Evidence.Principals {
		if p != "" && p == principal {
			listed = true
			break
		}
	}
	switch {
	case !listed:
		return ErrNotPrincipal
	case agent != "" && principal == agent:
		return ErrInitiator
	case separationOfDuties(d) && executor != "" && principal == executor:
		return ErrExecutor
	}
	return nil
}

// EligiblePrincipals lists, in the rule's order, the principals of d who may resolve it for a
// call initiated by agent and executed by executor; nil when d does not require human
// authorization. The BindingMoment is addressed to these.
func EligiblePrincipals(d Decision, agent, executor string) []string {
	if d.Evidence.Role != v1alpha1.EvidenceRoleHumanAuthorization {
		return nil
	}
	var out []string
	for _, p := range d.Evidence.Principals {
		if ValidResolver(d, p, agent, executor) == nil {
			out = append(out, p)
		}
	}
	return out
}

// Satisfied reports whether resolvers, the users who each resolved the binding moment by
// selecting the option for this exact call, fill d's human authorization: at least
// MinPrincipals distinct users for whom ValidResolver is nil. Repeats and ineligible users do
// not count. It is false when d does not require human authorization.
func Satisfied(d Decision, resolvers []string, agent, executor string) bool {
	need := MinPrincipals(d)
	if need == 0 {
		return false
	}
	seen := make(map[string]bool, len(resolvers))
	for _, p := range resolvers {
		if seen[p] || ValidResolver(d, p, agent, executor) != nil {
			continue
		}
		seen[p] = true
	}
	return len(seen) >= need
}
