package policy

import (
	"fmt"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
)

// ElicitationEligible reports whether moments of class c may ever be offered as an MCP
// elicitation (spec.elicitation). Only INFORMATIONAL may.
//
// An elicitation is answered in the MCP client the agent runs in. envelope-04 §12.4: a
// binding moment that delegates a consequential action SHOULD be rendered on a surface bound
// to the principal's own handle, so that an agent session holding the principal's session
// credential cannot resolve it. The classes of tool-use-binding §10/§20 map as follows:
//
//	FINANCIAL                payout, refund, capture, wire: consequential
//	NETWORK_CONTROL          deploy, kubectl, iam_attach (identity and permissions): consequential
//	COMMUNICATION            email_send, slack_post, tweet, computer_use submit: speaks to
//	                         other parties on the principal's behalf
//	DATA_DISCLOSURE          releases data to another party (computer use, export, share)
//	PERSISTENT_STATE_CHANGE  file_write, db_update, delete, drop, shell: destructive writes
//	                         are in this class and the class cannot tell them apart
//	PHYSICAL                 actuates the physical world
//	OTHER                    unknown: treated as high consequence
//	INFORMATIONAL            search, retrieve: nothing changes; eligible
//
// The CRD's CEL rule on spec.elicitation.classes states the same set; keep them together.
func ElicitationEligible(c act.ConsequenceClass) bool {
	return c == act.ClassInformational
}

// compileElicitation checks spec.elicitation and records its classes.
func compileElicitation(ps *problems, c *Compiled, e *v1alpha1.ElicitationPolicy) {
	if e == nil {
		return
	}
	if len(e.Classes) == 0 {
		ps.add("spec.elicitation.classes", ReasonInvalidSpec, "at least one class (or omit elicitation)")
	}
	if len(e.Classes) > 8 {
		ps.add("spec.elicitation.classes", ReasonInvalidSpec, "at most 8 classes")
	}
	seen := map[act.ConsequenceClass]bool{}
	for i, k := range e.Classes {
		f := fmt.Sprintf("spec.elicitation.classes[%d]", i)
		cl := act.ConsequenceClass(k)
		switch {
		case !cl.Valid():
			ps.add(f, ReasonInvalidSpec, fmt.Sprintf("%q is not a consequence class", string(k)))
		case !ElicitationEligible(cl):
			ps.add(f, ReasonInvalidSpec, fmt.Sprintf("%s moments must be resolved on the principal's own surface, never by an elicitation "+
				"in the agent's MCP client (envelope-04 §12.4); only INFORMATIONAL may be listed", cl))
		case seen[cl]:
			ps.add(f, ReasonInvalidSpec, fmt.Sprintf("duplicate class %s", cl))
		default:
			if c.elicitation == nil {
				c.elicitation = map[act.ConsequenceClass]bool{}
			}
			c.elicitation[cl] = true
		}
		seen[cl] = true
	}
}

// ElicitationAllowed reports whether a binding moment of class cl may also be offered as an
// MCP elicitation under this policy: spec.elicitation lists it (and it is eligible). False
// for a nil policy, an empty class and a policy in Audit mode (audit never escalates).
func (c *Compiled) ElicitationAllowed(cl act.ConsequenceClass) bool {
	if c == nil || c.audit {
		return false
	}
	return c.elicitation[cl] && ElicitationEligible(cl)
}
