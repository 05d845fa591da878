package hostloop

import (
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/sink"
)

// refusedDecision is the Decision of a refusal, with the deny payload in the block's vendor
// shape.
func refusedDecision(res sink.Result, vendor act.Vendor, vendorID string) Decision {
	d := Decision{Code: res.Code, Message: res.Message, ActID: res.ActID, Retryable: res.Code.Retryable(), Resolutions: res.Resolutions,
		State: res.State}
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
