package agent2025

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/elicitform"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tracing"
)

// errNotCanonical is the invoker's refusal to forward arguments it could not canonicalize.
var errNotCanonical = errors.New("mcpproxy: arguments are not RFC 8785 canonicalizable; not forwarded")

// callTool is tools/call: one act through the gate (tool-use-binding §8, §15
// HANDLE_MCP_TOOLS_CALL).
func (b *bridge) callTool(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	params := req.Params
	if params == nil || params.Name == "" {
		return nil, &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "tools/call: params.name is required"}
	}
	if params.Name == sink.RequestBindingMomentTool {
		return b.requestMoment(ctx, params)
	}
	ctx, span := b.p.startCall(ctx, req)
	defer span.End()
	raw := params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}") // absent arguments are {} (tool-use-binding §8 mapping)
	}
	args, fwd, canonical := toolcall.Arguments(raw) // the hand-off (toolcall): what the sink digests is what is forwarded
	call := sink.Call{
		Session:     b.ss.ID(),
		Agent:       b.agent,
		Server:      b.p.cfg.Server,
		Destination: b.p.cfg.URL,
		Tool:        params.Name,
		Args:        args,
		Provenance:  b.provenance(params.Meta),
		Vendor:      act.VendorMCP,
	}
	task := taskOf(ctx) // a task-augmented call (tasks.go; its place is reserved by serveToolsCall)
	// Once the gate has started, the agent cancelling its request must not abandon a dispatch
	// half way: the invocation has its own bound (Config.CallTimeout).
	var refused toolcall.Refusal
	var upstreamSession string
	res, err := b.handleTask(ctx, call, b.invoker(params.Name, fwd, params.GetProgressToken(), &refused, task, &upstreamSession), task)
	res = b.taskAnswer(task, res, upstreamSession)
	if span.IsRecording() {
		tool := logfield.Bound(params.Name)
		span.SetAttributes(tracing.AttrServer.String(call.Server), tracing.AttrTool.String(tool),
			tracing.AttrActID.String(res.ActID), tracing.AttrAllowed.Bool(res.Allowed), tracing.AttrCode.String(string(res.Code)))
		span.SetAttributes(tracing.ToolCallAttributes(tool, b.agentVersion(params.Meta))...)
		if res.Code != ef.EFUnknownTool {
			// A tool the policy knows names the span; an unknown one would let an agent grow
			// the set of span names.
			span.SetName(tracing.ToolCallSpanName(tool))
		}
		if res.Code != "" {
			span.SetAttributes(tracing.ErrorType(string(res.Code)))
		}
		if canonical != nil {
			span.SetAttributes(tracing.AttrArgsDigest.String(jcs.Digest(canonical)))
		}
	}
	h := toolcall.Handoff{Log: b.p.log, Tool: params.Name, Session: call.Session, Canonical: canonical}
	res = h.Settle(res, err)
	rerr := refused.Get()
	// An answer that is not the upstream's gets an id of the gate's own on a resumable stream.
	answerstream.Of(ctx).AnswerFrom(toolcall.UpstreamsAnswer(res, rerr != nil))
	res, verdict := h.Decide(res, rerr, false)
	switch verdict {
	case toolcall.UpstreamRefused:
		return nil, rerr
	case toolcall.Allowed:
		if res.Replayed {
			b.markReplayed(ctx, req) // the recorded result as first given; the replay in a header (replayheader.go)
		}
		return b.render(toolcall.AllowedResult(res))
	}
	structured := !b.hasOutputSchema(params.Name)
	if res.Moment != nil { // also offered as an elicitation where policy allows (elicit.go)
		out := b.elicit(ctx, res.Moment)
		r, err := b.render(toolcall.RefusalFor(res, structured))
		return elicitform.With(r, out), err
	}
	return b.render(toolcall.RefusalFor(res, structured))
}

// startCall starts the tools/call span as the root of the gate's own trace, linked to the
// agent's W3C trace context: the request's traceparent header, or params._meta's (which wins
// when both are present, as the more specific). The agent's context is linked, never
// continued (tracing.StartCall). With tracing off it returns ctx unchanged.
func (p *Handler) startCall(ctx context.Context, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	if p.tracer != nil {
		if req.Extra != nil {
			ctx = tracing.ExtractAgent(ctx, req.Extra.Header)
		}
		ctx = tracing.ExtractAgentMeta(ctx, req.Params.Meta)
	}
	return tracing.StartCall(ctx, p.tracer, tracing.MethodToolsCall, trace.SpanKindServer)
}

// agentVersion is the MCP revision the agent speaks on this call: its request's
// _meta["io.modelcontextprotocol/protocolVersion"] (2026-07-28 and later), else the version its
// initialize asked for; bounded, as the agent wrote it.
func (b *bridge) agentVersion(meta mcp.Meta) string {
	if v, ok := meta[wire.MetaProtocolVersion].(string); ok {
		return logfield.Bound(v)
	}
	return logfield.Bound(b.requested)
}

// render turns a rendering failure into an internal error the agent sees (nothing ran that a
// rendering failure could hide: refusals are rendered only for calls not invoked by them).
func (b *bridge) render(r *toolcall.RawResult, err error) (mcp.Result, error) {
	if err != nil {
		b.p.log.Error(err, "Result could not be rendered")
		return nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: result could not be rendered"}
	}
	return r, nil
}

// provenance is the declared instruction provenance of a call, if trusted (package doc).
func (b *bridge) provenance(meta mcp.Meta) string {
	if !b.p.cfg.TrustDeclaredProvenance || meta == nil {
		return ""
	}
	s, _ := meta[toolcall.MetaProvenance].(string)
	return s
}

// invoker calls the upstream once with the sink's operation id and classifies the attempt. A
// task-augmented call (task not nil) carries the agent's params.task, and the upstream session
// it was sent on is reported in upstreamSession.
func (b *bridge) invoker(tool string, args json.RawMessage, progressToken any, refused *toolcall.Refusal, task json.RawMessage, upstreamSession *string) sink.Invoker {
	return func(ctx context.Context, operationID string) (sink.InvokeResult, error) {
		if args == nil {
			b.p.log.Error(errNotCanonical, "Call not sent", "tool", logfield.Bound(tool), "operation", operationID)
			return upstream.NotSent("the arguments could not be canonicalized; the call was not sent"), nil
		}
		cs, err := b.upstream(ctx)
		if err != nil {
			b.p.log.Error(err, "Call not sent", "tool", logfield.Bound(tool), "operation", operationID)
			if upstream.CredentialFailed(err) {
				return upstream.Unsent(&upstream.Attempt{}, err), nil
			}
			return upstream.NotSent(fmt.Sprintf("actgate: upstream %q could not be reached; the call was not sent", b.p.cfg.Server)), nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.p.cfg.CallTimeout)
		release := cancel // the direct path takes it over (callDirect)
		defer func() {
			if release != nil {
				release()
			}
		}()
		var a upstream.Attempt
		meta := mcp.Meta{toolcall.MetaOperationID: operationID}
		if progressToken != nil {
			meta["progressToken"] = progressToken
		}
		// The sink calls the invoker only after the authority was consumed and, for a journaled
		// dispatch, DISPATCH_PENDING committed: the instant tool-use-binding §22 T-G kills.
		if err := failpoint.Inject(failpoint.AfterPending); err != nil {
			return upstream.NotSent("actgate: " + err.Error() + "; the call was not sent"), nil // as an upstream that cannot be reached
		}
		bounded := logfield.Bound(tool)
		ctx, span := tracing.Start(ctx, b.p.tracer, tracing.ToolCallSpanName(bounded), trace.SpanKindClient)
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrServer.String(b.p.cfg.Server), tracing.AttrTool.String(bounded), tracing.AttrOperationID.String(operationID))
			var version string
			if ir := cs.InitializeResult(); ir != nil {
				version = ir.ProtocolVersion
			}
			span.SetAttributes(tracing.ToolCallAttributes(bounded, logfield.Bound(version))...)
			span.SetAttributes(tracing.ServerAttributes(b.p.cfg.URL)...)
		}
		tracing.InjectMeta(ctx, meta) // MCP's trace-context convention (SEP-414); the header is set by upstream.Transport
		params := &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: args}
		var res *mcp.CallToolResult
		var raw json.RawMessage
		if version, ok := directVersion(cs); ok && !b.p.cfg.SDKOnly {
			rel := release
			release = nil
			if upstreamSession != nil {
				*upstreamSession = cs.ID()
			}
			res, raw, err = b.callDirect(a.Bind(ctx), cs, version, tasks.CallParams(params, task), rel)
		} else if task != nil {
			// The SDK's session has no params.task: sent that way, the call would not be the
			// one the agent made.
			return upstream.NotSent("actgate: a task-augmented call cannot be carried on this upstream session; the call was not sent"), nil
		} else {
			res, err = cs.CallTool(a.Bind(ctx), params)
		}
		// The upstream has answered and nothing is recorded yet.
		if ferr := failpoint.Inject(failpoint.AfterInvoke); ferr != nil && err == nil {
			res, err = nil, ferr // the upstream answered and the answer was lost on the way back
		}
		out, drop := upstream.Classify(res, err, &a)
		if task != nil && err == nil {
			out = tasks.Classify(raw, out, tasks.ParseCreated)
		}
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrOutcome.String(out.Outcome.String()))
			switch {
			case err != nil:
				span.SetStatus(codes.Error, out.Outcome.String())
				span.SetAttributes(tracing.ErrorType(out.Outcome.String()))
			case res != nil && res.IsError:
				span.SetAttributes(tracing.ErrorType(tracing.ErrorTypeToolError))
			}
		}
		if drop {
			b.drop(cs)
		}
		if err == nil {
			return out, nil
		}
		b.p.log.Info("Upstream tools/call failed", "tool", logfield.Bound(tool), "operation", operationID, "outcome", out.Outcome.String(),
			"cause", upstream.SafeCause(err, &a))
		if out.Outcome == sink.OutcomeIndeterminate {
			return out, err
		}
		// Failed and NotSent are the proxy's authoritative classification of the error; the
		// sink records an Invoker error as INDETERMINATE, so it is not passed on.
		if we := upstream.RPCError(err); we != nil && out.Outcome == sink.OutcomeFailed && refused != nil {
			refused.Set(we)
		}
		return out, nil
	}
}

// requestMoment is the virtual request_binding_moment tool (docs/architecture.md "Human
// decisions").
func (b *bridge) requestMoment(ctx context.Context, params *mcp.CallToolParamsRaw) (mcp.Result, error) {
	raw := params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	r, m, err := toolcall.Moment(ctx, b.p.cfg.Gate, b.p.log, b.ss.ID(), b.agent, raw)
	if m != nil {
		out := b.elicit(ctx, m) // where policy allows (elicit.go)
		rr, err := b.render(r, err)
		return elicitform.With(rr, out), err
	}
	return b.render(r, err)
}
