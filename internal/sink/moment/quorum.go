package moment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/aeb"
	"github.com/actgate/actgate/internal/jcs"
)

// Quorum decides, with the AEB evidence chain, whether the principals who chose option idx
// fill the rule's human-authorization requirement: m.Min distinct principals, never the
// initiating agent (and, with separation of duties, never the sink sinkID), each a verified
// resolution of this envelope for exactly this action (action-evidence-boundary "Evaluate AEC
// Evidence Satisfaction", "Make the Local Authorization Decision").
func Quorum(m *Moment, idx int, voters []string, sinkID string, now time.Time) (bool, error) {
	opt := m.Options[idx]
	caid, err := aeb.CAIDFromDigest(aeb.ActionTypeToolCall, opt.ActionDigest)
	if err != nil {
		return false, fmt.Errorf("sink: quorum: %w", err)
	}
	norm := normalizedAction(opt, sinkID)
	op := aeb.Operation{
		OperationID:            aebID("moment", m.ID),
		ProviderID:             aebID("dest", opt.Destination),
		InitiatorID:            aebID("p", m.Agent),
		ExecutorID:             aebID("p", sinkID),
		CAID:                   caid,
		NormalizedActionDigest: norm,
		Requirements: []aeb.Requirement{{
			Role: aeb.RoleHumanAuthorization, PrincipalKind: aeb.PrincipalHuman, Minimum: m.Min,
			DistinctPrincipals: true, ExcludeInitiator: true, ExcludeExecutor: m.SoD,
		}},
	}
	if len(voters) > aeb.MaxEvidence {
		voters = voters[:aeb.MaxEvidence]
	}
	evidence := make([]aeb.Evidence, 0, len(voters))
	for _, p := range voters {
		unit := jcs.Digest([]byte(m.Env.Digest() + "\x00" + p + "\x00" + opt.ActionDigest))
		evidence = append(evidence, aeb.Evidence{
			WrapperDigest:      unit,
			NativeReplayUnit:   unit,
			NativeVerification: aeb.VerificationVerified,
			MappedCAID:         caid,
			MappedActionDigest: norm,
			Role:               aeb.RoleHumanAuthorization,
			PrincipalKind:      aeb.PrincipalHuman,
			PrincipalID:        aebID("p", p),
			Status: aeb.Status{Verdict: aeb.StatusCurrent, AuthorityPinned: true,
				CheckedAt: now, ValidUntil: m.Expires},
		})
	}
	a, err := aeb.Assess(op, evidence, aeb.PolicyPermit, now)
	if err != nil {
		return false, fmt.Errorf("sink: quorum: %w", err)
	}
	return a.Authorization == aeb.AuthorizationAuthorized, nil
}

// normalizedAction is the digest of the bound projection an authority names: tool, arguments
// digest, destination and sink (internal/aeb doc: "NormalizedActionDigest").
func normalizedAction(o Option, sinkID string) string {
	b, _ := json.Marshal([]string{"actgate.normalized-action.1", o.Tool, o.ArgsDigest, o.Destination, sinkID})
	return jcs.Digest(b)
}

// aebID spells an identity in the AEB identifier syntax: as is when it fits, else a digest of
// it under a prefix (so one identity always maps to one identifier and two never collide).
func aebID(prefix, s string) string {
	if s != "" && len(s) <= 200 && isAEBIdent(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return prefix + "-" + hex.EncodeToString(sum[:20])
}

func isAEBIdent(s string) bool {
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
