package sidecar

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/policysource"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/upstreamauth"
)

// JournalFile is the journal's file name in Config.JournalDir.
const JournalFile = "journal.db"

// IDKeyFile holds the key of the act ids in Config.JournalDir (mode 0600): a retry after a
// restart is recognised as its session's because the key is the same.
const IDKeyFile = "act-id.key"

// The receipt log's files in Config.JournalDir (receipts.go): the log, the Ed25519 key that
// signs its checkpoints (generated on the first start, mode 0600) and that key's public half for
// `actgate receipts verify --key`. The names are the standalone gate's.
const (
	ReceiptsFile   = "receipts.jsonl"
	ReceiptKeyFile = "receipts.key"
	ReceiptPubFile = "receipts.pub.pem"
)

// HealthPath answers 200 once the sidecar serves (the kubelet's startup probe of the native
// sidecar, on the loopback listener).
const HealthPath = "/healthz"

// shutdownTimeout bounds a graceful shutdown.
const shutdownTimeout = 10 * time.Second

// anchorFlushTimeout bounds the wait at shutdown for the last checkpoint's anchor.
const anchorFlushTimeout = 5 * time.Second

// Upstream is one protected server as the sidecar is configured for it.
type Upstream struct {
	// Name is the ToolPolicy server name; the agent reaches it at /mcp/{Name}.
	Name string
	// URL is the policy's spec.servers[].url: where the sidecar forwards, and the destination
	// every authority is bound to.
	URL string
	// CredentialFile holds the bearer token presented upstream (the Secret the webhook moved
	// into the sidecar). Read again at most fileutil.CredentialTTL after the last read, so a rotated
	// Secret applies without a restart. Empty: no credential.
	CredentialFile string
	// OAuth, instead of CredentialFile, has the sidecar obtain short-lived tokens for the
	// server from the organisation's identity provider (docs/identity.md "Gate → upstream"):
	// client credentials, or token exchange of the pod's projected service-account token. An
	// empty Resource is the server's URL.
	OAuth *upstreamauth.Config
}

// Config is the whole sidecar process (`actgate sidecar`).
type Config struct {
	// Listen is the loopback address to listen on (127.0.0.1:port or [::1]:port).
	Listen string
	// AuthorityURL is the authority service's base URL. Required.
	AuthorityURL string
	// AuthorityCA is the PEM CA bundle the service's certificate is verified with, as text
	// (the injected sidecar's ACTGATE_AUTHORITY_CA, fixed at pod creation), parsed strictly
	// (ParseCABundle); AuthorityCAFile names a file of it instead. At most one; neither means
	// the system roots.
	AuthorityCA     string
	AuthorityCAFile string
	// TokenFile is the projected service-account token presented to the service. Required.
	TokenFile string
	// PublicKey holds the service's authority-signing public keys as PEM text
	// (ParsePublicKeys; the injected sidecar's ACTGATE_AUTHORITY_PUBLIC_KEY), PublicKeyFile a
	// file of them. Exactly one is required: without keys, or with a garbled one, the sidecar
	// does not start (ErrTrustAnchor).
	PublicKey     string
	PublicKeyFile string
	// Namespace is the pod's namespace. Required.
	Namespace string
	// Agent is the pod's identity, system:serviceaccount:<namespace>:<name>. Required.
	Agent string
	// SinkID is the governing ToolPolicy's spec.sink.id. Required.
	SinkID string
	// Principal is the acts' initiating principal; empty means Agent.
	Principal string
	// Upstreams are the protected servers. At least one.
	Upstreams []Upstream
	// UpstreamCAFile, when set, is a PEM CA bundle trusted for https upstreams in addition to
	// the system roots.
	UpstreamCAFile string
	// JournalDir holds the dispatch journal (the pod's emptyDir). Required.
	JournalDir string
	// CallTimeout bounds one upstream tools/call; 0 means mcpproxy.DefaultCallTimeout.
	CallTimeout time.Duration
	// ReviewTimeout bounds one POST to the service; 0 means DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// Log receives ids, digests and codes, never argument values.
	Log logr.Logger
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Metrics, when set, observes every call (internal/metrics: enforce latency, decisions,
	// side-effect denies) and counts the journal's INDETERMINATE records, seeded at start. The
	// caller serves its registry.
	Metrics *metrics.Gate
	// TracerProvider records the spans of each call and propagates W3C trace context to the
	// authority service and the upstreams (internal/tracing). Optional: nil is tracing off.
	TracerProvider trace.TracerProvider
	// PolicySource holds the pod's governing ToolPolicy (a sink.PolicyEvaluator; ReadyPath
	// reports it). Serve runs it. Optional: nil follows the authority service at AuthorityURL
	// with the same CA and token as the reviews.
	PolicySource *policysource.Source
	// ReceiptMirror, when set, receives the receipt log as a receipt stream (receipt.Options
	// Mirror: every committed receipt and checkpoint as a JSON line), so that the cluster's log
	// pipeline keeps the evidence after the pod is gone. `actgate sidecar` sets its stdout.
	ReceiptMirror io.Writer
	// AgentOAuth, when set, is the governing policy's spec.agentAuth: agents authenticate to
	// the sidecar with the organisation's identity provider, and each review carries the
	// agent's token for the authority service to verify (agentauth.go). ExternalURL is the
	// sidecar's URL as agents reach it, for the protected resource metadata (default
	// http://LISTEN).
	AgentOAuth  *v1alpha1.AgentAuth
	ExternalURL string
	// AnchorMetrics counts the posts of the receipt log's checkpoints to the authority service
	// (internal/anchor). Optional.
	AnchorMetrics *anchor.Metrics
}

// CheckLoopback refuses a listen address that is not a loopback IP with a port: the sidecar's
// endpoints are for the containers of its own pod only.
func CheckLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: the host must be a loopback IP (127.0.0.1 or ::1)", addr)
	}
	if port == "" {
		return fmt.Errorf("listen address %q: a port is required", addr)
	}
	return nil
}

// Sidecar is the assembled process: the gate, one MCP proxy per upstream, the host-loop
// endpoint and the journal. Build it with New, serve it with Serve.
type Sidecar struct {
	cfg      Config
	gate     *Gate
	store    *boltstore.Store
	receipts *receipt.Log
	proxies  []*mcpproxy.Proxy
	outbox   *Outbox
	policy   *policysource.Source
	// anchor posts the receipt log's newest checkpoint to the pod's ReceiptAnchor; offered is
	// the seq of the newest checkpoint the log signed.
	anchor  *anchor.Anchorer
	offered atomic.Uint64
	handler http.Handler
	log     logr.Logger
	ready   *readiness
}

// New checks cfg, loads the keys, CA and credentials, opens the journal (recovering any
// dispatch a previous run left in flight to INDETERMINATE) and builds the handlers.
func New(cfg Config) (*Sidecar, error) {
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	verifier, err := verifierFrom(cfg.PublicKey, cfg.PublicKeyFile)
	if err != nil {
		return nil, err
	}
	roots, err := caPoolFrom(cfg.AuthorityCA, cfg.AuthorityCAFile)
	if err != nil {
		return nil, err
	}
	httpClient := authorityClient(roots)
	token := review.TokenFile(cfg.TokenFile)
	if _, err := token(); err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	upstreamTLS, err := upstreamTLSConfig(cfg.UpstreamCAFile)
	if err != nil {
		return nil, err
	}
	upstreamTransport := upstreamTransport(upstreamTLS)
	creds, rejected, err := upstreamCredentials(cfg.Upstreams)
	if err != nil {
		return nil, err
	}

	if err := os.MkdirAll(cfg.JournalDir, 0o700); err != nil {
		return nil, fmt.Errorf("journal dir: %w", err)
	}
	store, err := boltstore.Open(filepath.Join(cfg.JournalDir, JournalFile), boltstore.Options{Verifier: verifier, Now: cfg.Now})
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	s := &Sidecar{cfg: cfg, store: store, log: cfg.Log}
	fail := func(err error) (*Sidecar, error) {
		_ = s.Close()
		return nil, err
	}
	idKey, err := loadOrCreateKey(filepath.Join(cfg.JournalDir, IDKeyFile), act.MinIDKeyBytes)
	if err != nil {
		return fail(fmt.Errorf("act id key: %w", err))
	}
	if s.outbox, err = OpenOutbox(filepath.Join(cfg.JournalDir, OutboxFile)); err != nil {
		return fail(err)
	}
	signer, err := receipt.LoadOrCreateSigner(filepath.Join(cfg.JournalDir, ReceiptKeyFile), filepath.Join(cfg.JournalDir, ReceiptPubFile))
	if err != nil {
		return fail(fmt.Errorf("receipts: %w", err))
	}
	authority := &review.Client{URL: cfg.AuthorityURL, HTTP: httpClient, Token: token, TracerProvider: cfg.TracerProvider}
	// The Anchorer exists before the log opens: Open offers the file's last checkpoint.
	pub, err := os.ReadFile(filepath.Join(cfg.JournalDir, ReceiptPubFile))
	if err != nil {
		return fail(fmt.Errorf("receipts: %w", err))
	}
	if s.anchor, err = anchor.New(anchor.Options{Post: authority.PostAnchor, PublicKeyPEM: string(pub),
		Metrics: cfg.AnchorMetrics, Log: cfg.Log.WithName("anchor")}); err != nil {
		return fail(fmt.Errorf("receipt anchor: %w", err))
	}
	offer := func(sc receipt.SignedCheckpoint) {
		s.offered.Store(sc.Seq)
		s.anchor.Offer(sc)
	}
	// Open verifies what a previous run wrote and continues its chain (internal/receipt).
	s.receipts, err = receipt.Open(receipt.Options{Path: filepath.Join(cfg.JournalDir, ReceiptsFile), Signer: signer, Now: cfg.Now,
		Mirror: cfg.ReceiptMirror, OnCheckpoint: offer})
	if err != nil {
		return fail(fmt.Errorf("receipts: %w", err))
	}
	if rec := s.receipts.Recovered(); rec.SavedTo != "" {
		cfg.Log.Info("Receipt log cut back to its last signed checkpoint after an unclean stop",
			"unsignedReceipts", rec.UnsignedReceipts, "tornBytes", rec.TornBytes, "savedTo", rec.SavedTo)
	}

	var observer sink.Observer
	if cfg.Metrics != nil {
		observer = cfg.Metrics
	}
	if s.policy = cfg.PolicySource; s.policy == nil {
		if s.policy, err = newPolicySource(cfg, authority); err != nil {
			return fail(err)
		}
	}
	servers := make([]Server, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		servers[i] = Server{Name: u.Name, URL: u.URL}
	}
	s.gate, err = NewGate(Options{
		Review: authority, Policy: s.policy, Store: store, Namespace: cfg.Namespace, SinkID: cfg.SinkID, Servers: servers,
		Principal: cfg.Principal, IDKey: idKey, Now: cfg.Now, ReviewTimeout: cfg.ReviewTimeout, Log: cfg.Log.WithName("gate"),
		Observer: observer, Receipts: s.receipts, TracerProvider: cfg.TracerProvider, Outbox: s.outbox,
	})
	if err != nil {
		return fail(err)
	}
	if cfg.Metrics != nil {
		// After the gate's start, whose journal recovery may have made records INDETERMINATE.
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRecordTimeout)
		err := cfg.Metrics.SeedIndeterminate(ctx, store)
		cancel()
		if err != nil {
			return fail(fmt.Errorf("journal: counting INDETERMINATE records: %w", err))
		}
	}
	agents, err := agentVerifier(cfg)
	if err != nil {
		return fail(err)
	}
	var authn mcpproxy.AgentAuthenticator
	if agents != nil {
		authn = agents
	}
	mux := http.NewServeMux()
	for _, u := range cfg.Upstreams {
		p, err := mcpproxy.New(mcpproxy.Config{
			Server: u.Name, URL: u.URL, Gate: s.gate, Agent: cfg.Agent, Agents: authn, Credential: creds[u.Name], CredentialRejected: rejected[u.Name],
			Transport: upstreamTransport, CallTimeout: cfg.CallTimeout, SessionTimeout: time.Hour,
			Logger: cfg.Log.WithName("mcp"), TracerProvider: cfg.TracerProvider,
		})
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
		}
		s.proxies = append(s.proxies, p)
		mux.Handle(mcpproxy.Path(u.Name), p)
		if alt := mcpproxy.AltPath(u.Name); alt != mcpproxy.Path(u.Name) { // a server named mcp has one path
			mux.Handle(alt, p) // the form the MCP Inspector reaches, as actgate serve mounts it
		}
	}
	if agents != nil {
		handleAgentOAuth(mux, agents, cfg.Upstreams, s.gate.HostLoop())
	} else {
		host := s.gate.HostLoopHandler(cfg.Agent)
		mux.Handle(hostloop.EnforcePath, host)
		mux.Handle(hostloop.CompletePath, host)
	}
	mux.HandleFunc(HealthPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.ready = newReadiness(s.policy, cfg.Upstreams, upstreamTLS)
	s.ready.level = authority.LevelStatus
	mux.Handle(ReadyPath, s.ready)
	s.handler = mux
	return s, nil
}

// check validates cfg before anything is opened.
func (cfg *Config) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := CheckLoopback(cfg.Listen); err != nil {
		bad("%w", err)
	}
	if u, err := url.Parse(cfg.AuthorityURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		bad("authority URL %q must be an absolute https URL", cfg.AuthorityURL)
	}
	if cfg.PublicKey == "" && cfg.PublicKeyFile == "" {
		errs = append(errs, fmt.Errorf("%w: the authority's public key is required (inline or as a file)", ErrTrustAnchor))
	}
	for name, v := range map[string]string{"token file": cfg.TokenFile,
		"namespace": cfg.Namespace, "agent": cfg.Agent, "sink id": cfg.SinkID, "journal dir": cfg.JournalDir} {
		if v == "" {
			bad("%s is required", name)
		}
	}
	if cfg.Agent != "" && cfg.Namespace != "" && !strings.HasPrefix(cfg.Agent, "system:serviceaccount:"+cfg.Namespace+":") {
		bad("agent %q is not a service account of namespace %s", cfg.Agent, cfg.Namespace)
	}
	if len(cfg.Upstreams) == 0 {
		bad("at least one upstream server is required")
	}
	if cfg.CallTimeout < 0 || cfg.ReviewTimeout < 0 {
		bad("timeouts must not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// authorityClient is the HTTPS client for the service: TLS 1.2+, the CA pool (nil: the system
// roots), no redirects (a review is answered by the service it was sent to, or not at all).
func authorityClient(roots *x509.CertPool) *http.Client {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.Proxy = nil // in-cluster traffic to the service never goes through an HTTP proxy
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// upstreamTLSConfig trusts caFile beside the system roots when set; nil (the transport's
// default, the system roots) when not.
func upstreamTLSConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pool, err := fileutil.ReadCertPool(caFile, true)
	if err != nil {
		return nil, fmt.Errorf("upstream CA file: %w", err)
	}
	return upstreamTLSConfigFromPool(pool), nil
}

func upstreamTLSConfigFromPool(pool *x509.CertPool) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
}

// upstreamTransport is the base transport to the upstreams, with tlsCfg when set.
func upstreamTransport(tlsCfg *tls.Config) http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	return tr
}

// Handler is the sidecar's HTTP surface: /mcp/{server}, /v1/enforce, /v1/complete, /healthz,
// /readyz.
func (s *Sidecar) Handler() http.Handler { return s.handler }

// Gate is the sidecar's gate.
func (s *Sidecar) Gate() *Gate { return s.gate }

// Policy is the sidecar's policy source.
func (s *Sidecar) Policy() *policysource.Source { return s.policy }

// Journal is the sidecar's dispatch journal.
func (s *Sidecar) Journal() *boltstore.Store { return s.store }

// Serve answers on ln until ctx ends, then shuts down gracefully and closes the sidecar.
func (s *Sidecar) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	pctx, stopPolicy := context.WithCancel(ctx)
	defer stopPolicy()
	go func() { _ = s.policy.Run(pctx) }()
	// The anchor outlives the listener: the last checkpoint, signed at shutdown, is posted too.
	actx, stopAnchor := context.WithCancel(context.Background())
	defer stopAnchor()
	go s.anchor.Run(actx)
	// Until the service's first answer arrives every call is refused, so calls are taken once
	// it has (a review timeout at most: without it the sidecar serves, and refuses).
	for deadline := time.Now().Add(orDefault(s.cfg.ReviewTimeout, DefaultReviewTimeout)); s.policy.Status().Updated.IsZero() &&
		time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(5 * time.Millisecond)
	}
	go func() { errc <- srv.Serve(ln) }()
	go s.reportReadiness(pctx)
	s.log.Info("Serving", "address", ln.Addr().String(), "sink", s.cfg.SinkID, "namespace", s.cfg.Namespace,
		"agent", s.cfg.Agent, "servers", len(s.proxies), "authority", s.cfg.AuthorityURL)
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	s.log.Info("Shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(sctx) }()
	// Ending the agent sessions ends their SSE streams, which Shutdown would otherwise wait for.
	for _, p := range s.proxies {
		_ = p.Close()
	}
	if err := <-done; err != nil {
		_ = srv.Close()
	}
	// The calls are over: settle what host loops left open, sign the log's last checkpoint
	// and give the Anchorer a bounded time to post it.
	s.gate.Close()
	fctx, fcancel := context.WithTimeout(context.Background(), anchorFlushTimeout)
	if err := s.receipts.Flush(fctx); err != nil {
		s.log.Error(err, "Receipt log not flushed at shutdown")
	}
	s.anchor.Flush()
	for s.anchor.Anchored() < s.offered.Load() && fctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	fcancel()
	stopAnchor()
	if err := s.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// Close closes the proxies, stops following the policy and reporting outcomes (what is not
// acknowledged stays in the journal for the next start), commits and closes the receipt log,
// and closes the journal.
func (s *Sidecar) Close() error {
	for _, p := range s.proxies {
		_ = p.Close()
	}
	if s.gate != nil {
		s.gate.Close()
	}
	var errs []error
	if s.outbox != nil {
		errs = append(errs, s.outbox.Close())
	}
	if s.receipts != nil {
		errs = append(errs, s.receipts.Close())
	}
	errs = append(errs, s.store.Close())
	return errors.Join(errs...)
}

// loadOrCreateKey returns the n-byte secret at path, creating it (mode 0600) on first use.
func loadOrCreateKey(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != n {
			return nil, fmt.Errorf("%s: want %d bytes, found %d", path, n, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, n)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadOrCreateKey(path, n)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return b, f.Close()
}

// upstreamCredentials returns, per server, what the proxy presents upstream: the tokens of the
// identity provider (Upstream.OAuth, with the function that drops a token the upstream refused)
// or the static credential file, read once here so the sidecar does not start without it.
func upstreamCredentials(ups []Upstream) (map[string]func(context.Context) (string, error), map[string]func(string), error) {
	creds := map[string]func(context.Context) (string, error){}
	rejected := map[string]func(string){}
	for _, u := range ups {
		if u.OAuth != nil {
			if u.CredentialFile != "" {
				return nil, nil, fmt.Errorf("upstream %s: a credential file and OAuth are exclusive", u.Name)
			}
			oc := *u.OAuth
			if oc.Resource == "" {
				oc.Resource = u.URL
			}
			if oc.SubjectAgent {
				// The token of each call's agent, verified by the sidecar's agent OAuth, is
				// exchanged for the upstream's (docs/identity.md "On behalf of the agent").
				src, err := upstreamauth.NewAgentSource(oc, 0)
				if err != nil {
					return nil, nil, fmt.Errorf("upstream %s: %w", u.Name, err)
				}
				creds[u.Name], rejected[u.Name] = src.Token, src.Invalidate
				continue
			}
			src, err := upstreamauth.New(oc)
			if err != nil {
				return nil, nil, fmt.Errorf("upstream %s: %w", u.Name, err)
			}
			creds[u.Name], rejected[u.Name] = src.Token, src.Invalidate
			continue
		}
		if u.CredentialFile == "" {
			continue
		}
		read := fileutil.TokenSource(u.CredentialFile, fileutil.CredentialTTL)
		if _, err := read(context.Background()); err != nil {
			return nil, nil, fmt.Errorf("upstream %s: credential: %w", u.Name, err)
		}
		creds[u.Name] = read
	}
	return creds, rejected, nil
}
