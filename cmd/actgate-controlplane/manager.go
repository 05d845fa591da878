package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/fileutil"
	actmetrics "github.com/actgate/actgate/internal/metrics"
	reconclient "github.com/actgate/actgate/internal/reconcile"
	"github.com/actgate/actgate/webhook"
)

// managerSkipNameValidation turns off controller-runtime's check that a controller name is
// registered once per process (its metric names). One process runs one manager; the tests of
// this package start several, and set it.
var managerSkipNameValidation bool

// managerOptions are the flags of `actgate-controlplane manager`.
type managerOptions struct {
	kubeconfig              string
	metricsAddr             string
	probeAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	webhookConfig           string
	logVerbosity            int

	retention      time.Duration
	leaseGrace     time.Duration
	dispatcherGone time.Duration

	reconcileBackoff    time.Duration
	reconcileMaxBackoff time.Duration
	reconcileFreshness  time.Duration
	reconcileTimeout    time.Duration
	reconcileCAFile     string
	reconcileAllowHTTP  bool

	// Service accounts (namespace/name) granted their namespaced rights in governed namespaces.
	authoritySA, managerSA string

	notify notifyFlags // announcements of pending BindingMoments (manager_notify.go)
}

// leaderElectionID names the leader-election Lease (in --leader-election-namespace).
const leaderElectionID = "actgate-manager.actgate.io"

func newManagerCmd(s streams) *cobra.Command {
	var o managerOptions
	cmd := &cobra.Command{
		Use:   "manager [flags]",
		Short: "Run the controllers (and with --webhook-config the admission webhooks) against a cluster",
		Long: `Run actgate's Kubernetes manager until SIGINT or SIGTERM: the ToolPolicy controller
(compile, policy epoch, Accepted/Ready, Events), the Act controller (Settled condition,
authenticated reconciliation of INDETERMINATE outcomes, authority expiry, escalation expiry,
in-flight acts of pods that are gone held INDETERMINATE, retention), the authority Lease controller (expired unconsumed Leases) and the BindingMoment
controller (resolution and expiry); with --webhook-config, the admission webhooks too.

The cluster is the one --kubeconfig names, else $KUBECONFIG, the in-cluster service account
or ~/.kube/config. Prometheus metrics are served over plain HTTP on --metrics-bind-address
("0", the default, disables them): controller-runtime's, and actgate's binding-moment,
reconciliation and INDETERMINATE-Act series (docs/operations.md); /healthz and /readyz on
--health-probe-bind-address.

Reconciliation asks a server's declared reconciliation endpoint, never the tool, and moves an
act only on an answer MAC'd with the endpoint's response-mac-key (see internal/reconcile).
Its TLS certificate is verified with the ca.crt of the endpoint's Secret, else
--reconcile-ca-file, else the system roots.

Exit status: 0 after a clean shutdown; 1 (line MANAGER_FAILED) when the manager cannot start
or stops with an error; 2 (line USAGE) for bad flags or an unreadable file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runManager(ctx, o, s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "0", `address of the metrics endpoint, e.g. ":8443"; "0" disables it`)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "0" disables them`)
	f.BoolVar(&o.leaderElect, "leader-elect", false, "run the controllers in one replica at a time (leader election on a Lease)")
	f.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	f.StringVar(&o.webhookConfig, "webhook-config", "", "webhook configuration file (webhook.Config YAML); serves the admission webhooks when set")
	f.IntVar(&o.logVerbosity, "log-verbosity", 0, "log verbosity (0 is SRE-level information; higher is more)")
	f.DurationVar(&o.retention, "act-retention", controllers.DefaultRetention,
		"how long a settled Act (denied, EXECUTED, FAILED, EXPIRED) is kept before it is deleted, and an authority Lease after it was consumed or expired")
	f.DurationVar(&o.leaseGrace, "lease-expiry-grace", controllers.DefaultLeaseGrace,
		"how long past its expiry an unconsumed authority is declared expired (clock skew with sinks)")
	f.DurationVar(&o.dispatcherGone, "dispatcher-gone-grace", controllers.DefaultDispatcherGoneGrace,
		"how long an in-flight Act (authority consumed, no outcome) whose pod is gone must go unwritten before it is held INDETERMINATE")
	f.DurationVar(&o.reconcileBackoff, "reconcile-backoff", controllers.DefaultReconcileBackoff,
		"wait after the first reconciliation attempt of an INDETERMINATE act; doubles per attempt")
	f.DurationVar(&o.reconcileMaxBackoff, "reconcile-max-backoff", controllers.DefaultReconcileMaxBackoff, "longest wait between reconciliation attempts")
	f.DurationVar(&o.reconcileFreshness, "reconcile-freshness", controllers.DefaultReconcileFreshness,
		"how long after the provider observed it a reconciliation answer is accepted")
	f.DurationVar(&o.reconcileTimeout, "reconcile-timeout", reconclient.DefaultTimeout, "time limit of one reconciliation query")
	f.StringVar(&o.reconcileCAFile, "reconcile-ca-file", "", "PEM CA bundle for reconciliation endpoints whose Secret has no ca.crt (default: system roots)")
	f.BoolVar(&o.reconcileAllowHTTP, "reconcile-allow-http", false, "allow plain-http reconciliation endpoints (the bearer token travels in the clear; test backends only)")
	f.StringVar(&o.authoritySA, "authority-service-account", controllers.DefaultAuthorityServiceAccount,
		"namespace/name of the authority service's service account, granted its namespaced rights in each governed namespace")
	f.StringVar(&o.managerSA, "manager-service-account", controllers.DefaultManagerServiceAccount,
		"namespace/name of this manager's service account, granted its namespaced rights in each governed namespace")
	o.notify.register(f)
	return cmd
}

func (o managerOptions) validate() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--act-retention", o.retention}, {"--lease-expiry-grace", o.leaseGrace}, {"--dispatcher-gone-grace", o.dispatcherGone},
		{"--reconcile-backoff", o.reconcileBackoff}, {"--reconcile-max-backoff", o.reconcileMaxBackoff},
		{"--reconcile-freshness", o.reconcileFreshness}, {"--reconcile-timeout", o.reconcileTimeout},
	} {
		if d.v <= 0 {
			return usageError("%s must be positive, not %s", d.flag, d.v)
		}
	}
	if _, _, err := o.notify.options(); err != nil {
		return err
	}
	if o.reconcileMaxBackoff < o.reconcileBackoff {
		return usageError("--reconcile-max-backoff (%s) is shorter than --reconcile-backoff (%s)", o.reconcileMaxBackoff, o.reconcileBackoff)
	}
	return nil
}

func managerFailed(format string, args ...any) error {
	return fail("MANAGER_FAILED " + fmt.Sprintf(format, args...))
}

// runManager wires every controller (and the webhooks) in one place, kubebuilder style, and
// runs them until ctx ends.
func runManager(ctx context.Context, o managerOptions, s streams) error {
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(o.logVerbosity), textlogger.Output(s.err)))
	ctrl.SetLogger(log)

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	var roots *x509.CertPool
	if o.reconcileCAFile != "" {
		if roots, err = fileutil.ReadCertPool(o.reconcileCAFile, false); err != nil {
			return usageError("--reconcile-ca-file: %v", err)
		}
	}
	var webhookCfg *webhook.Config
	if o.webhookConfig != "" {
		c, err := webhook.LoadConfig(o.webhookConfig)
		if err != nil {
			return usageError("--webhook-config: %v", err)
		}
		webhookCfg = &c
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return managerFailed("scheme: %v", err)
		}
	}
	// Plain HTTP: metrics carry counts and durations, never digests or arguments. The
	// authenticated variant (controller-runtime's metrics filters) would pull k8s.io/apiserver,
	// gRPC and OpenTelemetry into the binary; restrict the port with a NetworkPolicy instead.
	metrics := metricsserver.Options{BindAddress: o.metricsAddr}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Only authority Leases are cached and watched, never anyone else's.
		Cache:      cache.Options{ByObject: controllers.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(managerSkipNameValidation)},
	})
	if err != nil {
		return managerFailed("new manager: %v", err)
	}

	realClock := clock.RealClock{}
	if err := controllers.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return managerFailed("%v", err)
	}
	// actgate's own series beside controller-runtime's, on its registry (docs/operations.md,
	// "Metrics and Events"): the cluster's binding moments, their resolutions by surface,
	// reconciliation results and INDETERMINATE Acts (counted from the cache at scrape time).
	reg := actmetrics.Replacing(ctrlmetrics.Registry)
	moments, err := actmetrics.NewMoments(reg)
	if err != nil {
		return managerFailed("metrics: %v", err)
	}
	resolutions, err := actmetrics.NewResolutions(reg)
	if err != nil {
		return managerFailed("metrics: %v", err)
	}
	results, err := actmetrics.NewReconciliation(reg)
	if err != nil {
		return managerFailed("metrics: %v", err)
	}
	if err := actmetrics.RegisterIndeterminate(reg, actmetrics.SourceActs, 5*time.Second, controllers.CountIndeterminateActs(mgr.GetClient())); err != nil {
		return managerFailed("metrics: %v", err)
	}
	if err := (&controllers.ToolPolicyReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("actgate-toolpolicy"),
		Clock:     realClock,
	}).SetupWithManager(mgr); err != nil {
		return managerFailed("ToolPolicy controller: %v", err)
	}
	if err := (&controllers.ActReconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Recorder:            mgr.GetEventRecorder("actgate-act"),
		Clock:               realClock,
		Retention:           o.retention,
		LeaseGrace:          o.leaseGrace,
		DispatcherGoneGrace: o.dispatcherGone,
		Reconciler:          &reconclient.Client{Timeout: o.reconcileTimeout, AllowHTTP: o.reconcileAllowHTTP},
		Backoff:             o.reconcileBackoff,
		MaxBackoff:          o.reconcileMaxBackoff,
		Freshness:           o.reconcileFreshness,
		RootCAs:             roots,
		Metrics:             results,
		Started:             time.Now(),
	}).SetupWithManager(mgr); err != nil {
		return managerFailed("Act controller: %v", err)
	}
	if err := (&controllers.AuthorityLeaseReconciler{
		Client:    mgr.GetClient(),
		Clock:     realClock,
		Retention: o.retention,
	}).SetupWithManager(mgr); err != nil {
		return managerFailed("authority Lease controller: %v", err)
	}
	access, err := controllers.NewNamespaceAccessReconciler(mgr.GetClient(), o.authoritySA, o.managerSA)
	if err != nil {
		return usageError("%v", err)
	}
	if err := access.SetupWithManager(mgr); err != nil {
		return managerFailed("namespace access controller: %v", err)
	}
	if err := (&controllers.BindingMomentReconciler{
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorder("actgate-bindingmoment"),
		Clock:       realClock,
		Metrics:     moments,
		Resolutions: resolutions,
	}).SetupWithManager(mgr); err != nil {
		return managerFailed("BindingMoment controller: %v", err)
	}
	if err := setupAnnouncer(mgr, o.notify, realClock, reg, log); err != nil {
		return err
	}
	if webhookCfg != nil {
		if err := webhook.SetupWithManager(mgr, *webhookCfg); err != nil {
			return managerFailed("webhooks: %v", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return managerFailed("health check: %v", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return managerFailed("readiness check: %v", err)
	}

	log.Info("Starting manager", "leaderElection", o.leaderElect, "webhooks", webhookCfg != nil,
		"actRetention", o.retention, "reconcileBackoff", o.reconcileBackoff, "reconcileFreshness", o.reconcileFreshness)
	if err := mgr.Start(ctx); err != nil {
		return managerFailed("%v", err)
	}
	return nil
}

// restConfig loads the cluster configuration: the named kubeconfig file, or controller-runtime's
// default chain ($KUBECONFIG, in-cluster, ~/.kube/config).
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrlconfig.GetConfig()
}
