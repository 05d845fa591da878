// Package agent2025 is the agent side of the MCP session revisions (2025-11-25 and earlier):
// an agent session is an SDK server session (mcp.Server behind mcp.StreamableHTTPHandler) joined
// by a bridge to one upstream client session (bridge.go). A plain tools/call takes the direct
// paths on both hops (agentcall.go toward the agent, upstreamcall.go toward the upstream) and is
// handed to the sink through internal/mcpproxy/toolcall (toolcall.go); other requests are
// relayed as the agent wrote them where the session allows (relay.go) or go through the SDK's
// sessions (forward.go); the agent's GET stream is the upstream's, relayed (getstream.go), and
// answer streams are resumable (resume.go). Tasks (tasks.go, taskowners.go), elicitation
// (elicit.go), tools/list (toolslist.go), the replay header (replayheader.go) and the session's
// end (lifecycle.go) are its parts too. internal/mcpproxy mounts it (Handler.Serve) after
// admission and after the 2026-07-28 side (internal/mcpproxy/agent2026); this package never
// imports that one. docs/architecture.md "The MCP proxy" describes it.
package agent2025

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/mcpproxy/admission"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Config is what the session side needs of the proxy's configuration (mcpproxy.Config, whose
// fields of the same names document them). The proxy has validated it and set its defaults.
type Config struct {
	Server, URL string
	Gate        toolcall.Gate
	// Agent is the configured agent, Agents the authenticator (nil: every request is Agent's),
	// Sessions the bound on open sessions (nil: unbounded).
	Agent    string
	Agents   admission.AgentAuthenticator
	Sessions *admission.SessionLimiter
	// CallTimeout, ConnectTimeout, SessionTimeout and ElicitationTimeout as mcpproxy.Config's.
	CallTimeout, ConnectTimeout, SessionTimeout, ElicitationTimeout time.Duration
	TrustDeclaredProvenance                                         bool
	Elicitation                                                     ElicitationPolicy
	// AgentOf returns the authenticated agent of a request's context (the proxy's admission
	// authenticated it before this side reads anything).
	AgentOf func(ctx context.Context) string
	// SDKOnly turns the direct tools/call paths off (agentcall.go, upstreamcall.go): every
	// message goes through the SDK's server and client sessions. Tests compare the two.
	SDKOnly bool
}

// Handler is the session side of one proxy. Create it with New; Close it with the proxy.
type Handler struct {
	cfg     Config
	log     logr.Logger
	tracer  trace.Tracer // nil: tracing off
	server  *mcp.Server
	handler *mcp.StreamableHTTPHandler
	// sdkAnswers are the POSTs the SDK's handler is answering (replayheader.go).
	sdkAnswers answerstream.SDKAnswers
	sdk        http.Handler // handler, given the authenticated agent (sdkAuth)
	http       *http.Client // the SDK client's upstream requests
	direct     *http.Client // the direct tools/call path's (bridge.post): upstream.SyncTransport where it applies
	// send is the agent-side server's own sending handler, captured at construction, through
	// which upstream notifications are forwarded to an agent session verbatim.
	send mcp.MethodHandler

	// directAgent and directUpstream count the tools/calls the direct paths carried
	// (agentcall.go, upstreamcall.go).
	directAgent, directUpstream atomic.Int64

	// owners are the agents that created the tasks the proxy saw created, shared with the
	// 2026-07-28 side (mcpproxy's taskowners.go).
	owners *tasks.Owners

	mu      sync.Mutex
	bridges map[*mcp.ServerSession]*bridge
	byID    map[string]*bridge
	closed  bool
}

// New returns the session side of a proxy: the SDK client's upstream requests go through
// httpClient, the direct paths' through direct, and the tasks its calls create are remembered
// in owners.
func New(cfg Config, log logr.Logger, tracer trace.Tracer, httpClient, direct *http.Client, owners *tasks.Owners) *Handler {
	p := &Handler{
		cfg: cfg, log: log, tracer: tracer, http: httpClient, direct: direct, owners: owners,
		bridges: make(map[*mcp.ServerSession]*bridge),
		byID:    make(map[string]*bridge),
	}
	p.server = mcp.NewServer(&mcp.Implementation{Name: "actgate", Title: "actgate finality sink", Version: "v1alpha1"}, &mcp.ServerOptions{
		RootsListChangedHandler: p.rootsListChanged,
	})
	p.server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		p.send = next
		return next
	})
	p.server.AddReceivingMiddleware(p.receive)
	// The agent sessions' idle timeout is the bridges' (bridge.startIdle), not the handler's:
	// the direct tools/call path does not pass through the handler. A session that never
	// completes initialize has no bridge; the SDK closes it when its initialize fails.
	// The event store gives the gate session's own stream (merged into the agent's relayed GET
	// stream, getstream.go) event indexes and Last-Event-ID resumption; it is bounded (the
	// SDK's default of 10 MiB for the proxy's sessions together, the oldest events purged
	// first).
	p.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.server }, &mcp.StreamableHTTPOptions{
		JSONResponse: true,
		EventStore:   mcp.NewMemoryEventStore(nil),
	})
	p.sdk = admission.SDKAuth(p.handler, cfg.Agents)
	return p
}

// Serve answers an admitted agent request (its body read) that the 2026-07-28 side left: a
// POST, GET or DELETE of a session, or an initialize.
func (p *Handler) Serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && p.servePOST(w, r) {
		return // agentcall.go
	}
	if r.Method == http.MethodGet && r.Header.Get(wire.HeaderSessionID) == "" {
		refuseSessionlessGET(w) // getstream.go
		return
	}
	if r.Method == http.MethodGet && r.Header.Get(wire.HeaderLastEventID) != "" && p.serveResume(w, r) {
		return // resume.go
	}
	if r.Method == http.MethodGet && p.serveGET(w, r) {
		return // getstream.go
	}
	if r.Method == http.MethodDelete && p.serveDELETE(w, r) {
		return // lifecycle.go
	}
	if r.Method == http.MethodPost && initializeToFollow(r) {
		p.serveInitialize(w, r) // initframing.go
		return
	}
	if r.Method == http.MethodPost {
		p.sdkAnswers.Serve(p.sdk, w, r) // a tools/call it carries can be marked a replay (replayheader.go)
		return
	}
	p.sdk.ServeHTTP(w, r)
}

// DirectCalls returns how many tools/calls the direct paths carried, toward the agent
// (agentcall.go) and toward the upstream (upstreamcall.go).
func (p *Handler) DirectCalls() (agent, upstream int64) {
	return p.directAgent.Load(), p.directUpstream.Load()
}

// Close ends every agent session and its upstream session. The handler refuses new sessions
// afterwards.
func (p *Handler) Close() {
	p.mu.Lock()
	p.closed = true
	bs := make([]*bridge, 0, len(p.bridges))
	for _, b := range p.bridges {
		bs = append(bs, b)
	}
	p.mu.Unlock()
	for _, b := range bs {
		b.close()
	}
	for ss := range p.server.Sessions() {
		_ = ss.Close()
	}
}

// requestAgent is the agent a request was authenticated as, or the configured agent.
func (p *Handler) requestAgent(ctx context.Context) string { return p.cfg.AgentOf(ctx) }

// sessionAgent is the agent behind an MCP request the SDK's handler delivers: the session's
// user when the proxy authenticates agents, else the configured agent.
func (p *Handler) sessionAgent(req mcp.Request) (string, bool) {
	if p.cfg.Agents == nil {
		return p.cfg.Agent, true
	}
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil && ex.TokenInfo.UserID != "" {
		return ex.TokenInfo.UserID, true
	}
	return "", false
}

// bridgeByID returns the bridge of the initialized agent session with this Mcp-Session-Id.
func (p *Handler) bridgeByID(id string) *bridge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byID[id]
}

// bridgeFor returns the bridge of an initialized agent session.
func (p *Handler) bridgeFor(ss *mcp.ServerSession) (*bridge, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.bridges[ss]
	return b, ok
}

func (p *Handler) addBridge(b *bridge) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("mcpproxy: proxy closed")
	}
	p.bridges[b.ss] = b
	p.byID[b.ss.ID()] = b
	return nil
}

func (p *Handler) removeBridge(b *bridge) {
	p.mu.Lock()
	if p.bridges[b.ss] == b {
		delete(p.bridges, b.ss)
	}
	if p.byID[b.ss.ID()] == b {
		delete(p.byID, b.ss.ID())
	}
	p.mu.Unlock()
	b.close()
}
