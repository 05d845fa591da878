// Package agent2026 is the agent side of MCP 2026-07-28 (stateless): each POST is one exchange,
// parsed and checked (internal/mcpproxy/stateless), answered toward a stateless upstream by one
// POST and toward a stateful one over an upstream session the gate holds per agent
// (stateless_upstream.go), with its input-required rounds (stateless_rounds.go), tasks
// (stateless_tasks.go), subscriptions/listen (listen.go) and cancellations (notify.go). A
// tools/call is handed to the sink through internal/mcpproxy/toolcall (stateless_call.go).
// internal/mcpproxy mounts it (Handler.Serve) ahead of the session revisions; this package
// never imports that one. docs/architecture.md "MCP 2026-07-28 (stateless)" describes it.
package agent2026

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Config is what the 2026-07-28 side needs of the proxy's configuration (mcpproxy.Config).
type Config struct {
	// Server is the upstream's ToolServer name, URL its endpoint: sink.Call.Server and
	// Destination.
	Server, URL string
	// Gate is the finality sink every tools/call is handed to.
	Gate toolcall.Gate
	// CallTimeout bounds one upstream call once dispatched; ConnectTimeout opening an upstream
	// session or probing the upstream's revision.
	CallTimeout, ConnectTimeout time.Duration
	// TrustDeclaredProvenance: the provenance a client declares in params._meta is passed to
	// the sink (mcpproxy.Config.TrustDeclaredProvenance).
	TrustDeclaredProvenance bool
	// AgentOf returns the authenticated agent of a request's context (mcpproxy's admission
	// authenticated it before this side reads anything).
	AgentOf func(ctx context.Context) string
}

// Handler is the 2026-07-28 side of one proxy. Create it with New; Close it with the proxy.
type Handler struct {
	cfg    Config
	log    logr.Logger
	direct *http.Client  // the gate's upstream client (internal/mcpproxy/upstream)
	owners *tasks.Owners // the proxy's task owners, shared with the session revisions
	// sl is the state of the path (stateless_serve.go).
	sl statelessState
}

// New returns the 2026-07-28 side of a proxy: upstream requests go through direct, the tasks
// its calls create are remembered in owners.
func New(cfg Config, log logr.Logger, direct *http.Client, owners *tasks.Owners) *Handler {
	return &Handler{cfg: cfg, log: log, direct: direct, owners: owners}
}

// maxRelayed bounds an agent's requests in flight upstream that a cancellation can name
// (legTable), as the session revisions bound a session's relayed requests.
const maxRelayed = 1024

// errNoUpstream is returned when an upstream session cannot be opened.
var errNoUpstream = errors.New("mcpproxy: upstream session unavailable")

// errSessionGone: the upstream answered 404, the session is over (MCP streamable HTTP: the
// client starts a new session).
var errSessionGone = errors.New("mcpproxy: the upstream session is gone (HTTP 404)")

// refuseNotification writes the refusal of a notification of method on revision (notify.go).
func (p *Handler) refuseNotification(w http.ResponseWriter, method, revision string) {
	p.log.Info("Agent notification refused", "method", logfield.Bound(method), "code", ef.EFNotificationInvalid, "revision", revision)
	wire.WriteRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, wire.NotificationRefusal(method, revision))
}
