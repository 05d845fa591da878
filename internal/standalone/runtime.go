package standalone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/notify"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/reconcile"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tracing"
)

// shutdownTimeout bounds a graceful shutdown after SIGTERM.
const shutdownTimeout = 10 * time.Second

// runtimeID is the act's agent.runtime_id for calls through serve.
const runtimeID = "actgate-serve"

// Hooks adjust a gate for tests and the demo.
type Hooks struct {
	// Transport is the base RoundTripper for upstream requests (nil: a default transport).
	Transport http.RoundTripper
	// TracerProvider, when set, records the gate's spans instead of the provider of the
	// config's tracing section (tests: an in-memory recorder).
	TracerProvider trace.TracerProvider
}

// Runtime is one running gate: everything `actgate serve` opens, and its HTTP handler.
type Runtime struct {
	cfg      *gateconfig.Config
	log      logr.Logger
	store    *boltstore.Store
	receipts *receipt.Log
	gate     *sink.Gate
	proxies  []*mcpproxy.Proxy
	// host serves host loops (/v1/enforce, /v1/complete) through the gate, the code the pod's
	// sidecar runs (internal/hostloop).
	host    *hostloop.Loop
	handler http.Handler
	// metrics is the registry of the gate's Prometheus metrics (internal/metrics), served on
	// metrics.address by ServeMetrics.
	metrics *prometheus.Registry
	// notifier announces pending moments to the configured webhooks (notify.go); nil
	// without a notifications section.
	notifier *notify.Notifier
	// settler settles INDETERMINATE dispatches through the servers' reconciliation endpoints
	// (reconcile.go); nil when no server has one.
	settler *reconcile.Settler
	// traceShutdown flushes and stops the tracing section's exporter.
	traceShutdown func(context.Context) error
}

// Open opens the data dir, the store (recovering in-flight dispatches to INDETERMINATE
// before anything is served), the receipt log and the gate, and builds the HTTP handler.
func Open(ctx context.Context, cfg *gateconfig.Config, log logr.Logger, hooks Hooks) (rt *Runtime, err error) {
	opened := &Runtime{cfg: cfg, log: log}
	rt = opened
	defer func() {
		// Every failure closes what was opened. It closes opened, not rt: `return nil, err`
		// has set rt to nil by the time this runs.
		if err != nil {
			_ = opened.Close()
			rt = nil
		}
	}()
	if err := ensurePrivateDir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("dataDir: %w", err)
	}
	signer, err := authority.LoadOrCreateKey(cfg.Path(gateconfig.AuthorityKeyFile))
	if err != nil {
		return nil, err
	}
	receiptSigner, err := loadReceiptKey(cfg)
	if err != nil {
		return nil, err
	}
	idKey, err := loadOrCreateSecret(cfg.Path(gateconfig.ActIDKeyFile), act.MinIDKeyBytes)
	if err != nil {
		return nil, err
	}
	ids, err := act.NewIDIssuer(idKey, nil)
	if err != nil {
		return nil, err
	}
	tokens := map[string][]byte{}
	for _, p := range cfg.Principals {
		if err := ensurePrivateDir(filepath.Dir(cfg.PrincipalTokenPath(p.Name))); err != nil {
			return nil, err
		}
		tok, err := loadOrCreateToken(cfg.PrincipalTokenPath(p.Name))
		if err != nil {
			return nil, err
		}
		tokens[p.Name] = tok
	}

	rt.store, err = boltstore.Open(cfg.Path(gateconfig.StoreFile), boltstore.Options{Verifier: signer.Verifier()})
	if err != nil {
		return nil, err
	}
	// AEB "Classify the Effect Outcome": whatever a previous process left DISPATCH_PENDING or
	// INVOKED may have reached the upstream; it becomes INDETERMINATE before anything is
	// served, and is never dispatched again (tool-use-binding §22 T-G).
	n, err := rt.store.RecoverOnStart(ctx)
	if err != nil {
		return nil, fmt.Errorf("recovering the journal: %w", err)
	}
	if n > 0 {
		log.Info("Recovered in-flight dispatches as INDETERMINATE", "count", n)
	}
	rt.receipts, err = receipt.Open(receipt.Options{Path: cfg.Path(gateconfig.ReceiptsFile), Signer: receiptSigner})
	if err != nil {
		return nil, err
	}
	compiled, err := cfg.Compile()
	if err != nil {
		return nil, err
	}
	rt.metrics = prometheus.NewRegistry()
	rt.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gateMetrics, err := metrics.NewGate(rt.metrics)
	if err != nil {
		return nil, err
	}
	rt.notifier, err = startNotifier(ctx, cfg, log, rt.metrics)
	if err != nil {
		return nil, fmt.Errorf("notifications: %w", err)
	}
	tp := hooks.TracerProvider
	if tp == nil {
		if tp, rt.traceShutdown, err = tracing.Setup(cfg.TracingConfig()); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
	}
	rt.gate, err = sink.New(sink.Options{
		SinkID: cfg.SinkID, Policy: sink.CompiledPolicy(compiled), Store: rt.store, Journal: rt.store,
		Signer: signer, IDs: ids, Receipts: rt.receipts, Log: log.WithName("sink"), RuntimeID: runtimeID,
		Observer:                  sink.Observers(gateMetrics, observer(rt.notifier)),
		Pins:                      OpenToolPins(cfg.DataDir), // rules[].pin: the data dir's ToolPinsFile
		MaxPendingMomentsPerAgent: cfg.Limits.PendingMomentsPerAgent, MaxPendingMomentsPerSession: cfg.Limits.PendingMomentsPerSession,
		Moments:        boltMoments{rt.store},
		MomentTTL:      cfg.MomentExpiry(),
		TracerProvider: tp,
	})
	if err != nil {
		return nil, err
	}
	if rt.settler, err = rt.newSettler(); err != nil {
		return nil, err
	}
	// Recovery (above) has made every dispatch left in flight INDETERMINATE: count them.
	if err := gateMetrics.SeedIndeterminate(ctx, rt.store); err != nil {
		return nil, fmt.Errorf("counting INDETERMINATE dispatches: %w", err)
	}

	mux := http.NewServeMux()
	agents, err := agentAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	handleResourceMetadata(mux, cfg, agents)
	sessions := mcpproxy.NewSessionLimiter(cfg.Limits.Sessions, cfg.Limits.SessionsPerAgent)
	for i, srv := range cfg.Policy.Servers {
		cred, err := cfg.Upstream(srv.Name).UpstreamCredential(srv.URL)
		if err != nil {
			return nil, fmt.Errorf("upstreams[%s]: %w", srv.Name, err)
		}
		p, err := mcpproxy.New(mcpproxy.Config{
			Server: srv.Name, URL: srv.URL, Gate: rt.gate, Agent: cfg.Agent.Name, Credential: cred.Token, CredentialRejected: cred.Rejected,
			Transport: hooks.Transport, TrustDeclaredProvenance: cfg.Agent.TrustDeclaredProvenance,
			Agents: agents, Sessions: sessions, ReadTimeout: cfg.ReadTimeout(),
			CallTimeout: cfg.Timeout(), SessionTimeout: time.Hour, Logger: log.WithName("mcp"),
			Elicitation:    compiled, // spec.elicitation: moments of the classes it lists are also elicited
			TracerProvider: tp,
		})
		if err != nil {
			return nil, fmt.Errorf("policy.servers[%d]: %w", i, err)
		}
		rt.proxies = append(rt.proxies, p)
		mux.Handle(mcpproxy.Path(srv.Name), p)
		if alt := mcpproxy.AltPath(srv.Name); alt != mcpproxy.Path(srv.Name) { // a server named mcp has one path
			mux.Handle(alt, p)
		}
	}
	// Host loops are authenticated as MCP agents are: the agent's bearer token names the agent
	// whose calls they are (agent.authentication none: the configured agent).
	servers := map[string]string{}
	for _, srv := range cfg.Policy.Servers {
		servers[srv.Name] = srv.URL
	}
	rt.host, err = hostloop.New(hostloop.Config{
		Gate: rt.gate, Records: rt.store, Servers: servers, RuntimeID: runtimeID, IDs: ids, Log: log.WithName("hostloop"),
		MaxPending: cfg.Limits.HostLoopCalls, MaxPendingPerAgent: cfg.Limits.HostLoopCallsPerAgent,
	})
	if err != nil {
		return nil, err
	}
	auth := hostloop.FixedAgent(cfg.Agent.Name)
	if agents != nil {
		auth = agents.Authenticate
	}
	host := rt.host.Handler(auth)
	mux.Handle(hostloop.EnforcePath, host)
	mux.Handle(hostloop.CompletePath, host)
	api := &momentsAPI{gate: rt.gate, tokens: tokens, log: log.WithName("moments")}
	api.register(mux)
	(&budgetsAPI{moments: api, list: rt.store.Budgets, now: time.Now}).register(mux)
	rt.handler = mux
	return rt, nil
}

// Serve answers on ln until ctx ends, then shuts down gracefully and closes the runtime.
func (rt *Runtime) Serve(ctx context.Context, ln net.Listener, out io.Writer) error {
	srv := rt.cfg.HTTPServer(rt.handler)
	base := "http://" + ln.Addr().String()
	endpoint := rt.cfg.Path(gateconfig.EndpointFile)
	if err := fileutil.WriteAtomic(endpoint, []byte(base+"\n"), 0o600); err != nil {
		_ = ln.Close()
		_ = rt.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go rt.sweepMoments(sweepCtx)
	settled := make(chan struct{})
	go func() { defer close(settled); rt.runSettler(sweepCtx) }()
	fmt.Fprintf(out, "actgate serving on %s (sink %s)\n", base, rt.cfg.SinkID)
	for _, p := range rt.proxies {
		fmt.Fprintf(out, "  MCP server %-16s %s%s (or %s) -> %s\n", p.Server(), base, mcpproxy.Path(p.Server()), mcpproxy.AltPath(p.Server()), p.Destination())
	}
	switch rt.cfg.Agent.Authentication {
	case gateconfig.AuthNone:
	case gateconfig.AuthOAuth:
		fmt.Fprintf(out, "  agents                 Authorization: Bearer (access tokens of %s for %s; metadata %s%s)\n",
			rt.cfg.Agent.OAuth.Issuer, rt.cfg.Agent.OAuth.Audience, rt.cfg.ExternalURL, agentoauth.MetadataPath)
	default:
		for _, a := range rt.cfg.AgentNames() {
			fmt.Fprintf(out, "  agent %-16s Authorization: Bearer (token in %s)\n", a, rt.cfg.AgentTokenPath(a))
		}
	}
	fmt.Fprintf(out, "  host loops             %s%s, %s%s\n", base, hostloop.EnforcePath, base, hostloop.CompletePath)
	fmt.Fprintf(out, "  binding moments        %s/v1/moments (principals: %s)\n", base, principalNames(rt.cfg))
	fmt.Fprintf(out, "  web console            actgate console --as PRINCIPAL --data-dir %s\n", rt.cfg.DataDir)
	rt.log.Info("Serving", "address", base, "sink", rt.cfg.SinkID, "servers", len(rt.proxies))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	rt.log.Info("Shutting down")
	stopSweep()
	<-settled // a query in flight ends with its context: the store is closed below
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(sctx) }()
	// Ending the agent sessions ends their SSE streams, which Shutdown would otherwise wait for.
	for _, p := range rt.proxies {
		_ = p.Close()
	}
	if err := <-done; err != nil {
		_ = srv.Close()
	}
	_ = os.Remove(endpoint)
	if err := rt.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// momentSweepInterval is how often serve looks for binding moments that expired unresolved, so
// actgate_moments_expired_total counts them when they expire rather than when someone next
// lists moments.
const momentSweepInterval = 10 * time.Second

// sweepMoments reports expired moments to the gate's Observer until ctx ends.
func (rt *Runtime) sweepMoments(ctx context.Context) {
	t := time.NewTicker(momentSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rt.gate.SweepMoments()
		}
	}
}

// metricsHandler serves the gate's registry in the Prometheus exposition format.
func (rt *Runtime) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(rt.metrics, promhttp.HandlerOpts{}))
	return mux
}

// ServeMetrics serves /metrics on metrics.address (plain HTTP, loopback: counts, durations and
// bounded labels, never digests or arguments). An address the file names must be free; when
// the default is taken (another gate on this machine) the gate serves without metrics and says
// so. The returned function stops the listener.
func (rt *Runtime) ServeMetrics(log logr.Logger) (func(), error) {
	addr, explicit := rt.cfg.MetricsAddress()
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if explicit {
			return nil, err
		}
		log.Info("Metrics not served: the default metrics address is in use; set metrics.address (or \"off\")", "address", addr, "error", err.Error())
		return func() {}, nil
	}
	srv := &http.Server{Handler: rt.metricsHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("Serving metrics", "address", "http://"+ln.Addr().String()+"/metrics")
	return func() { _ = srv.Close() }, nil
}

// Close closes the proxies, the receipt log (flushing it) and the store.
func (rt *Runtime) Close() error {
	var errs []error
	for _, p := range rt.proxies {
		errs = append(errs, p.Close())
	}
	// Host-loop dispatches still awaiting their outcome become INDETERMINATE (the host may
	// have run the tool) while the store is open.
	if rt.host != nil {
		rt.host.Close()
		rt.host = nil
	}
	// Queued announcements are delivered (bounded) before the store closes; they need nothing
	// from it, but a shutdown should not lose what was already decided to be said.
	stopNotifier(rt.notifier, rt.log)
	rt.notifier = nil
	if rt.receipts != nil {
		errs = append(errs, rt.receipts.Close())
		rt.receipts = nil
	}
	if rt.store != nil {
		errs = append(errs, rt.store.Close())
		rt.store = nil
	}
	if rt.traceShutdown != nil {
		ctx, cancel := context.WithTimeout(context.Background(), tracing.DefaultExportTimeout)
		if err := rt.traceShutdown(ctx); err != nil {
			rt.log.Error(err, "Spans not exported at shutdown")
		}
		cancel()
		rt.traceShutdown = nil
	}
	return errors.Join(errs...)
}

func principalNames(cfg *gateconfig.Config) string {
	if len(cfg.Principals) == 0 {
		return "none configured"
	}
	names := make([]string, len(cfg.Principals))
	for i, p := range cfg.Principals {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// Config is the configuration the gate was opened with.
func (rt *Runtime) Config() *gateconfig.Config { return rt.cfg }

// Handler is the gate's HTTP handler: one MCP proxy per server at mcpproxy.Path(server), the
// host-loop endpoint at /v1/enforce and /v1/complete, and the moments API at /v1/moments.
func (rt *Runtime) Handler() http.Handler { return rt.handler }

// Gate is the gate's sink.
func (rt *Runtime) Gate() *sink.Gate { return rt.gate }

// Store is the gate's store: its authorities and its dispatch journal.
func (rt *Runtime) Store() *boltstore.Store { return rt.store }

// Metrics is the registry of the gate's Prometheus metrics.
func (rt *Runtime) Metrics() *prometheus.Registry { return rt.metrics }

// handleResourceMetadata serves, when agents authenticate with the identity provider's access
// tokens, the protected resource metadata of the gate and of each server path (RFC 9728 §3).
func handleResourceMetadata(mux *http.ServeMux, cfg *gateconfig.Config, agents mcpproxy.AgentAuthenticator) {
	v, ok := agents.(*agentoauth.Verifier)
	if !ok {
		return
	}
	names := make([]string, len(cfg.Policy.Servers))
	for i, srv := range cfg.Policy.Servers {
		names[i] = srv.Name
	}
	meta := v.MetadataHandler(names)
	mux.Handle(agentoauth.MetadataPath, meta)
	mux.Handle(agentoauth.MetadataPath+"/", meta)
}

// agentAuthenticator authenticates the configured agents by their tokens (creating the
// default token files on first start), or by the access tokens of the identity provider
// (agent.authentication oauth: internal/agentoauth); nil with agent.authentication "none".
func agentAuthenticator(cfg *gateconfig.Config) (mcpproxy.AgentAuthenticator, error) {
	if cfg.Agent.Authentication == gateconfig.AuthOAuth {
		return OAuthVerifier(cfg)
	}
	tokens, err := cfg.AgentTokens()
	if err != nil || tokens == nil {
		return nil, err
	}
	return mcpproxy.NewBearerAgents(tokens)
}

// OAuthVerifier is the verifier of agents' access tokens that agent.authentication oauth
// configures (internal/agentoauth); it contacts the provider only when asked.
func OAuthVerifier(cfg *gateconfig.Config) (*agentoauth.Verifier, error) {
	o := cfg.Agent.OAuth
	if cfg.Agent.Authentication != gateconfig.AuthOAuth || o == nil {
		return nil, errors.New("agent.authentication is not oauth")
	}
	var ca []byte
	if o.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(o.CAFile); err != nil {
			return nil, fmt.Errorf("agent.oauth.caFile: %w", err)
		}
	}
	reserved := []string{cfg.SinkID}
	for _, p := range cfg.Principals {
		reserved = append(reserved, p.Name)
	}
	skew, refresh, maxAge := o.Bounds()
	var intro *agentoauth.Introspection
	if in := o.Introspection; in != nil {
		if _, err := fileutil.ReadToken(in.ClientSecretFile); err != nil {
			return nil, fmt.Errorf("agent.oauth.introspection.clientSecretFile: %w", err)
		}
		file := in.ClientSecretFile
		intro = &agentoauth.Introspection{URL: in.URL, ClientID: in.ClientID, ClientSecret: func() (string, error) { return fileutil.ReadToken(file) }}
	}
	v, err := agentoauth.New(agentoauth.Options{
		Issuer: o.Issuer, ExternalURL: cfg.ExternalURL, Audience: o.Audience, JWKSURL: o.JWKSURL, Algorithms: o.Algorithms,
		AgentClaim: o.AgentClaim, AgentPrefix: o.AgentPrefix, Scopes: o.Scopes, Reserved: reserved,
		ClockSkew: skew, JWKSRefresh: refresh, JWKSMaxAge: maxAge, CAPEM: ca, Introspection: intro,
	})
	if err != nil {
		return nil, fmt.Errorf("agent.oauth: %w", err)
	}
	return v, nil
}
