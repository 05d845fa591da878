package hostloop

import (
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// hotPathAllow is the Decision of a call the policy allows without authority (Handle's result
// once the Invoker said allow): nothing was consumed or journaled, so it carries no authority
// or operation.
func hotPathAllow(res sink.Result) Decision {
	return Decision{Allow: true, ActID: res.ActID, AuditCode: res.AuditCode, Resolutions: res.Resolutions}
}

// journaledAllow is the Decision of a dispatch under authority: the authority is consumed and
// the dispatch journaled DISPATCH_PENDING; the host reports its outcome with the operation id.
func journaledAllow(inv sink.Invocation, actID string) Decision {
	return Decision{Allow: true, AuthorityID: inv.AuthorityID, OperationID: inv.OperationID, State: journal.StateDispatchPending, ActID: actID}
}

// replayedDecision is the Decision of a retry of a dispatch already settled in the session: not
// to be run again; the recorded result is the tool's result (tool-use-binding §9).
func replayedDecision(res sink.Result) Decision {
	return Decision{Replayed: true, Result: res.Upstream, Message: res.Message, ActID: res.ActID, State: res.State,
		OperationID: res.OperationID, Resolutions: res.Resolutions}
}

// refusedDecision is the Decision of a refusal, with the deny payload in the block's vendor
// shape.
func refusedDecision(res sink.Result, vendor act.Vendor, vendorID string) Decision {
	d := Decision{Code: res.Code, Message: res.Message, ActID: res.ActID, Retryable: res.Code.Retryable(), Resolutions: res.Resolutions,
		State: res.State, RetryAfter: int64(res.RetryAfter / time.Second)}
	if res.Moment != nil {
		d.BindingMoments = []string{res.Moment.ID}
		d.EnvelopeDigest = res.Moment.Digest
		if res.Moment.Envelope != nil {
			d.BindingMoment = res.Moment.Envelope.Canonical()
		}
	}
	if vendor != "" {
		if b, err := act.DenyResult(vendor, vendorID, act.Denial{Code: res.Code, Message: res.Message}); err == nil {
			d.Deny = b
		}
	}
	return d
}

func orDescription(code ef.EFCode, msg string) string {
	if msg == "" {
		return code.Description()
	}
	return msg
}

func actCode(err error) string {
	if c, ok := act.CodeOf(err); ok {
		return string(c)
	}
	return "unknown"
}
