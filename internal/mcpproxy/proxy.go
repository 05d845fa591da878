package mcpproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/mcpproxy/admission"
	"github.com/actgate/actgate/internal/mcpproxy/agent2025"
	"github.com/actgate/actgate/internal/mcpproxy/agent2026"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/tracing"
)

// Gate is what the proxy needs of the finality sink; *sink.Gate implements it.
type Gate = toolcall.Gate

// _meta keys and annotation names the proxy reads or writes (toolcall's).
const (
	// MetaOperationID carries the sink's operation id to the upstream in tools/call
	// params._meta: the upstream's idempotency key (sink.Invoker).
	MetaOperationID = toolcall.MetaOperationID
	// MetaProvenance is where an MCP client may declare the instruction provenance of a
	// tools/call (params._meta), honoured only with Config.TrustDeclaredProvenance.
	MetaProvenance = toolcall.MetaProvenance
	// MetaEFCode carries the EF code of a refused call in the result's _meta (tool-use-binding
	// §23: copied into the vendor payload as a machine-readable string).
	MetaEFCode = toolcall.MetaEFCode
	// MetaActID carries the act id the gate assigned, when known.
	MetaActID = toolcall.MetaActID
	// MetaState carries the dispatch lifecycle state of the act, when known.
	MetaState = toolcall.MetaState
	// MetaMomentID carries the id of the binding moment an escalation registered.
	MetaMomentID = toolcall.MetaMomentID
	// MetaEnvelopeDigest carries that moment's envelope digest.
	MetaEnvelopeDigest = toolcall.MetaEnvelopeDigest
	// MetaResolutions carries the binding-moment resolutions delivered to the session with
	// this result (sink.Result.Resolutions).
	MetaResolutions = toolcall.MetaResolutions
	// HeaderReplayed is the HTTP response header (value "true") of the answer to a retry of a
	// call that already ran, answered with its recorded result (tool-use-binding §9: a fetch of
	// the original tool_result, never a second invoke); the result itself is the one first
	// given.
	HeaderReplayed = wire.HeaderReplayed
	// AnnotationEmitsBindingMoment is the advisory tools/list annotation of envelope-04 §8.2
	// (its RECOMMENDED name), carried in a tool's "annotations" and "_meta".
	AnnotationEmitsBindingMoment = toolcall.AnnotationEmitsBindingMoment
)

// Defaults of Config.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultReadTimeout    = 30 * time.Second
)

// Config configures one Proxy: one protected upstream MCP server.
type Config struct {
	// Server is the upstream's ToolServer name (a DNS label): sink.Call.Server and the mount
	// path /mcp/{Server}. Required.
	Server string
	// URL is the upstream's streamable-HTTP endpoint, an absolute http or https URL: the only
	// place this proxy sends calls, and sink.Call.Destination. Required.
	URL string
	// Gate is the finality sink. Required.
	Gate Gate
	// Agent is the identity of the agent behind this proxy (sink.Call.Agent) when Agents is
	// nil. Required.
	Agent string
	// Agents, when set, authenticates every agent request (BearerAgents): a request without a
	// known agent's credential is refused with HTTP 401 and EF_AGENT_UNAUTHENTICATED before
	// anything reads it, and the authenticated agent is the identity of the session it opens
	// (sink.Call.Agent, the agent of its binding moments). A session is bound to the agent that
	// opened it: another agent's request on it is refused (HTTP 403). Nil: every request is
	// the agent Agent (the Kubernetes sidecar, where the pod is the boundary).
	Agents AgentAuthenticator
	// Sessions, when set, bounds the agent sessions open at once (in total and per agent,
	// shared by every proxy given the same limiter); an initialize beyond a bound is refused
	// with EF_SESSION_LIMIT. Nil: unbounded.
	Sessions *SessionLimiter
	// ReadTimeout bounds reading one agent request's body; once read, the request's own bounds
	// apply (CallTimeout, ElicitationTimeout) and the connection's read deadline is lifted, so
	// that a long call or an event stream is not cut. Zero: DefaultReadTimeout.
	ReadTimeout time.Duration
	// Credential, when set, returns the bearer token presented to the upstream. It is called
	// for every upstream HTTP request, so a rotated credential file or Secret applies without a
	// restart. The token is set only on the proxy→upstream leg.
	Credential func(ctx context.Context) (string, error)
	// CredentialRejected, when set, is told the token an upstream answer of HTTP 401 refused
	// (upstreamauth.Source.Invalidate), so that the next request presents a new one.
	CredentialRejected func(token string)
	// CredentialOrigin is the origin (scheme://host[:port]) the credential belongs to: it is
	// presented only on requests to that origin, so a proxy whose URL was swapped for another
	// server's (tool-use-binding §12 MCP_SERVER_SWAP) never hands the credential over. Empty
	// means the origin of URL; set it to the origin of the policy's server URL when URL comes
	// from elsewhere.
	CredentialOrigin string
	// Transport is the base RoundTripper for upstream requests; nil means a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// TrustDeclaredProvenance makes the proxy pass the provenance an MCP client declares in
	// params._meta["actgate.io/instruction-provenance"] to the sink. Without it the sink sees
	// unknown provenance (see the package documentation).
	TrustDeclaredProvenance bool
	// CallTimeout bounds one upstream tools/call once dispatched; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// ConnectTimeout bounds opening the upstream session; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// SessionTimeout closes agent sessions idle this long (and their upstream sessions); 0
	// means never.
	SessionTimeout time.Duration
	// Logger receives one line per refused call and per upstream failure; it is given digests
	// and codes, never tool arguments. The zero Logger discards.
	Logger logr.Logger
	// Elicitation, when set, lets a binding moment of a class it allows be offered also as an
	// MCP elicitation to an agent client that declared elicitation (agent2025's elicit.go); nil:
	// never.
	Elicitation ElicitationPolicy
	// ElicitationTimeout bounds the wait for an elicitation's answer; 0 means
	// DefaultElicitationTimeout.
	ElicitationTimeout time.Duration
	// TracerProvider records a span per tools/call and per upstream call, continuing the W3C
	// trace context of the agent's request (its traceparent header, or params._meta) and
	// propagating it to the upstream in both (internal/tracing). Optional: nil is tracing off.
	TracerProvider trace.TracerProvider

	// sdkOnly turns the direct tools/call paths off (agent2025.Config.SDKOnly): every message
	// goes through the SDK's server and client sessions. Tests compare the two.
	sdkOnly bool
}

var serverName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Path returns the mount path of a server's proxy: /mcp/{server}.
func Path(server string) string { return "/mcp/" + server }

// AltPath returns the second mount path of a server's proxy, /{server}/mcp: the form clients
// reach that rewrite an endpoint not ending in /mcp (the MCP Inspector CLI).
func AltPath(server string) string { return "/" + server + "/mcp" }

// ErrConfig is wrapped by every configuration error of New (and of NewBearerAgents).
var ErrConfig = admission.ErrConfig

// Proxy is the http.Handler for one upstream server. Create it with New; Close it on shutdown.
type Proxy struct {
	cfg    Config
	log    logr.Logger
	http   *http.Client // the SDK client's upstream requests
	direct *http.Client // the direct paths' upstream requests: upstream.SyncTransport where it applies

	// v2026 is the MCP 2026-07-28 side (internal/mcpproxy/agent2026), v2025 the session
	// revisions' (internal/mcpproxy/agent2025).
	v2026 *agent2026.Handler
	v2025 *agent2025.Handler
	// owners are the agents that created the tasks the proxy saw created (taskowners.go),
	// shared by both sides.
	owners tasks.Owners
}

// New validates cfg and returns the proxy.
func New(cfg Config) (*Proxy, error) {
	switch {
	case !serverName.MatchString(cfg.Server) || len(cfg.Server) > 63:
		return nil, fmt.Errorf("%w: Server %q is not a DNS label", ErrConfig, cfg.Server)
	case cfg.Gate == nil:
		return nil, fmt.Errorf("%w: Gate is required", ErrConfig)
	case cfg.Agent == "":
		return nil, fmt.Errorf("%w: Agent is required", ErrConfig)
	case cfg.CallTimeout < 0 || cfg.ConnectTimeout < 0 || cfg.SessionTimeout < 0 || cfg.ReadTimeout < 0:
		return nil, fmt.Errorf("%w: timeouts must not be negative", ErrConfig)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: URL must be an absolute http or https URL without user info", ErrConfig)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	credOrigin := upstream.Origin(u)
	if cfg.CredentialOrigin != "" {
		cu, err := url.Parse(cfg.CredentialOrigin)
		if err != nil || cu.Host == "" {
			return nil, fmt.Errorf("%w: CredentialOrigin must be scheme://host[:port]", ErrConfig)
		}
		credOrigin = upstream.Origin(cu)
	}
	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	directBase := base
	if t, ok := base.(*http.Transport); ok && upstream.SyncSupported {
		directBase = upstream.NewSyncTransport(t)
	}
	p := &Proxy{
		cfg: cfg,
		log: cfg.Logger.WithValues("server", cfg.Server),
		http: upstream.Client(&upstream.Transport{Base: base, Credential: cfg.Credential, Rejected: cfg.CredentialRejected,
			Origin: credOrigin, Trace: cfg.TracerProvider != nil}),
		direct: upstream.Client(&upstream.Transport{Base: directBase, Credential: cfg.Credential, Rejected: cfg.CredentialRejected,
			Origin: credOrigin, Trace: cfg.TracerProvider != nil}),
	}
	p.owners.Max, p.owners.MaxPerAgent = maxTaskOwners, maxTaskOwnersPerAgent
	p.v2026 = agent2026.New(agent2026.Config{
		Server: cfg.Server, URL: cfg.URL, Gate: cfg.Gate, CallTimeout: cfg.CallTimeout, ConnectTimeout: cfg.ConnectTimeout,
		TrustDeclaredProvenance: cfg.TrustDeclaredProvenance, AgentOf: p.requestAgent,
	}, p.log, p.direct, &p.owners)
	p.v2025 = agent2025.New(agent2025.Config{
		Server: cfg.Server, URL: cfg.URL, Gate: cfg.Gate, Agent: cfg.Agent, Agents: cfg.Agents, Sessions: cfg.Sessions,
		CallTimeout: cfg.CallTimeout, ConnectTimeout: cfg.ConnectTimeout, SessionTimeout: cfg.SessionTimeout,
		ElicitationTimeout: cfg.ElicitationTimeout, TrustDeclaredProvenance: cfg.TrustDeclaredProvenance,
		Elicitation: cfg.Elicitation, AgentOf: p.requestAgent, SDKOnly: cfg.sdkOnly,
	}, p.log, tracing.TracerOf(cfg.TracerProvider), p.http, p.direct, &p.owners)
	return p, nil
}

// ServeHTTP implements http.Handler: MCP streamable HTTP for the agent.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if admission.RefuseRebinding(w, r) {
		return // internal/mcpproxy/admission: every request of every revision, before anything reads it
	}
	r, ok := p.authenticate(w, r)
	if !ok {
		return
	}
	if !p.readBody(w, r) {
		return
	}
	if r.Method == http.MethodPost && p.v2026.Serve(w, r) {
		return // internal/mcpproxy/agent2026: a request of 2026-07-28
	}
	p.v2025.Serve(w, r) // internal/mcpproxy/agent2025: the session revisions
}

// readBody reads a request's body within ReadTimeout (a slow body is cut and the request
// refused), then lifts the connection's read deadline and bounds the answer's writing: a POST
// is answered within the longest a call can take, an event stream (GET) has no bound of its
// own (it ends with its session). The body is kept in memory for the handlers (it is bounded
// by the SDK's request limit; a larger one is left for the SDK to refuse).
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) bool {
	rc := http.NewResponseController(w)
	if r.Body != nil && r.Body != http.NoBody {
		_ = rc.SetReadDeadline(time.Now().Add(p.cfg.ReadTimeout))
		var buf bytes.Buffer
		_, err := buf.ReadFrom(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
		if err != nil {
			http.Error(w, "the request body could not be read in time", http.StatusRequestTimeout)
			return false
		}
		if buf.Len() > mcp.DefaultMaxRequestBodyBytes {
			http.Error(w, "the request body is too large", http.StatusRequestEntityTooLarge)
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	}
	// Errors mean the writer does not support deadlines (tests' recorders): nothing to lift.
	_ = rc.SetReadDeadline(time.Time{})
	if r.Method == http.MethodPost {
		elicit := p.cfg.ElicitationTimeout
		if elicit == 0 {
			elicit = DefaultElicitationTimeout
		}
		_ = rc.SetWriteDeadline(time.Now().Add(p.cfg.ConnectTimeout + p.cfg.CallTimeout + elicit + p.cfg.ReadTimeout))
	} else {
		_ = rc.SetWriteDeadline(time.Time{})
	}
	return true
}

// Server returns the upstream's ToolServer name.
func (p *Proxy) Server() string { return p.cfg.Server }

// Destination returns the upstream URL this proxy contacts.
func (p *Proxy) Destination() string { return p.cfg.URL }

// Close ends every agent session and its upstream session. The proxy refuses new sessions
// afterwards.
func (p *Proxy) Close() error {
	p.v2025.Close()
	p.v2026.Close()
	p.direct.CloseIdleConnections()
	p.http.CloseIdleConnections()
	return nil
}
