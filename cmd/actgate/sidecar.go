package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/internal/tracing"
	"github.com/actgate/actgate/internal/upstreamauth"
)

// Environment variables of `actgate sidecar`. The injector (webhook/inject) sets the ones its
// template knows; each has a flag of the same meaning, and a flag given explicitly wins.
const (
	envListen          = "ACTGATE_LISTEN"
	envAuthorityURL    = "ACTGATE_AUTHORITY_URL"
	envAuthorityCA     = "ACTGATE_AUTHORITY_CA_FILE"
	envAuthorityCAPEM  = "ACTGATE_AUTHORITY_CA"
	envTokenFile       = "ACTGATE_AUTHORITY_TOKEN_FILE"
	envPublicKey       = "ACTGATE_AUTHORITY_PUBLIC_KEY_FILE"
	envPublicKeyPEM    = "ACTGATE_AUTHORITY_PUBLIC_KEY"
	envNamespace       = "ACTGATE_POD_NAMESPACE"
	envServiceAccount  = "ACTGATE_SERVICE_ACCOUNT"
	envSinkID          = "ACTGATE_SINK_ID"
	envPrincipal       = "ACTGATE_PRINCIPAL"
	envServers         = "ACTGATE_SERVERS"
	envServerURLs      = "ACTGATE_SERVER_URLS"
	envCredentialsDir  = "ACTGATE_CREDENTIALS_DIR"
	envUpstreamOAuth   = "ACTGATE_UPSTREAM_OAUTH"
	envAgentOAuth      = "ACTGATE_AGENT_OAUTH"
	envExternalURL     = "ACTGATE_EXTERNAL_URL"
	envUpstreamCA      = "ACTGATE_UPSTREAM_CA_FILE"
	envJournalDir      = "ACTGATE_JOURNAL_DIR"
	envMetricsAddress  = "ACTGATE_METRICS_BIND_ADDRESS"
	envTracingEndpoint = "ACTGATE_TRACING_ENDPOINT"
	envTracingRatio    = "ACTGATE_TRACING_SAMPLE_RATIO"
	defaultListen      = "127.0.0.1:15080"
	defaultTokenFile   = "/var/run/secrets/actgate.io/token/token"
	defaultJournalDir  = "/var/run/actgate/journal"
	credentialFileName = "credential"
)

// sidecarOptions are the flags of `actgate sidecar`.
type sidecarOptions struct {
	listen, authorityURL, authorityCA, tokenFile, publicKey string
	authorityCAPEM, publicKeyPEM                            string
	namespace, serviceAccount, sinkID, principal            string
	servers, serverURLs, credentialFiles, oauthFiles        []string
	credentialsDir, upstreamCA, journalDir                  string
	metricsAddr                                             string
	tracingEndpoint, tracingRatio                           string
	agentOAuth, externalURL                                 string
	callTimeout, reviewTimeout                              time.Duration
	verbose                                                 bool
	tracing                                                 tracing.Config // parsed by config
}

func newSidecarCmd(s streams) *cobra.Command {
	var o sidecarOptions
	cmd := &cobra.Command{
		Use:   "sidecar [flags]",
		Short: "Run the enforcing sidecar of an agent pod (Kubernetes mode)",
		Long: `Run the finality sink injected into an agent pod. It listens on a loopback address only,
proxies the agent's MCP traffic for each protected server at /mcp/{server}, and serves host
loops that run tool calls in-process at /v1/enforce and /v1/complete (see internal/sidecar).

Every tools/call is decided here by the finality sink of actgate serve with the pod's
ToolPolicy, which the sidecar follows from the authority service. The hot path needs no
control plane. A protected call asks the service for its authority (ActReview over TLS, the
pod's projected service-account token as bearer: one Permit, or a Review and a Consume for a
human grant); the authority is verified here against the live call with the service's public
key, journaled consumed with DISPATCH_PENDING in --journal-dir, and the upstream is called
once with the credential only this container holds. Outcomes are reported to the service
until it acknowledges them. Any error, timeout or undecodable answer of the service is a deny;
the upstream is never contacted then.

Every flag can come from the environment (the variable is named in the flag's help); a flag
given on the command line wins. The authority's public key and CA come inline (PEM text in
$ACTGATE_AUTHORITY_PUBLIC_KEY and $ACTGATE_AUTHORITY_CA, as the injector gives them: a
container's environment cannot change after the pod is created) or from files, never both;
without a public key, or with a garbled anchor, the sidecar does not start (SIDECAR_CONFIG
... authority trust anchor) and so forwards nothing. Servers are name=URL pairs where URL is the governing
ToolPolicy's spec.servers[].url; every name in ACTGATE_SERVERS needs one. A server's
credential is --credential-file name=PATH, else <credentials-dir>/<name>/credential when that
file exists.

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM); 1 when it cannot start or serve (the
stderr lines begin with SIDECAR_CONFIG or SIDECAR_SERVE); 2 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(s)
			if err != nil {
				return err
			}
			var reg *prometheus.Registry
			if o.metricsAddr != "" {
				reg = prometheus.NewRegistry()
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				if cfg.Metrics, err = metrics.NewGate(reg); err != nil {
					return fail(exitRejected, "SIDECAR_CONFIG metrics: "+err.Error())
				}
				if cfg.AnchorMetrics, err = anchor.NewMetrics(reg); err != nil {
					return fail(exitRejected, "SIDECAR_CONFIG metrics: "+err.Error())
				}
			}
			tp, shutdownTracing, err := tracing.Setup(o.tracing)
			if err != nil {
				return fail(exitRejected, "SIDECAR_CONFIG "+err.Error())
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), tracing.DefaultExportTimeout)
				defer cancel()
				_ = shutdownTracing(ctx)
			}()
			cfg.TracerProvider = tp
			// The receipt stream on stdout, for the cluster's log pipeline (the logs go to
			// stderr; the banner lines below are not records and verify --stream skips them).
			cfg.ReceiptMirror = s.out
			sc, err := sidecar.New(cfg)
			if err != nil {
				return sidecarConfigError(err)
			}
			if reg != nil {
				// Plain HTTP on the pod's network for Prometheus: counts, durations and bounded
				// labels (internal/metrics), never digests or arguments.
				mln, err := net.Listen("tcp", o.metricsAddr)
				if err != nil {
					_ = sc.Close()
					return fail(exitRejected, "SIDECAR_SERVE metrics: "+err.Error())
				}
				mux := http.NewServeMux()
				mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
				msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = msrv.Serve(mln) }()
				defer msrv.Close()
				fmt.Fprintf(s.out, "  metrics                http://%s/metrics\n", mln.Addr())
			}
			ln, err := net.Listen("tcp", cfg.Listen)
			if err != nil {
				_ = sc.Close()
				return fail(exitRejected, "SIDECAR_SERVE "+err.Error())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			base := "http://" + ln.Addr().String()
			fmt.Fprintf(s.out, "actgate sidecar serving on %s (sink %s, agent %s)\n", base, cfg.SinkID, cfg.Agent)
			for _, u := range cfg.Upstreams {
				fmt.Fprintf(s.out, "  MCP server %-16s %s%s -> %s\n", u.Name, base, mcpproxy.Path(u.Name), u.URL)
			}
			fmt.Fprintf(s.out, "  host loops             %s%s, %s%s\n", base, hostloop.EnforcePath, base, hostloop.CompletePath)
			if err := sc.Serve(ctx, ln); err != nil {
				return fail(exitRejected, "SIDECAR_SERVE "+err.Error())
			}
			return nil
		},
	}
	o.bind(cmd.Flags())
	cmd.AddCommand(newSidecarProbeCmd(s))
	return cmd
}

// bind defines the flags, with their defaults taken from the environment.
func (o *sidecarOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.listen, "listen", envOr(envListen, defaultListen), "loopback address to listen on, 127.0.0.1:PORT or [::1]:PORT ($"+envListen+")")
	f.StringVar(&o.authorityURL, "authority-url", os.Getenv(envAuthorityURL), "the authority service's https URL ($"+envAuthorityURL+")")
	f.StringVar(&o.authorityCA, "authority-ca-file", os.Getenv(envAuthorityCA), "PEM CA bundle of the authority service (default: system roots) ($"+envAuthorityCA+")")
	f.StringVar(&o.authorityCAPEM, "authority-ca", os.Getenv(envAuthorityCAPEM),
		"the authority service's CA bundle as PEM text, instead of --authority-ca-file; the injector sets it ($"+envAuthorityCAPEM+")")
	f.StringVar(&o.tokenFile, "token-file", envOr(envTokenFile, defaultTokenFile),
		"projected service-account token presented to the service, read on every call ($"+envTokenFile+")")
	f.StringVar(&o.publicKey, "authority-public-key-file", os.Getenv(envPublicKey), "PEM PUBLIC KEY block(s) of the service's authority-signing key ($"+envPublicKey+")")
	f.StringVar(&o.publicKeyPEM, "authority-public-key", os.Getenv(envPublicKeyPEM),
		"the service's authority-signing public key(s) as PEM text, instead of --authority-public-key-file; the injector sets it ($"+envPublicKeyPEM+")")
	f.StringVar(&o.namespace, "namespace", os.Getenv(envNamespace), "the pod's namespace ($"+envNamespace+")")
	f.StringVar(&o.serviceAccount, "service-account", os.Getenv(envServiceAccount),
		"the pod's service account; the agent is system:serviceaccount:NAMESPACE:NAME ($"+envServiceAccount+")")
	f.StringVar(&o.sinkID, "sink-id", os.Getenv(envSinkID), "the governing ToolPolicy's spec.sink.id ($"+envSinkID+")")
	f.StringVar(&o.principal, "principal", os.Getenv(envPrincipal), "the acts' initiating principal (default: the agent) ($"+envPrincipal+")")
	f.StringSliceVar(&o.servers, "servers", envList(envServers), "names of the protected servers; each needs a --server URL ($"+envServers+")")
	f.StringArrayVar(&o.serverURLs, "server", envList(envServerURLs), "a protected server, NAME=URL; repeatable ($"+envServerURLs+", comma-separated)")
	f.StringArrayVar(&o.credentialFiles, "credential-file", nil, "a server's upstream bearer token file, NAME=PATH; repeatable")
	f.StringArrayVar(&o.oauthFiles, "upstream-oauth", nil,
		"a server's OAuth settings file, NAME=PATH (YAML: grant, tokenURL, clientID, clientSecretFile or privateKeyFile, subjectTokenFile, …; "+
			"docs/identity.md): the sidecar obtains the server's tokens from the identity provider; repeatable")
	f.StringVar(&o.agentOAuth, "agent-oauth", os.Getenv(envAgentOAuth),
		"the ToolPolicy's spec.agentAuth as JSON ({issuer, audience, agentClaim, agentPrefix, scopes, jwksURL, caBundle}): agents sign in with "+
			"the organisation's identity provider and the authority service verifies their tokens (docs/identity.md); the injector sets it ($"+envAgentOAuth+")")
	f.StringVar(&o.externalURL, "external-url", os.Getenv(envExternalURL),
		"the sidecar's URL as agents reach it, http://HOST:PORT without a path (default http://LISTEN): the resource its OAuth protected resource metadata names, "+
			"which MCP clients compare with the URL they use ($"+envExternalURL+")")
	f.StringVar(&o.credentialsDir, "credentials-dir", os.Getenv(envCredentialsDir), "folder of NAME/credential files (the injected credentials volume) ($"+envCredentialsDir+")")
	f.StringVar(&o.upstreamCA, "upstream-ca-file", os.Getenv(envUpstreamCA), "PEM CA bundle trusted for https upstreams beside the system roots ($"+envUpstreamCA+")")
	f.StringVar(&o.journalDir, "journal-dir", envOr(envJournalDir, defaultJournalDir), "folder of the dispatch journal, the pod's emptyDir ($"+envJournalDir+")")
	f.DurationVar(&o.callTimeout, "call-timeout", mcpproxy.DefaultCallTimeout, "bound of one upstream tools/call once dispatched")
	f.DurationVar(&o.reviewTimeout, "review-timeout", sidecar.DefaultReviewTimeout, "bound of one request to the authority service (past it: EF_060)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", os.Getenv(envMetricsAddress),
		"address of a plain-HTTP Prometheus /metrics endpoint, e.g. \":15090\"; empty disables it ($"+envMetricsAddress+")")
	f.StringVar(&o.tracingEndpoint, "tracing-endpoint", os.Getenv(envTracingEndpoint),
		"OTLP/HTTP traces URL, e.g. http://otel-collector.observability:4318/v1/traces; empty disables tracing ($"+envTracingEndpoint+")")
	f.StringVar(&o.tracingRatio, "tracing-sample-ratio", envOr(envTracingRatio, "1"),
		"fraction of agent calls recorded, in [0, 1], each in a trace of the sidecar's own; the agent's traceparent is linked, never followed ($"+envTracingRatio+")")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log every allowed call too")
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// envList splits a comma-separated variable, dropping empty items.
func envList(name string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// config turns the flags into a sidecar.Config, or usage errors naming each problem.
func (o *sidecarOptions) config(s streams) (sidecar.Config, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, "USAGE "+fmt.Sprintf(format, args...)) }
	if o.callTimeout <= 0 || o.reviewTimeout <= 0 {
		bad("--call-timeout and --review-timeout must be positive")
	}
	urls := map[string]string{}
	for _, kv := range o.serverURLs {
		name, u, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "" || u == "":
			bad("--server %q is not NAME=URL", kv)
		case urls[name] != "":
			bad("--server %s given twice", name)
		default:
			urls[name] = u
		}
	}
	creds := map[string]string{}
	for _, kv := range o.credentialFiles {
		name, p, ok := strings.Cut(kv, "=")
		if !ok || name == "" || p == "" {
			bad("--credential-file %q is not NAME=PATH", kv)
			continue
		}
		if _, known := urls[name]; !known {
			bad("--credential-file %s names no --server", name)
		}
		creds[name] = p
	}
	oauth := o.upstreamOAuth(urls, creds, bad)
	agentAuth := o.agentSettings(bad)
	for _, name := range o.servers {
		if urls[name] == "" {
			bad("server %s (--servers) has no URL: give --server %s=URL (the ToolPolicy's spec.servers[].url)", name, name)
		}
	}
	if len(urls) == 0 {
		bad("at least one --server NAME=URL is required")
	}
	if o.namespace == "" || o.serviceAccount == "" {
		bad("--namespace and --service-account are required (the downward API sets $%s and $%s)", envNamespace, envServiceAccount)
	}
	ratio, err := strconv.ParseFloat(o.tracingRatio, 64)
	o.tracing = tracing.Config{Endpoint: o.tracingEndpoint, SampleRatio: ratio, ServiceName: "actgate-sidecar"}
	if err != nil {
		bad("--tracing-sample-ratio %q is not a number", o.tracingRatio)
	} else if err := o.tracing.Validate(); err != nil {
		bad("--tracing-endpoint, --tracing-sample-ratio: %v", err)
	}
	if len(problems) > 0 {
		return sidecar.Config{}, fail(exitUsage, problems...)
	}
	names := make([]string, 0, len(urls))
	for name := range urls {
		names = append(names, name)
	}
	sort.Strings(names)
	cfg := sidecar.Config{
		Listen: o.listen, AuthorityURL: o.authorityURL, AuthorityCA: o.authorityCAPEM, AuthorityCAFile: o.authorityCA, TokenFile: o.tokenFile,
		PublicKey: o.publicKeyPEM, PublicKeyFile: o.publicKey, Namespace: o.namespace, Agent: "system:serviceaccount:" + o.namespace + ":" + o.serviceAccount,
		SinkID: o.sinkID, Principal: o.principal, UpstreamCAFile: o.upstreamCA, JournalDir: o.journalDir, AgentOAuth: agentAuth,
		ExternalURL: strings.TrimSuffix(o.externalURL, "/"),
		CallTimeout: o.callTimeout, ReviewTimeout: o.reviewTimeout, Log: newLogger(s.err, o.verbose).WithName("sidecar"),
	}
	for _, name := range names {
		cred := creds[name]
		if cred == "" && o.credentialsDir != "" {
			p := filepath.Join(o.credentialsDir, name, credentialFileName)
			if _, err := os.Stat(p); err == nil {
				cred = p
			}
		}
		if oauth[name] != nil {
			cred = "" // the identity provider's tokens, not the injected static credential
		}
		cfg.Upstreams = append(cfg.Upstreams, sidecar.Upstream{Name: name, URL: urls[name], CredentialFile: cred, OAuth: oauth[name]})
	}
	return cfg, nil
}

// sidecarConfigError reports a configuration sidecar.New refused: one line per problem.
func sidecarConfigError(err error) error {
	var lines []string
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			if j, ok := e.(interface{ Unwrap() []error }); ok {
				for _, inner := range j.Unwrap() {
					lines = append(lines, "SIDECAR_CONFIG "+inner.Error())
				}
			}
		}
	}
	if len(lines) == 0 {
		lines = []string{"SIDECAR_CONFIG " + err.Error()}
	}
	return fail(exitRejected, lines...)
}

// upstreamOAuth reads the servers' identity-provider settings: the injector's
// ACTGATE_UPSTREAM_OAUTH (files relative to the credentials folder) and --upstream-oauth files.
func (o *sidecarOptions) upstreamOAuth(urls, creds map[string]string, bad func(string, ...any)) map[string]*upstreamauth.Config {
	oauth := map[string]*upstreamauth.Config{}
	if env := os.Getenv(envUpstreamOAuth); env != "" && o.credentialsDir == "" {
		bad("$%s needs the credentials folder (--credentials-dir, $%s)", envUpstreamOAuth, envCredentialsDir)
	} else if env != "" {
		// The injector's settings of the servers with spec.servers[].auth, files relative to the
		// credentials volume.
		var byServer map[string]json.RawMessage
		if err := json.Unmarshal([]byte(env), &byServer); err != nil {
			bad("$%s is not a JSON object of servers' OAuth settings", envUpstreamOAuth)
		}
		for name, raw := range byServer {
			u, known := urls[name]
			if !known {
				bad("$%s names server %s, which has no --server", envUpstreamOAuth, name)
				continue
			}
			uo, err := gateconfig.ParseUpstreamOAuth(raw, o.credentialsDir, u, o.agentOAuth != "")
			if err == nil {
				var sc upstreamauth.Config
				if sc, err = uo.SourceConfig(u); err == nil {
					oauth[name] = &sc
				}
			}
			if err != nil {
				bad("$%s: server %s: %v", envUpstreamOAuth, name, err)
			}
		}
	}
	for _, kv := range o.oauthFiles {
		name, p, ok := strings.Cut(kv, "=")
		if !ok || name == "" || p == "" {
			bad("--upstream-oauth %q is not NAME=PATH", kv)
			continue
		}
		u, known := urls[name]
		switch {
		case !known:
			bad("--upstream-oauth %s names no --server", name)
		case creds[name] != "":
			bad("--upstream-oauth %s: the server has a --credential-file too", name)
		case oauth[name] != nil:
			bad("--upstream-oauth %s given twice", name)
		default:
			uo, err := gateconfig.LoadUpstreamOAuth(p, u, o.agentOAuth != "")
			if err == nil {
				var sc upstreamauth.Config
				if sc, err = uo.SourceConfig(u); err == nil {
					oauth[name] = &sc
				}
			}
			if err != nil {
				bad("--upstream-oauth %s: %v", name, err)
			}
		}
	}
	return oauth
}
