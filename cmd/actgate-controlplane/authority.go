package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/internal/tracing"
)

// authorityOptions are the flags of `actgate-controlplane authority`.
type authorityOptions struct {
	kubeconfig     string
	bindAddress    string
	metricsAddress string
	certFile       string
	keyFile        string
	signingKey     string
	audiences      []string
	reviewTimeout  time.Duration
	storeTimeout   time.Duration
	momentTTL      time.Duration
	tokenTTL       time.Duration
	qps            float32
	// tracingEndpoint and tracingRatio configure OTLP/HTTP traces (internal/tracing).
	tracingEndpoint string
	tracingRatio    float64
	burst           int
	shutdownGrace   time.Duration
	verbosity       int
}

func newAuthorityCmd(s streams) *cobra.Command {
	o := authorityOptions{}
	cmd := &cobra.Command{
		Use:   "authority --tls-cert-file FILE --tls-private-key-file FILE --signing-key-file FILE",
		Short: "Serve ActReviews to sidecars: policy, single-use authority as Leases, consume",
		Long: `Run the authority service of a Kubernetes installation. Enforcing sidecars POST
ActReviews (review.actgate.io/v1alpha1) to ` + review.Path + ` over TLS, authenticated by their
pod's service-account token (TokenReview, audience --audience): a Review asks for a decision on
a candidate act under the ToolPolicy that governs the caller's pod, and gets an allow, a signed
single-use authority (held as a Lease in the agent's namespace), a deny with its EF code, or an
escalation to a BindingMoment; a Consume spends an authority by compare-and-swap on its Lease,
right before the sidecar invokes. A Permit, a machine-permitted call in one request, creates
the Act carrying its authority already consumed (the create is the compare-and-swap; no
Lease). The service records an Act for every reviewed call.
Sidecars GET ` + review.PolicyPath + ` (with ?watch=true, a long poll) for the ToolPolicy that
governs their pod, found by the same rule, and POST ` + review.AnchorPath + ` their receipt log's
newest signed checkpoint, which the service verifies and records in the pod's ReceiptAnchor
(named by the pod's UID; the key is set once, the seq only rises). ToolPolicies, Pods and BindingMoments are read from informers;
TokenReview answers are reused for --token-review-cache-ttl.

Fail closed: an API server that is slow or unreachable is a deny with EF_060, never an allow.

The TLS certificate and key are reloaded when their files change (the operator's
cert-controller rotates them). The signing key is a PEM private key (Ed25519 or ECDSA P-256,
PKCS#8 or SEC 1), typically mounted from a Secret; sidecars verify authorities with its public
key. Metrics (actgate_authority_*) and /healthz, /readyz are served in plain HTTP on
--metrics-bind-address ("0" disables). The Kubernetes connection comes from --kubeconfig,
$KUBECONFIG or ~/.kube/config, or the in-cluster service account.

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 when it cannot start or serve
(the stderr line begins with AUTHORITY_CONFIG or AUTHORITY_SERVE), 2 usage (including an
unreadable kubeconfig).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runAuthority(ctx, o, s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&o.bindAddress, "bind-address", ":8443", "HTTPS address of the review endpoint")
	f.StringVar(&o.metricsAddress, "metrics-bind-address", ":8080", `HTTP address of /metrics, /healthz and /readyz ("0" disables)`)
	f.StringVar(&o.certFile, "tls-cert-file", "", "PEM certificate (chain) of the review endpoint")
	f.StringVar(&o.keyFile, "tls-private-key-file", "", "PEM private key of the review endpoint")
	f.StringVar(&o.signingKey, "signing-key-file", "", "PEM private key that signs authorities (Ed25519 or ECDSA P-256)")
	f.StringSliceVar(&o.audiences, "audience", []string{service.DefaultAudience}, "token audiences accepted from sidecars")
	f.DurationVar(&o.reviewTimeout, "review-timeout", service.DefaultReviewTimeout, "deadline of one review, API calls included (past it: EF_060)")
	f.DurationVar(&o.storeTimeout, "store-timeout", leasestore.DefaultTimeout, "deadline of one Lease operation")
	f.DurationVar(&o.momentTTL, "binding-moment-ttl", service.DefaultMomentTTL, "how long a binding moment awaits its principals")
	f.DurationVar(&o.tokenTTL, "token-review-cache-ttl", service.DefaultTokenReviewTTL,
		"how long an authenticated TokenReview is reused, by token hash (refusals: at most 1s); 0 disables the cache")
	f.Float32Var(&o.qps, "kube-api-qps", 200, "client-side rate limit towards the API server (queries per second)")
	f.IntVar(&o.burst, "kube-api-burst", 400, "client-side burst towards the API server")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "how long in-flight reviews may finish after SIGTERM")
	f.IntVar(&o.verbosity, "v", 0, "log verbosity (JSON lines on stderr; 1 logs every deny)")
	f.StringVar(&o.tracingEndpoint, "tracing-endpoint", "", "OTLP/HTTP traces URL, e.g. http://otel-collector.observability:4318/v1/traces; empty disables tracing")
	f.Float64Var(&o.tracingRatio, "tracing-sample-ratio", tracing.DefaultSampleRatio,
		"fraction of new traces recorded, in [0, 1]; a sampled traceparent from a sidecar is always followed")
	for _, name := range []string{"tls-cert-file", "tls-private-key-file", "signing-key-file"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// configFailure and serveFailure end the command with status 1 and a coded line.
func configFailure(format string, args ...any) error {
	return fail("AUTHORITY_CONFIG " + fmt.Sprintf(format, args...))
}

func serveFailure(format string, args ...any) error {
	return fail("AUTHORITY_SERVE " + fmt.Sprintf(format, args...))
}

func runAuthority(ctx context.Context, o authorityOptions, s streams) error {
	if o.reviewTimeout <= 0 || o.storeTimeout <= 0 || o.momentTTL <= 0 || o.shutdownGrace < 0 || o.tokenTTL < 0 {
		return usageError("--review-timeout, --store-timeout and --binding-moment-ttl must be positive, --token-review-cache-ttl not negative")
	}
	tcfg := tracing.Config{Endpoint: o.tracingEndpoint, SampleRatio: o.tracingRatio, ServiceName: "actgate-authority"}
	if err := tcfg.Validate(); err != nil {
		return usageError("--tracing-endpoint, --tracing-sample-ratio: %v", err)
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(s.err, obj) }, funcr.Options{Verbosity: o.verbosity, LogTimestamp: true})
	ctrllog.SetLogger(log) // controller-runtime's certwatcher logs through it

	signer, err := authority.LoadKey(o.signingKey)
	if err != nil {
		return configFailure("signing key: %v", err)
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "actgate-authority"
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return configFailure("scheme: %v", err)
		}
	}
	// Direct: TokenReviews, Acts, BindingMoment writes and misses of the cache below
	// (docs/architecture.md "Authority").
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return configFailure("client: %v", err)
	}
	// ToolPolicies, Pods and BindingMoments are read from informers, which also wake the
	// policy watchers.
	cache, err := service.NewCache(cfg, scheme, log.WithName("cache"))
	if err != nil {
		return configFailure("%v", err)
	}
	store, err := leasestore.NewForConfig(cfg, leasestore.Options{Verifier: signer.Verifier(), Timeout: o.storeTimeout})
	if err != nil {
		return configFailure("lease store: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := service.NewMetrics(reg)
	if err != nil {
		return configFailure("metrics: %v", err)
	}
	tp, shutdownTracing, err := tracing.Setup(tcfg)
	if err != nil {
		return configFailure("tracing: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracing.DefaultExportTimeout)
		defer cancel()
		_ = shutdownTracing(ctx)
	}()
	tokenTTL := o.tokenTTL
	if tokenTTL == 0 {
		tokenTTL = -1 // the flag's 0 is "off"; Options' 0 is the default
	}
	svc, err := service.New(service.Options{
		Client: c, Cache: cache, TokenReviewTTL: tokenTTL, Store: store, Signer: signer, Audiences: o.audiences, ReviewTimeout: o.reviewTimeout,
		MomentTTL: o.momentTTL, Metrics: metrics, Log: log.WithName("authority"), TracerProvider: tp,
	})
	if err != nil {
		return configFailure("%v", err)
	}
	certs, err := certwatcher.New(o.certFile, o.keyFile)
	if err != nil {
		return configFailure("TLS certificate: %v", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := cache.Start(ctx); err != nil {
		return serveFailure("%v", err)
	}
	errs := make(chan error, 3)
	go func() {
		if err := certs.Start(ctx); err != nil {
			errs <- serveFailure("watching the TLS certificate: %v", err)
		}
	}()

	mux := http.NewServeMux()
	mux.Handle(review.Path, svc)
	mux.Handle(review.PolicyPath, svc.PolicyHandler())
	mux.Handle(review.AnchorPath, svc.AnchorHandler())
	mux.Handle(review.ToolPinPath, svc.ToolPinHandler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      o.reviewTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          stdlog.New(logWriter{log.WithName("https")}, "", 0),
	}
	ln, err := net.Listen("tcp", o.bindAddress)
	if err != nil {
		return serveFailure("listening on %s: %v", o.bindAddress, err)
	}
	servers := []*http.Server{srv}
	go func() { errs <- serveErr(srv.ServeTLS(ln, "", "")) }()
	log.Info("serving ActReviews", "address", ln.Addr().String(), "path", review.Path, "keyID", signer.KeyID(), "audiences", o.audiences)

	if o.metricsAddress != "0" && o.metricsAddress != "" {
		mln, err := net.Listen("tcp", o.metricsAddress)
		if err != nil {
			_ = srv.Close()
			return serveFailure("listening on %s: %v", o.metricsAddress, err)
		}
		mmux := http.NewServeMux()
		mmux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
		mmux.HandleFunc("/healthz", ok)
		mmux.HandleFunc("/readyz", ok)
		msrv := &http.Server{Handler: mmux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, msrv)
		go func() { errs <- serveErr(msrv.Serve(mln)) }()
		log.Info("serving metrics", "address", mln.Addr().String())
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	log.Info("shutting down")
	shutdown, done := context.WithTimeout(context.Background(), o.shutdownGrace)
	defer done()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return runErr
}

// logWriter sends the HTTP server's own messages (TLS handshake failures…) to the log.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(1).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

// serveErr turns the end of Serve into a command error; a shutdown is not one.
func serveErr(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return serveFailure("%v", err)
}
