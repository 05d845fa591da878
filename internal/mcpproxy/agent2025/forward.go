package agent2025

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/admission"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// receive is the agent-side server's receiving middleware: every request and notification of
// every agent session passes here.
func (p *Handler) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if method == wire.MethodInitialize {
			return p.initialize(ctx, next, ss, req)
		}
		b, ok := p.bridgeFor(ss)
		if !ok {
			// Hop-by-hop methods and whatever the SDK itself refuses before initialize.
			return next(ctx, method, req)
		}
		b.begin(jsonrpc.ID{})
		defer b.end(jsonrpc.ID{})
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			return b.callTool(admission.WithRequestAgentToken(agentoauth.WithToken(ctx, admission.TokenOf(r.Extra)), r.Extra), r)
		case *mcp.ListToolsRequest:
			return b.listTools(ctx, r)
		case *mcp.ListResourcesRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.ListResourcesResult, error) {
				return cs.ListResources(ctx, r.Params)
			})
		case *mcp.ListResourceTemplatesRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.ListResourceTemplatesResult, error) {
				return cs.ListResourceTemplates(ctx, r.Params)
			})
		case *mcp.ReadResourceRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
				return cs.ReadResource(ctx, r.Params)
			})
		case *mcp.SubscribeRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*emptyResult, error) {
				return &emptyResult{}, cs.Subscribe(ctx, r.Params)
			})
		case *mcp.UnsubscribeRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*emptyResult, error) {
				return &emptyResult{}, cs.Unsubscribe(ctx, r.Params)
			})
		case *mcp.ListPromptsRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.ListPromptsResult, error) {
				return cs.ListPrompts(ctx, r.Params)
			})
		case *mcp.GetPromptRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
				return cs.GetPrompt(ctx, r.Params)
			})
		case *mcp.CompleteRequest:
			return forward(ctx, b, func(cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
				return cs.Complete(ctx, r.Params)
			})
		}
		if method == wire.MethodSetLevel {
			params, _ := req.GetParams().(*mcp.SetLoggingLevelParams)
			if _, err := forward(ctx, b, func(cs *mcp.ClientSession) (*emptyResult, error) {
				return &emptyResult{}, cs.SetLoggingLevel(ctx, params)
			}); err != nil {
				return nil, err
			}
		}
		// ping, notifications/initialized, notifications/cancelled, notifications/roots/
		// list_changed (RootsListChangedHandler forwards it), logging/setLevel after it was
		// forwarded, and anything else: the SDK's own handling.
		return next(ctx, method, req)
	}
}

// initialize opens the upstream session for a new agent session and answers the agent with
// the upstream's capabilities, serverInfo and instructions (protocol version negotiation stays
// hop by hop). The virtual tool means the agent always sees the tools capability.
func (p *Handler) initialize(ctx context.Context, next mcp.MethodHandler, ss *mcp.ServerSession, req mcp.Request) (mcp.Result, error) {
	params, _ := req.GetParams().(*mcp.InitializeParams)
	if ss == nil || params == nil {
		return next(ctx, wire.MethodInitialize, req)
	}
	if _, ok := p.bridgeFor(ss); ok {
		return next(ctx, wire.MethodInitialize, req) // the SDK refuses a duplicate initialize
	}
	agent, ok := p.sessionAgent(req)
	if !ok {
		return nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: string(ef.EFAgentUnauthenticated) + ": the session has no authenticated agent"}
	}
	if err := p.cfg.Sessions.Acquire(agent); err != nil {
		p.log.Info("Agent session refused", "agent", logfield.Bound(agent), "code", ef.EFSessionLimit, "reason", err.Error())
		return nil, admission.SessionLimitError(err)
	}
	b := newBridge(p, ss, params, agent)
	b.counted = true
	cs, err := b.upstream(ctx)
	if err != nil {
		b.close()
		p.log.Error(err, "Upstream session could not be opened")
		return nil, sessionUnavailable(p.cfg.Server, err)
	}
	res, err := next(ctx, wire.MethodInitialize, req)
	if err != nil {
		b.close()
		return nil, err
	}
	ir, ok := res.(*mcp.InitializeResult)
	if !ok {
		b.close()
		return nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: unexpected initialize result"}
	}
	b.version = ir.ProtocolVersion
	if err := p.addBridge(b); err != nil {
		b.close()
		return nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: shutting down"}
	}
	b.startIdle()
	b.startEarlyGET(cs)
	go func() {
		_ = ss.Wait()
		p.removeBridge(b)
	}()
	if up := cs.InitializeResult(); up != nil {
		out := *ir
		caps := &mcp.ServerCapabilities{}
		if up.Capabilities != nil {
			c := *up.Capabilities
			caps = &c
		}
		if caps.Tools == nil {
			caps.Tools = &mcp.ToolCapabilities{}
		}
		out.Capabilities = caps
		out.Instructions = up.Instructions
		if up.ServerInfo != nil {
			out.ServerInfo = up.ServerInfo
		}
		return &out, nil
	}
	return ir, nil
}

// forward runs one pass-through request on the upstream session and returns its result to the
// agent unchanged; an upstream JSON-RPC error is returned with its own code, message and data.
func forward[R mcp.Result](ctx context.Context, b *bridge, call func(*mcp.ClientSession) (R, error)) (mcp.Result, error) {
	cs, err := b.upstream(ctx)
	if err != nil {
		b.p.log.Error(err, "Upstream session could not be opened")
		return nil, b.unavailable()
	}
	res, err := call(cs)
	if err == nil {
		return res, nil
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return nil, we
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, mcp.ErrConnectionClosed) {
		b.drop(cs)
	}
	b.p.log.Error(err, "Upstream request failed")
	return nil, b.unavailable()
}

// unavailable is the error an agent sees when the upstream cannot be reached: it names the
// server, never its URL or credentials.
func (b *bridge) unavailable() error {
	return &jsonrpc.Error{Code: wire.CodeInternalError, Message: fmt.Sprintf("actgate: upstream %q unavailable", b.p.cfg.Server)}
}

// emptyResult is the {} result of methods whose answer carries nothing.
type emptyResult struct {
	mcp.ResultBase
}
