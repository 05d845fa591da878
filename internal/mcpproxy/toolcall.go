package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/logfield"
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
	// The sink digests the canonical form and the upstream receives exactly those bytes, so
	// what runs is what was authorised. Arguments that cannot be canonicalized go to the sink
	// as received, to be refused there with its code; they are never forwarded.
	canonical, cerr := jcs.Canonicalize(raw, jcs.Full)
	args := json.RawMessage(canonical)
	if cerr != nil {
		args = raw
	}
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
	var fwd json.RawMessage
	if cerr == nil {
		fwd = args
	}
	task := taskOf(ctx) // a task-augmented call (tasks.go; its place is reserved by serveToolsCall)
	// Once the gate has started, the agent cancelling its request must not abandon a dispatch
	// half way: the invocation has its own bound (Config.CallTimeout).
	var refused upstreamRefusal
	var upstreamSession string
	res, err := b.handleTask(ctx, call, b.invoker(params.Name, fwd, params.GetProgressToken(), &refused, task, &upstreamSession), task)
	res = b.taskAnswer(task, res, upstreamSession)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrServer.String(call.Server), tracing.AttrTool.String(logfield.Bound(params.Name)),
			tracing.AttrActID.String(res.ActID), tracing.AttrAllowed.Bool(res.Allowed), tracing.AttrCode.String(string(res.Code)))
		if cerr == nil {
			span.SetAttributes(tracing.AttrArgsDigest.String(jcs.Digest(canonical)))
		}
	}
	// The log line names the arguments by digest only (docs/architecture.md "Privacy"); it is built
	// only when something will be logged, to keep the hot path free of it.
	logger := func() logr.Logger {
		l := b.p.log.WithValues("tool", logfield.Bound(params.Name), "session", call.Session)
		if cerr == nil {
			l = l.WithValues("argumentsDigest", jcs.Digest(canonical))
		}
		return l
	}
	switch {
	case err == nil:
	case errors.Is(err, sink.ErrUpstream):
		// Dispatched, outcome unknown: the journal holds the act INDETERMINATE.
		logger().Info("Upstream outcome unknown", "act", res.ActID, "state", res.State, "operation", res.OperationID)
	default:
		// The gate could not finish: refuse unless the upstream already answered (the journal
		// has the truth; a refusal cannot undo an effect that happened).
		logger().Error(err, "Gate failed", "act", res.ActID, "invoked", res.Invoked, "state", res.State)
		if res.Code == "" {
			res.Code = ef.EFStoreUnavailable
		}
	}
	if res.Allowed && res.Replayed && len(res.Upstream) == 0 && res.State.Terminal() {
		// A retry of an act whose outcome was settled after the fact, by authenticated
		// reconciliation: the upstream's result was never received, so there is none to give.
		res.Upstream = settledResult(res.State)
	}
	// An answer that is not the upstream's gets an id of the gate's own on a resumable stream.
	agentStreamOf(ctx).answerFrom(upstreamsAnswer(res, refused.get() != nil))
	if rerr := refused.get(); rerr != nil && res.Allowed && res.Invoked && !res.Replayed && (res.State == "" || res.State == journal.StateFailed) {
		// The upstream refused this call with a JSON-RPC error before executing it (a
		// journaled act is FAILED; a hot-path call has no journal state): the agent gets that
		// error as the upstream wrote it, code, message and data (a -32042 URL elicitation
		// among them), as it would without the gate.
		logger().Info("Call refused by the upstream", "act", res.ActID, "code", rerr.Code)
		return nil, rerr
	}
	if res.Allowed && len(res.Upstream) > 0 {
		if b.p.log.V(1).Enabled() {
			logger().V(1).Info("Call allowed", "act", res.ActID, "invoked", res.Invoked, "replayed", res.Replayed, "state", res.State)
		}
		return b.render(allowedResult(res))
	}
	if res.Code == "" || res.Allowed {
		// Allowed but without a result to return: the outcome is not known to this call.
		if res.Code == "" {
			res.Code = ef.EFIndeterminate
		}
		res.Allowed = false
	}
	logger().Info("Call refused", "act", res.ActID, "code", res.Code, "state", res.State, "invoked", res.Invoked, "escalated", res.Moment != nil)
	structured := !b.hasOutputSchema(params.Name)
	if res.Moment != nil { // also offered as an elicitation where policy allows (elicit.go)
		out := b.elicit(ctx, res.Moment)
		r, err := b.render(refusalFor(res, structured))
		return withElicitation(r, out), err
	}
	return b.render(refusalFor(res, structured))
}

// upstreamRefusal holds the JSON-RPC error an upstream answered a tools/call with, when the
// proxy classified it as a refusal before execution (upstream.Classify): set by the invoker, read after
// the gate finished.
type upstreamRefusal struct {
	mu  sync.Mutex
	err *jsonrpc.Error
}

func (u *upstreamRefusal) set(err *jsonrpc.Error) {
	u.mu.Lock()
	u.err = err
	u.mu.Unlock()
}

func (u *upstreamRefusal) get() *jsonrpc.Error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// startCall starts the tools/call span as the root of the gate's own trace, linked to the
// agent's W3C trace context: the request's traceparent header, or params._meta's (which wins
// when both are present, as the more specific). The agent's context is linked, never
// continued (tracing.StartCall). With tracing off it returns ctx unchanged.
func (p *Proxy) startCall(ctx context.Context, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	if p.tracer != nil {
		if req.Extra != nil {
			ctx = tracing.ExtractAgent(ctx, req.Extra.Header)
		}
		ctx = tracing.ExtractAgentMeta(ctx, req.Params.Meta)
	}
	return tracing.StartCall(ctx, p.tracer, "actgate.mcp.tools_call", trace.SpanKindServer)
}

// render turns a rendering failure into an internal error the agent sees (nothing ran that a
// rendering failure could hide: refusals are rendered only for calls not invoked by them).
func (b *bridge) render(r *rawResult, err error) (mcp.Result, error) {
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
	s, _ := meta[MetaProvenance].(string)
	return s
}

// invoker calls the upstream once with the sink's operation id and classifies the attempt. A
// task-augmented call (task not nil) carries the agent's params.task, and the upstream session
// it was sent on is reported in upstreamSession.
func (b *bridge) invoker(tool string, args json.RawMessage, progressToken any, refused *upstreamRefusal, task json.RawMessage, upstreamSession *string) sink.Invoker {
	return func(ctx context.Context, operationID string) (sink.InvokeResult, error) {
		if args == nil {
			b.p.log.Error(errNotCanonical, "Call not sent", "tool", logfield.Bound(tool), "operation", operationID)
			return upstream.NotSent("the arguments could not be canonicalized; the call was not sent"), nil
		}
		cs, err := b.upstream(ctx)
		if err != nil {
			b.p.log.Error(err, "Call not sent", "tool", logfield.Bound(tool), "operation", operationID)
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
		meta := mcp.Meta{MetaOperationID: operationID}
		if progressToken != nil {
			meta["progressToken"] = progressToken
		}
		// The sink calls the invoker only after the authority was consumed and, for a journaled
		// dispatch, DISPATCH_PENDING committed: the instant tool-use-binding §22 T-G kills.
		if err := failpoint.Inject(failpoint.AfterPending); err != nil {
			return upstream.NotSent("actgate: " + err.Error() + "; the call was not sent"), nil // as an upstream that cannot be reached
		}
		ctx, span := tracing.Start(ctx, b.p.tracer, "actgate.upstream.tools_call", trace.SpanKindClient)
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrServer.String(b.p.cfg.Server), tracing.AttrTool.String(logfield.Bound(tool)), tracing.AttrOperationID.String(operationID))
		}
		tracing.InjectMeta(ctx, meta) // MCP's trace-context convention (SEP-414); the header is set by upstream.Transport
		params := &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: args}
		var res *mcp.CallToolResult
		var raw json.RawMessage
		if version, ok := directVersion(cs); ok && !b.p.cfg.sdkOnly {
			rel := release
			release = nil
			if upstreamSession != nil {
				*upstreamSession = cs.ID()
			}
			res, raw, err = b.callDirect(a.Bind(ctx), cs, version, callParams(params, task), rel)
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
			out = classifyTask(raw, out, parseCreated)
		}
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrOutcome.String(out.Outcome.String()))
			if err != nil {
				span.SetStatus(codes.Error, out.Outcome.String())
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
			refused.set(we)
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
	p, err := sink.ParseProposal(raw)
	if err != nil {
		// The refusal names the defect (never more than the agent's own field names).
		return b.render(refusalResult(sink.Result{Code: ef.EFMomentInvalid, Message: strings.TrimPrefix(err.Error(), sink.ErrProposal.Error()+": ")}))
	}
	res, err := b.p.cfg.Gate.RequestMoment(context.WithoutCancel(ctx), b.ss.ID(), b.agent, p)
	if err != nil {
		b.p.log.Error(err, "Gate failed to register a binding moment")
		if res.Code == "" {
			res.Code = ef.EFStoreUnavailable
		}
		res.Moment = nil
	}
	if res.Moment != nil && res.Moment.Envelope != nil {
		b.p.log.Info("Binding moment registered", "moment", res.Moment.ID, "envelope", res.Moment.Envelope.Digest())
		out := b.elicit(ctx, res.Moment) // where policy allows (elicit.go)
		r, err := b.render(registeredMoment(res.Moment, res.Resolutions))
		return withElicitation(r, out), err
	}
	if res.Code == "" {
		res.Code = ef.EFMomentInvalid
	}
	b.p.log.Info("Binding moment refused", "code", res.Code)
	return b.render(refusalResult(res))
}

// upstreamsAnswer reports whether the agent's answer to a call is the upstream's response as
// written: its result unchanged (no resolutions delivered, not a retry answered from the
// journal), or its JSON-RPC refusal (refusedUpstream).
func upstreamsAnswer(res sink.Result, refusedUpstream bool) bool {
	return res.Allowed && !res.Replayed && len(res.Resolutions) == 0 && (len(res.Upstream) > 0 || refusedUpstream)
}

// settledResult is the result given to a retry of an act that ran once and whose outcome was
// settled by authenticated reconciliation without the upstream's result: what happened, never
// a second invocation. FAILED is an error result; EXECUTED is not.
func settledResult(state journal.State) json.RawMessage {
	text := fmt.Sprintf("actgate: this call was dispatched once; authenticated reconciliation settled its outcome as %s. "+
		"The upstream's result was not received, so none is returned; the call is not run again.", state)
	return wire.TextResult(text, state != journal.StateExecuted)
}

// allowedResult is the upstream's result (or the recorded one, to a retry) as the agent sees it.
func allowedResult(res sink.Result) (*rawResult, error) {
	raw, err := withDeliveries(res.Upstream, res.Resolutions, res.Replayed)
	if err != nil {
		return nil, err
	}
	return &rawResult{raw: raw}, nil
}
