package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/sink"
)

// Arguments returns a tools/call's arguments (absent ones already made {}: tool-use-binding §8
// mapping) as the sink digests them and as they are forwarded: their RFC 8785 canonical form,
// so that what runs is what was authorised. Arguments that cannot be canonicalized go to the
// sink as received, to be refused there with its code; they are never forwarded: fwd and
// canonical are nil.
func Arguments(raw json.RawMessage) (args, fwd json.RawMessage, canonical []byte) {
	c, err := jcs.Canonicalize(raw, jcs.Full)
	if err != nil {
		return raw, nil, nil
	}
	if c == nil {
		c = []byte{}
	}
	return json.RawMessage(c), json.RawMessage(c), c
}

// Handoff is one tools/call the gate has answered (Gate.Handle), as either revision read it:
// what both do with the sink's result before they write it in their own framing (Settle, then
// Decide). Its log lines name the arguments by digest only (docs/architecture.md "Privacy").
type Handoff struct {
	Log       logr.Logger
	Tool      string
	Session   string
	Canonical []byte // the canonical arguments (Arguments); nil when they are not canonicalizable
}

// logger is built only when something will be logged, to keep the hot path free of it.
func (h *Handoff) logger() logr.Logger {
	l := h.Log.WithValues("tool", logfield.Bound(h.Tool), "session", h.Session)
	if h.Canonical != nil {
		l = l.WithValues("argumentsDigest", jcs.Digest(h.Canonical))
	}
	return l
}

// Settle takes the gate's answer: an error after dispatch (sink.ErrUpstream) leaves the act
// INDETERMINATE in the journal; any other error means the gate could not finish, and the call
// is refused unless the upstream already answered (the journal has the truth; a refusal cannot
// undo an effect that happened). A retry of an act whose outcome was settled after the fact, by
// authenticated reconciliation, gets SettledResult: the upstream's result was never received.
func (h *Handoff) Settle(res sink.Result, err error) sink.Result {
	switch {
	case err == nil:
	case errors.Is(err, sink.ErrUpstream):
		h.logger().Info("Upstream outcome unknown", "act", res.ActID, "state", res.State, "operation", res.OperationID)
	default:
		h.logger().Error(err, "Gate failed", "act", res.ActID, "invoked", res.Invoked, "state", res.State)
		if res.Code == "" {
			res.Code = ef.EFStoreUnavailable
		}
	}
	if res.Allowed && res.Replayed && len(res.Upstream) == 0 && res.State.Terminal() {
		res.Upstream = SettledResult(res.State)
	}
	return res
}

// Verdict is what the agent is answered for a settled call.
type Verdict int

const (
	// UpstreamRefused: the upstream's own JSON-RPC error, as it wrote it.
	UpstreamRefused Verdict = iota
	// Allowed: the upstream's result (AllowedResult).
	Allowed
	// Refused: the gate's refusal (RefusalFor), with its EF code.
	Refused
)

// Decide chooses the answer to a settled call (Settle). When the upstream refused the call with
// a JSON-RPC error before executing it (refused: the invoker's Refusal) the agent gets that
// error as the upstream wrote it, code, message and data (a -32042 URL elicitation among
// them), as it would without the gate; a session's call only when the act is FAILED or has no
// journal state (a hot-path call), a 2026-07-28 call whatever its state (anyState). An allowed
// call with a result gets the result; anything else is refused, an allowed call without a
// result to return as EF_INDETERMINATE (its outcome is not known to this call).
func (h *Handoff) Decide(res sink.Result, refused *jsonrpc.Error, anyState bool) (sink.Result, Verdict) {
	if refused != nil && res.Allowed && res.Invoked && !res.Replayed && (anyState || res.State == "" || res.State == journal.StateFailed) {
		h.logger().Info("Call refused by the upstream", "act", res.ActID, "code", refused.Code)
		return res, UpstreamRefused
	}
	if res.Allowed && len(res.Upstream) > 0 {
		if h.Log.V(1).Enabled() {
			h.logger().V(1).Info("Call allowed", "act", res.ActID, "invoked", res.Invoked, "replayed", res.Replayed, "state", res.State)
		}
		return res, Allowed
	}
	if res.Code == "" || res.Allowed {
		if res.Code == "" {
			res.Code = ef.EFIndeterminate
		}
		res.Allowed = false
	}
	h.logger().Info("Call refused", "act", res.ActID, "code", res.Code, "state", res.State, "invoked", res.Invoked, "escalated", res.Moment != nil)
	return res, Refused
}

// Moment is the virtual request_binding_moment tool (envelope-04 §8): the proposal in raw is
// handed to the gate in the session's scope. It returns the result to render and the moment
// registered, nil when refused (the refusal names the defect, never more than the agent's own
// field names).
func Moment(ctx context.Context, g Gate, log logr.Logger, session, agent string, raw json.RawMessage) (*RawResult, *sink.MomentRef, error) {
	p, err := sink.ParseProposal(raw)
	if err != nil {
		r, err := RefusalResult(sink.Result{Code: ef.EFMomentInvalid, Message: strings.TrimPrefix(err.Error(), sink.ErrProposal.Error()+": ")})
		return r, nil, err
	}
	res, err := g.RequestMoment(context.WithoutCancel(ctx), session, agent, p)
	if err != nil {
		log.Error(err, "Gate failed to register a binding moment")
		if res.Code == "" {
			res.Code = ef.EFStoreUnavailable
		}
		res.Moment = nil
	}
	if res.Moment != nil && res.Moment.Envelope != nil {
		log.Info("Binding moment registered", "moment", res.Moment.ID, "envelope", res.Moment.Envelope.Digest())
		r, err := RegisteredMoment(res.Moment, res.Resolutions)
		return r, res.Moment, err
	}
	if res.Code == "" {
		res.Code = ef.EFMomentInvalid
	}
	log.Info("Binding moment refused", "code", res.Code)
	r, err := RefusalResult(res)
	return r, nil, err
}
