package sidecar

import (
	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/review"
)

// levelProblem is the readiness problem of the authority service's review protocol level
// (docs/architecture.md "Version skew between sidecars and the authority service"), from the
// last answer the sidecar's client received on any request: a service older than the sidecar
// accepts is diag.AuthorityTooOld, a service refusing the sidecar's level as too old
// diag.SidecarTooOld. ok is true when neither is the case (or nothing has answered yet). The
// sidecar recovers without a restart: the next answer of a good level clears it.
func (rd *readiness) levelProblem() (p diag.Problem, ok bool) {
	if rd.level == nil {
		return diag.Problem{}, true
	}
	st := rd.level()
	switch {
	case st.TooOld():
		return diag.New(diag.AuthorityTooOld, "authority", st.Problem()), false
	case st.Refused == review.ReasonSidecarTooOld:
		return diag.New(diag.SidecarTooOld, "authority", st.Problem()), false
	}
	return diag.Problem{}, true
}

// isLevelReason reports whether reason is one levelProblem reports: the policy source's record
// of the same condition is left out, levelProblem's being the newer (any request's answer).
func isLevelReason(reason string) bool {
	return reason == diag.AuthorityTooOld || reason == diag.SidecarTooOld
}
