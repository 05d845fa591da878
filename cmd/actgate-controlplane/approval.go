package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/internal/approval"
)

// approvalOptions are the flags of `actgate-controlplane approval`.
type approvalOptions struct {
	kubeconfig       string
	listen           string
	externalURL      string
	issuer           string
	clientID         string
	clientSecretFile string
	issuerCAFile     string
	namespaces       []string
	sessionLifetime  time.Duration
	stepUpMaxAge     time.Duration
	stepUpClasses    []string
	maxSessions      int
	certFile         string
	keyFile          string
	shutdownGrace    time.Duration
	verbosity        int
}

func newApprovalCmd(s streams) *cobra.Command {
	o := approvalOptions{}
	cmd := &cobra.Command{
		Use:   "approval --external-url URL --oidc-issuer URL --oidc-client-id ID --namespaces NS[,NS]",
		Short: "Serve the binding-moment page to principals who sign in with OpenID Connect",
		Long: `Run the approval service: the binding-moment page of kubectl actgate console, served over
the network to the principals who sign in with OpenID Connect (Authorization Code + PKCE) at
--oidc-issuer, listing the BindingMoments of --namespaces addressed to the signed-in person and
resolving them with one of the four resolutions of envelope-04 §7.3.

The service holds no authority over BindingMoments: every read and every resolution is made
with the person's own ID token as the bearer token to the kube-apiserver, which must trust the
same issuer with the service's client id among its audiences (structured authentication
configuration); RBAC and the BindingMoment admission webhook judge the person. Its
ServiceAccount needs no RBAC on actgate.io. Resolving a FINANCIAL, PHYSICAL or NETWORK_CONTROL
moment (--step-up-classes) needs a sign-in no older than --step-up-max-age.

TLS usually ends at the Ingress or Gateway; --tls-cert-file and --tls-key-file serve HTTPS
directly. /healthz and /readyz (the provider's discovery document read) answer on --listen.
The API server's address and CA come from --kubeconfig, $KUBECONFIG or ~/.kube/config, or the
in-cluster configuration; any credential there is ignored.

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 when it cannot start or serve
(the stderr line begins with APPROVAL_CONFIG or APPROVAL_SERVE), 2 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runApproval(ctx, o, s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig whose API server address and CA are used, never its credentials (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&o.listen, "listen", ":8080", "address to serve on")
	f.StringVar(&o.externalURL, "external-url", "", "the service's URL as browsers reach it (https://HOST[:PORT]); every request's Host and every POST's Origin must match it")
	f.StringVar(&o.issuer, "oidc-issuer", "", "OpenID Connect issuer URL (the kube-apiserver must trust the same issuer)")
	f.StringVar(&o.clientID, "oidc-client-id", "", "the service's OpenID Connect client id (the ID token audience the kube-apiserver accepts)")
	f.StringVar(&o.clientSecretFile, "oidc-client-secret-file", "", "file holding the client secret (none: a public client, PKCE only)")
	f.StringVar(&o.issuerCAFile, "oidc-ca-file", "", "PEM CA bundle trusted for the issuer (default: the system's)")
	f.StringSliceVar(&o.namespaces, "namespaces", nil, "namespaces whose BindingMoments are served (comma-separated; required)")
	f.DurationVar(&o.sessionLifetime, "session-lifetime", approval.DefaultSessionLifetime, "how long a sign-in lasts (never beyond the ID token's expiry)")
	f.DurationVar(&o.stepUpMaxAge, "step-up-max-age", approval.DefaultStepUpMaxAge, "the oldest authentication that may resolve a moment of --step-up-classes")
	f.StringSliceVar(&o.stepUpClasses, "step-up-classes", approval.DefaultStepUpClasses, "consequence classes whose moments need a fresh authentication")
	f.IntVar(&o.maxSessions, "max-sessions", approval.DefaultMaxSessions, "how many sessions the service holds at most")
	f.StringVar(&o.certFile, "tls-cert-file", "", "PEM certificate (chain) to serve HTTPS with (optional)")
	f.StringVar(&o.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "how long in-flight requests may finish after SIGTERM")
	f.IntVar(&o.verbosity, "v", 0, "log verbosity (JSON lines on stderr)")
	for _, name := range []string{"external-url", "oidc-issuer", "oidc-client-id", "namespaces"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func approvalFailure(kind, format string, args ...any) error {
	return fail(kind + " " + fmt.Sprintf(format, args...))
}

func runApproval(ctx context.Context, o approvalOptions, s streams) error {
	if (o.certFile == "") != (o.keyFile == "") {
		return usageError("--tls-cert-file and --tls-key-file go together")
	}
	if o.sessionLifetime <= 0 || o.stepUpMaxAge <= 0 || o.maxSessions <= 0 || o.shutdownGrace < 0 {
		return usageError("--session-lifetime, --step-up-max-age and --max-sessions must be positive")
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(s.err, obj) }, funcr.Options{Verbosity: o.verbosity, LogTimestamp: true})
	ctrllog.SetLogger(log)
	secret := ""
	if o.clientSecretFile != "" {
		b, err := os.ReadFile(o.clientSecretFile)
		if err != nil {
			return approvalFailure("APPROVAL_CONFIG", "client secret: %v", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	issuerClient := &http.Client{Timeout: 30 * time.Second}
	if o.issuerCAFile != "" {
		pem, err := os.ReadFile(o.issuerCAFile)
		if err != nil {
			return approvalFailure("APPROVAL_CONFIG", "issuer CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return approvalFailure("APPROVAL_CONFIG", "issuer CA: %s holds no PEM certificate", o.issuerCAFile)
		}
		issuerClient.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	kube, err := restConfig(o.kubeconfig)
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	svc, err := approval.New(approval.Options{
		ExternalURL: o.externalURL, Issuer: o.issuer, ClientID: o.clientID, ClientSecret: secret, IssuerClient: issuerClient,
		Kube: kube, Namespaces: o.namespaces, SessionLifetime: o.sessionLifetime, StepUpMaxAge: o.stepUpMaxAge,
		StepUpClasses: o.stepUpClasses, MaxSessions: o.maxSessions, Log: log.WithName("approval"),
	})
	if err != nil {
		return usageError("%v", err)
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: stdlog.New(logWriter{log.WithName("http")}, "", 0)}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return approvalFailure("APPROVAL_SERVE", "listening on %s: %v", o.listen, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	if o.certFile != "" {
		certs, err := certwatcher.New(o.certFile, o.keyFile)
		if err != nil {
			_ = ln.Close()
			return approvalFailure("APPROVAL_CONFIG", "TLS certificate: %v", err)
		}
		go func() {
			if err := certs.Start(ctx); err != nil {
				errs <- approvalFailure("APPROVAL_SERVE", "watching the TLS certificate: %v", err)
			}
		}()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
		go func() { errs <- approvalServeErr(srv.ServeTLS(ln, "", "")) }()
	} else {
		go func() { errs <- approvalServeErr(srv.Serve(ln)) }()
	}
	log.Info("serving the approval service", "address", ln.Addr().String(), "externalURL", o.externalURL, "issuer", o.issuer,
		"namespaces", o.namespaces, "tls", o.certFile != "")
	go func() {
		// Read the provider's discovery document early, so /readyz turns ready without a visitor.
		for ctx.Err() == nil {
			if err := svc.Ready(ctx); err == nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	log.Info("shutting down")
	shutdown, done := context.WithTimeout(context.Background(), o.shutdownGrace)
	defer done()
	_ = srv.Shutdown(shutdown)
	return runErr
}

func approvalServeErr(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return approvalFailure("APPROVAL_SERVE", "%v", err)
}
