package agent2026

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// slRefusal is an upstream's authoritative refusal of a tools/call before execution, with the
// HTTP status it came with (2026-07-28 answers some refusals with HTTP 400; the agent gets the
// upstream's answer as it was given).
type slRefusal struct {
	toolcall.Refusal
	status atomic.Int32
}

// statelessCall is a 2026-07-28 tools/call: one act through the gate, in the agent's scope
// (stateless.Scope; an input-required continuation in a narrower one, stateless.ContinuationScope), with
// the same outcomes as a session's (bridge.callTool) rendered as 2026-07-28 results. An
// upstream refusal before execution is recorded in refused.
//
//nolint:gocyclo // the order of a 2026-07-28 tools/call's checks (headers, agent, replay, sink, continuation) reads as one sequence
func (p *Handler) statelessCall(ctx context.Context, mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request, refused *slRefusal) *jsonrpc.Response {
	id := sr.Req.ID
	reply := func(raw json.RawMessage, err error) *jsonrpc.Response {
		if err != nil {
			p.log.Error(err, "Result could not be rendered")
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: result could not be rendered"}}
		}
		return &jsonrpc.Response{ID: id, Result: stateless.WithResultType(raw)}
	}
	render := func(r *toolcall.RawResult, err error) *jsonrpc.Response {
		if err != nil {
			return reply(nil, err)
		}
		raw, err := r.MarshalJSON()
		return reply(raw, err)
	}
	scope := stateless.ContinuationScope(stateless.Scope(p.cfg.Server, agent), sr.Params["requestState"], sr.Params["inputResponses"])
	raw := sr.Params["arguments"]
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	if sr.Name == sink.RequestBindingMomentTool {
		r, _, err := toolcall.Moment(ctx, p.cfg.Gate, p.log, scope, agent, raw)
		return render(r, err)
	}
	args, fwd, canonical := toolcall.Arguments(raw) // the hand-off (toolcall), as a session's call
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(sr.Params["_meta"], &meta)
	call := sink.Call{
		Session: scope, Agent: agent, Server: p.cfg.Server, Destination: p.cfg.URL,
		Tool: sr.Name, Args: args, Vendor: act.VendorMCP,
	}
	if s, ok := id.Raw().(string); ok {
		call.VendorID = wire.Clip(s, 128)
	} else if n, ok := id.Raw().(int64); ok {
		call.VendorID = strconv.FormatInt(n, 10)
	}
	if p.cfg.TrustDeclaredProvenance {
		var prov string
		if json.Unmarshal(meta[toolcall.MetaProvenance], &prov) == nil {
			call.Provenance = prov
		}
	}
	if !p.sl.tasks.reserve(agent) {
		return p.taskLimited2026(id)
	}
	if !p.owners.Reserve(agent) { // any tools/call may create a task: its creator is remembered (taskowners.go)
		p.sl.tasks.release(agent)
		return p.taskLimited2026(id)
	}
	inv := p.statelessInvoker(mode, agent, hdr, sr, fwd, refused)
	res, err := p.cfg.Gate.Handle(context.WithoutCancel(ctx), call, inv)
	p.owners.LearnCreated(agent, res, true)
	if !p.followTask2026(agent, res) {
		p.sl.tasks.release(agent)
	}
	if res.Allowed && len(res.Accepted) > 0 {
		res.Upstream = res.Accepted // the task's handle, to the call and to a retry
	}
	h := toolcall.Handoff{Log: p.log, Tool: sr.Name, Session: scope, Canonical: canonical}
	res, verdict := h.Decide(h.Settle(res, err), refused.Get(), true)
	switch verdict {
	case toolcall.UpstreamRefused:
		return &jsonrpc.Response{ID: id, Error: refused.Get()}
	case toolcall.Allowed:
		resp := render(toolcall.AllowedResult(res))
		if res.Replayed && resp.Error == nil {
			resp.Extra = replayMark{} // the recorded result as first given; the replay in a header (agent2025's replayheader.go)
		}
		return resp
	}
	// No session remembers which tools declare an outputSchema: a refusal never carries
	// structuredContent on 2026-07-28 (its text, _meta code and binding_moment do).
	return render(toolcall.RefusalFor(res, false))
}

// statelessInvoker sends the authorised tools/call upstream once: the agent's params with the
// canonical arguments and the sink's operation id in _meta, nothing else changed. An
// input-required result is recorded FAILED: the server did not run the call.
func (p *Handler) statelessInvoker(mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request, args json.RawMessage, refused *slRefusal) sink.Invoker {
	return func(ctx context.Context, operationID string) (sink.InvokeResult, error) {
		if args == nil {
			return upstream.NotSent("the arguments could not be canonicalized; the call was not sent"), nil
		}
		if hc := heldOf(ctx); hc != nil {
			hc.setOperation(operationID)
		}
		// The params are written once, in the form the upstream takes: a stateful upstream's
		// without the members forStateful removes, so that statelessSend finds none to remove.
		stateful := mode != modeStateless
		params := make(map[string]json.RawMessage, len(sr.Params)+1)
		for k, v := range sr.Params {
			if !stateful || (k != "requestState" && k != "inputResponses") {
				params[k] = v
			}
		}
		params["arguments"] = args
		agentMeta := sr.Meta()
		meta := make(map[string]json.RawMessage, len(agentMeta)+1)
		for k, v := range agentMeta {
			if !stateful || !strings.HasPrefix(k, revisionMetaPrefix) {
				meta[k] = v
			}
		}
		op, _ := json.Marshal(operationID)
		meta[toolcall.MetaOperationID] = op
		// Every value is one JSON value: the agent's as decoded, the canonical arguments, and
		// the operation id encoded above.
		params["_meta"] = wire.EncodeObject(meta)
		body := wire.EncodeObject(params)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CallTimeout)
		defer cancel()
		var a upstream.Attempt
		// The agent's Mcp-Param-* headers each copy a value of the arguments the gate decided on
		// (stateless.CheckParamHeaders).
		resp, status, err := p.statelessSend(a.Bind(ctx), mode, agent, statelessHeaders(hdr, sr, true), sr, body, false)
		if err != nil {
			switch {
			case errors.Is(err, errNoUpstream):
				return upstream.NotSent(fmt.Sprintf("actgate: upstream %q could not be reached; the call was not sent", p.cfg.Server)), nil
			case !a.Wrote():
				return upstream.Unsent(&a, err), nil
			case upstream.RedirectStatus(status):
				return upstream.Redirected(status), nil
			case upstream.RefusedStatus(status):
				return upstream.Refused(status), nil
			}
			p.log.Info("Upstream tools/call failed", "tool", logfield.Bound(sr.Name), "operation", operationID, "cause", upstream.SafeCause(err, &a))
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, err
		}
		if resp.Error != nil {
			var werr *jsonrpc.Error
			if !errors.As(resp.Error, &werr) {
				return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, fmt.Errorf("mcpproxy: upstream answered an error")
			}
			switch werr.Code {
			case wire.CodeParseError, wire.CodeInvalidRequest, wire.CodeMethodNotFound, wire.CodeInvalidParams, wire.CodeURLElicitationRequired,
				wire.CodeHeaderMismatch, wire.CodeUnsupportedProtocolVersion,
				wire.CodeMissingClientCapability:
				refused.Set(werr)
				refused.status.Store(int32(min(max(status, 200), 599)))
				return upstream.Failed(fmt.Sprintf("the upstream refused the call: JSON-RPC error %d: %s", werr.Code, wire.Clip(werr.Message, 200))), nil
			}
			// Any other error answer may come from a handler that had already acted.
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, fmt.Errorf("mcpproxy: upstream answered JSON-RPC error %d", werr.Code)
		}
		var r struct {
			IsError    bool   `json:"isError"`
			ResultType string `json:"resultType"`
		}
		// One read for both members; the decoder keeps reading past a member of the wrong type.
		_ = json.Unmarshal(resp.Result, &r)
		if r.IsError || r.ResultType == wire.ResultTypeInputRequired {
			return sink.InvokeResult{Result: resp.Result, Outcome: sink.OutcomeFailed}, nil
		}
		// A CreateTaskResult: the upstream accepted the call to run it as a task.
		return tasks.Classify(resp.Result, sink.InvokeResult{Result: resp.Result, Outcome: sink.OutcomeExecuted}, tasks.ParseCreated2026), nil
	}
}

// safeRPC names a JSON-RPC error by its code only (its message may quote the request).
func safeRPC(err error) string {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return "JSON-RPC error " + strconv.FormatInt(werr.Code, 10)
	}
	return "an error"
}

// revisionMetaPrefix begins the names of the 2026-07-28 per-request _meta members.
const revisionMetaPrefix = "io.modelcontextprotocol/"

// forStateful returns params as a stateful upstream session takes them: without the
// 2026-07-28 per-request _meta members (io.modelcontextprotocol/…: the session's version and
// the client's capabilities are the session's, and a stateful server refuses a request that
// carries them) and, unless keepRound, without requestState and inputResponses, the members a
// stateful upstream does not know (its requests for input are answered on its session,
// stateless_rounds.go; a tasks/update keeps them: its inputResponses are the request itself).
// Every other member is kept as written; params that are not an object, or carry none of
// these, are returned unchanged.
func forStateful(params json.RawMessage, keepRound bool) json.RawMessage {
	if !mayCarryRevisionMembers(params, keepRound) {
		return params
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		return params
	}
	changed := false
	if !keepRound {
		for _, k := range []string{"requestState", "inputResponses"} {
			if _, ok := m[k]; ok {
				delete(m, k)
				changed = true
			}
		}
	}
	var meta map[string]json.RawMessage
	if raw, ok := m[memberMeta]; ok && json.Unmarshal(raw, &meta) == nil && meta != nil {
		stripped := false
		for k := range meta {
			if strings.HasPrefix(k, revisionMetaPrefix) {
				delete(meta, k)
				stripped = true
			}
		}
		switch {
		case !stripped:
		case len(meta) == 0:
			delete(m, memberMeta)
			changed = true
		default:
			m[memberMeta] = wire.EncodeObject(meta)
			changed = true
		}
	}
	if !changed {
		return params
	}
	return wire.EncodeObject(m)
}

// mayCarryRevisionMembers reports whether params may have a member forStateful removes. A
// member name is written either literally or with escapes (\uXXXX, \/), so params whose bytes
// contain neither the name nor an escape that could spell it carry none, without a parse.
func mayCarryRevisionMembers(params json.RawMessage, keepRound bool) bool {
	if bytes.Contains(params, []byte(`\u`)) || bytes.Contains(params, []byte(`modelcontextprotocol`)) {
		return true
	}
	return !keepRound && (bytes.Contains(params, []byte(`requestState`)) || bytes.Contains(params, []byte(`inputResponses`)))
}

// replayMark is set as the jsonrpc.Response.Extra (not on the wire) of a 2026-07-28 answer that
// is a journal replay: the answer may reach the agent on another HTTP request than the one
// that computed it (a held exchange's continuation, stateless_rounds.go).
type replayMark struct{}

// isReplay reports whether resp is marked a journal replay (replayMark).
func isReplay(resp *jsonrpc.Response) bool {
	_, ok := resp.Extra.(replayMark)
	return ok
}
