package agent2025

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// errNoUpstream is returned when the upstream session cannot be opened.
var errNoUpstream = errors.New("mcpproxy: upstream session unavailable")

// bridge joins one agent session to one upstream client session.
type bridge struct {
	p    *Handler
	ss   *mcp.ServerSession
	info *mcp.Implementation
	caps *mcp.ClientCapabilities
	// version is the protocol version negotiated with the agent.
	version string
	// agent is the identity of the agent that opened the session (Config.Agents), or the
	// configured agent: every call and moment of the session is that agent's.
	agent string
	// counted is true once the session counts against Config.Sessions.
	counted bool

	mu     sync.Mutex
	cs     *mcp.ClientSession
	send   mcp.MethodHandler // the upstream client's own sending handler
	closed bool
	// idle closes the agent session after Config.SessionTimeout without a request in flight
	// (nil: never). The proxy keeps this timer rather than the SDK's handler because the
	// direct tools/call path (agentcall.go) does not pass through the SDK's handler.
	idle     *time.Timer
	active   int                     // requests in flight, either path
	inflight map[jsonrpc.ID]struct{} // ids of direct-path calls in flight
	// relayed maps the agent's id of each request carried upstream by the direct paths
	// (relay.go, callDirect) to the upstream leg's id, for the agent's cancellation; at most
	// maxRelayed entries.
	relayed map[jsonrpc.ID]jsonrpc.ID
	// legs maps the upstream leg's id of the session's last requests carried upstream to the
	// agent's id, for responses the upstream replays on a relayed resumption (relay.go).
	legs legs
	// cancelled holds the upstream ids of relayed requests the agent cancelled (a subset of
	// relayed's values).
	cancelled map[jsonrpc.ID]bool
	// awaiting holds the requests put to the agent on an answer stream (askOnStream), by the
	// proxy's id, until the agent's response; at most maxRelayed entries.
	awaiting map[jsonrpc.ID]chan *jsonrpc.Response
	// streams.Logs holds the events of the session's resumable answer streams, by stream key, for the
	// agent's resumption (resume.go); at most eventlog.MaxLogs, and eventlog.MaxSessionBytes.
	// streams.Resumable is set once the upstream's streams are seen to carry event ids (its answer to
	// initialize, or any answer stream of the session): its tools/calls then run detachable,
	// so that an upstream's close of a call's stream is mirrored to the agent (serveToolsCall).
	streams answerstream.Session
	// init is how the upstream answered its initialize (initframing.go).
	init upstream.InitFraming
	// answered is set once the upstream has answered a tools/call of the session: until then
	// (and whenever resumable is set) its tools/calls run detachable, so that the first call's
	// stream an upstream closes is mirrored too; after an answer without event ids they run on
	// the handler's goroutine (serveToolsCall).
	answered atomic.Bool
	// outputSchemas records, per tool the session listed, whether it declares an outputSchema
	// (toolslist.go: listed, hasOutputSchema); schemasOverflow is set past maxListedTools.
	outputSchemas   map[string]bool
	schemasOverflow bool
	// requested is the protocol version the agent's initialize asked for: the version the
	// upstream session is opened with, so that both legs speak the agent's revision.
	requested string
	// tasks are the running tasks of the session's dispatched calls (tasks.go).
	tasks taskTable
	// ownSent is the index of the last event of the gate session's own stream written to the
	// agent on a relayed GET stream (getstream.go); -1: none.
	ownSent int
	// getAsks maps the upstream's id of each request of its GET stream put to the agent and
	// not answered yet to the gate's id it was put under (getstream.go: askOnGET).
	getAsks map[string]jsonrpc.ID
	// early is the upstream GET stream opened with the session, until the agent's GET claims
	// it (getstream.go).
	early *earlyGET
	// started is the same early GET, kept once claimed: requests to the upstream wait for its
	// answer (getstream.go: awaitEarlyGET).
	started *earlyGET
	// life ends when the session closes (lifetime); nil until asked for.
	life    context.Context
	endLife context.CancelFunc
}

func newBridge(p *Handler, ss *mcp.ServerSession, params *mcp.InitializeParams, agent string) *bridge {
	b := &bridge{p: p, ss: ss, caps: &mcp.ClientCapabilities{}, agent: agent, ownSent: -1}
	if params != nil {
		b.requested = params.ProtocolVersion
		b.info = params.ClientInfo
		if params.Capabilities != nil {
			c := *params.Capabilities
			c.Experimental = maps.Clone(c.Experimental)
			c.Extensions = maps.Clone(c.Extensions)
			b.caps = &c
		}
	}
	if b.info == nil {
		b.info = &mcp.Implementation{Name: "actgate-agent", Version: "unknown"}
	}
	return b
}

// startIdle arms the session's idle timeout, if the proxy has one.
func (b *bridge) startIdle() {
	d := b.p.cfg.SessionTimeout
	if d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle == nil && !b.closed {
		b.idle = time.AfterFunc(d, func() {
			b.p.log.V(1).Info("Agent session closed after being idle", "session", b.ss.ID(), "timeout", d.String())
			_ = b.ss.Close()
		})
	}
}

// begin records a request in flight on the session (pausing its idle timeout) and, for a valid
// id, that a call with this id is in flight; it returns false, recording nothing, when one is.
func (b *bridge) begin(id jsonrpc.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id.IsValid() {
		if _, dup := b.inflight[id]; dup {
			return false
		}
		if b.inflight == nil {
			b.inflight = make(map[jsonrpc.ID]struct{})
		}
		b.inflight[id] = struct{}{}
	}
	b.active++
	if b.idle != nil {
		b.idle.Stop()
	}
	return true
}

// end is begin's counterpart: the idle timeout restarts when nothing is in flight.
func (b *bridge) end(id jsonrpc.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id.IsValid() {
		delete(b.inflight, id)
	}
	b.active--
	if b.active == 0 && b.idle != nil && !b.closed {
		b.idle.Reset(b.p.cfg.SessionTimeout)
	}
}

// upstream returns the open upstream session, opening one if there is none (first use, or
// after the previous one broke).
func (b *bridge) upstream(ctx context.Context) (*mcp.ClientSession, error) {
	cs, err := b.connectUpstream(ctx)
	if err == nil {
		b.awaitEarlyGET(ctx, cs)
	}
	return cs, err
}

// connectUpstream returns the upstream session, opening it when there is none.
func (b *bridge) connectUpstream(ctx context.Context) (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("%w: agent session closed", errNoUpstream)
	}
	if b.cs != nil {
		return b.cs, nil
	}
	cctx, cancel := context.WithTimeout(b.init.Bind(ctx), b.p.cfg.ConnectTimeout)
	defer cancel()
	// The upstream session speaks the agent's revision when it is a stateful one: asked for
	// explicitly, the SDK client sends no server/discover probe first.
	var opts *mcp.ClientSessionOptions
	if b.requested != "" && b.requested < wire.VersionStandardHeaders {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: b.requested}
	}
	cs, err := b.client().Connect(cctx, &mcp.StreamableClientTransport{
		Endpoint:   b.p.cfg.URL,
		HTTPClient: b.p.http,
		// The upstream's GET stream is the gate's to open and relay to the agent's
		// (getstream.go); the SDK client opens none.
		DisableStandaloneSSE: true,
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoUpstream, err)
	}
	b.cs = cs
	if _, ids := b.init.Framing(); ids {
		b.streams.Resumable.Store(true)
	}
	go func() {
		_ = cs.Wait()
		b.drop(cs)
	}()
	return cs, nil
}

// drop forgets cs if it is the current upstream session, so that the next request opens a new
// one, and closes it in the background (closing sends a DELETE the upstream may never answer;
// no agent request waits for it).
func (b *bridge) drop(cs *mcp.ClientSession) {
	b.mu.Lock()
	current := b.cs == cs && !b.closed
	if b.cs == cs {
		b.cs = nil
	}
	b.mu.Unlock()
	if current {
		// At the default level: the upstream's per-session state (subscriptions, timers) is
		// gone, and the agent's session goes on with a new upstream session.
		b.p.log.Info("Upstream session ended; the next request opens a new one", "session", b.ss.ID(), "upstreamSession", cs.ID())
		b.abandonTasks("the upstream session of the task ended")
	}
	go func() { _ = cs.Close() }()
}

// close ends the upstream session and, the first time, releases the session's place in
// Config.Sessions.
func (b *bridge) close() {
	b.mu.Lock()
	release := b.counted
	b.counted = false
	b.closed = true
	if b.idle != nil {
		b.idle.Stop()
	}
	cs := b.cs
	b.cs = nil
	if b.endLife != nil {
		b.endLife()
	}
	b.mu.Unlock()
	if release {
		b.p.cfg.Sessions.Release(b.agent)
	}
	b.abandonTasks("the agent session ended")
	b.streams.Logs.Release()
	if cs != nil {
		go func() { _ = cs.Close() }()
	}
}

// client builds the MCP client for one upstream session. It advertises exactly the agent's
// capabilities: a handler for sampling or elicitation is installed only when the agent can
// answer, and it forwards the upstream's request to the agent. Multi-round-trip retries are
// disabled so that one tools/call is one request upstream.
func (b *bridge) client() *mcp.Client {
	opts := &mcp.ClientOptions{
		Capabilities:   b.caps,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(ctx context.Context, r *mcp.ToolListChangedRequest) {
			b.notify(ctx, wire.NotifyToolsChanged, r.Params)
		},
		PromptListChangedHandler: func(ctx context.Context, r *mcp.PromptListChangedRequest) {
			b.notify(ctx, wire.NotifyPromptsChanged, r.Params)
		},
		ResourceListChangedHandler: func(ctx context.Context, r *mcp.ResourceListChangedRequest) {
			b.notify(ctx, wire.NotifyResourcesChanged, r.Params)
		},
		ResourceUpdatedHandler: func(ctx context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			b.notify(ctx, wire.NotifyResourceUpdated, r.Params)
		},
		LoggingMessageHandler: func(ctx context.Context, r *mcp.LoggingMessageRequest) { b.notify(ctx, wire.NotifyMessage, r.Params) },
		ProgressNotificationHandler: func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
			b.notify(ctx, wire.NotifyProgress, r.Params)
		},
		ElicitationCompleteHandler: func(ctx context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			b.notify(ctx, wire.NotifyElicitationComplete, r.Params)
		},
	}
	if b.caps.Sampling != nil {
		opts.CreateMessageWithToolsHandler = func(ctx context.Context, r *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return b.ss.CreateMessageWithTools(ctx, r.Params)
		}
	}
	if b.caps.Elicitation != nil {
		opts.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return b.elicitAgent(ctx, r.Params)
		}
	}
	c := mcp.NewClient(b.info, opts)
	c.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		b.send = next
		return next
	})
	// roots/list is the agent's to answer: the SDK client would answer from its own (empty)
	// root set.
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == wire.MethodElicit && b.caps.Elicitation != nil {
				// The agent's answer goes upstream as given: the SDK client's own handling
				// would validate it and fill in the schema's defaults.
				var params *mcp.ElicitParams
				if r, ok := req.(*mcp.ElicitRequest); ok {
					params = r.Params
				}
				return b.elicitAgent(ctx, params)
			}
			if method == wire.MethodListRoots && b.caps.RootsV2 != nil {
				var params *mcp.ListRootsParams
				if r, ok := req.(*mcp.ListRootsRequest); ok {
					params = r.Params
				}
				return b.ss.ListRoots(ctx, params)
			}
			return next(ctx, method, req)
		}
	})
	return c
}

// notify forwards an upstream notification to the agent session unchanged. Absent params (a
// nil pointer of the method's params type) stay absent: "params": null is not a valid MCP
// notification, and clients drop it.
func (b *bridge) notify(ctx context.Context, method string, params mcp.Params) {
	if v := reflect.ValueOf(params); v.Kind() == reflect.Pointer && v.IsNil() {
		params = nil
	}
	req := &mcp.ServerRequest[mcp.Params]{Session: b.ss, Params: params}
	if _, err := b.p.send(ctx, method, req); err != nil {
		b.p.log.Info("Notification not delivered to the agent", "method", method, "session", b.ss.ID(), "error", err.Error())
	}
}

// elicitAgent sends an upstream's elicitation/create to the agent and returns the agent's
// answer as the agent gave it: through the server session's sending handler, not
// ServerSession.Elicit, which would fill in the requested schema's defaults.
func (b *bridge) elicitAgent(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if params != nil && params.Mode == "" {
		// The mode the upstream left implicit, as ServerSession.Elicit infers it: the SDK's
		// type writes "mode" always, and "" is not a mode.
		p := *params
		p.Mode = "form"
		if p.URL != "" {
			p.Mode = "url"
		}
		params = &p
	}
	req := &mcp.ServerRequest[*mcp.ElicitParams]{Session: b.ss, Params: params}
	res, err := b.p.send(ctx, wire.MethodElicit, req)
	if err != nil {
		return nil, err
	}
	er, ok := res.(*mcp.ElicitResult)
	if !ok {
		return nil, fmt.Errorf("mcpproxy: unexpected elicitation result %T", res)
	}
	return er, nil
}

// rootsListChanged forwards the agent's notifications/roots/list_changed upstream.
func (p *Handler) rootsListChanged(ctx context.Context, r *mcp.RootsListChangedRequest) {
	b, ok := p.bridgeFor(r.Session)
	if !ok {
		return
	}
	b.mu.Lock()
	cs, send := b.cs, b.send
	b.mu.Unlock()
	if cs == nil || send == nil {
		return
	}
	var params mcp.Params
	if r.Params != nil {
		params = r.Params // absent params stay absent (see notify)
	}
	req := &mcp.ClientRequest[mcp.Params]{Session: cs, Params: params}
	if _, err := send(ctx, wire.NotifyRootsChanged, req); err != nil {
		p.log.Info("Notification not delivered upstream", "method", wire.NotifyRootsChanged, "error", err.Error())
	}
}
