package webhook

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Paths the handlers are served on; config/webhook and the chart point the webhook
// configurations at them.
const (
	PathPod           = "/mutate-v1-pod"
	PathToolPolicy    = "/validate-actgate-io-v1alpha1-toolpolicy"
	PathBindingMoment = "/validate-actgate-io-v1alpha1-bindingmoment"
	PathNamespace     = "/validate-v1-namespace"
	PathPodGuard      = "/validate-v1-pod"
)

// The webhook configurations, as controller-gen markers (make manifests writes
// config/webhook/manifests.yaml from them; config/webhook/selectors_patch.yaml adds the
// namespace and object selectors controller-gen cannot express, and the chart renders the same).
// Every webhook fails closed (failurePolicy Fail).
//
// +kubebuilder:webhookconfiguration:mutating=true,name=actgate-mutating-webhook-configuration
// +kubebuilder:webhookconfiguration:mutating=false,name=actgate-validating-webhook-configuration
//
// Pods of governed namespaces (actgate.io/inject: "true"):
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=pods.inject.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=10
// Pods that opt in (label actgate.io/inject: "true") in other namespaces:
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=optin.pods.inject.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=10
// Ephemeral containers (kubectl debug) everywhere but exempt namespaces:
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods/ephemeralcontainers,verbs=update,versions=v1,name=ephemeral.pods.inject.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,timeoutSeconds=10
//
// Updates of pods (and their in-place resize) in governed namespaces and of opted-in pods: only
// actgate changes what the injector added (PodGuard). Selected like the injection webhooks; the
// opt-in one's objectSelector matches the old or the new pod, so removing the label is seen:
// +kubebuilder:webhook:path=/validate-v1-pod,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=pods;pods/resize,verbs=update,versions=v1,name=pods.guard.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-v1-pod,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=pods;pods/resize,verbs=update,versions=v1,name=optin.pods.guard.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,timeoutSeconds=10
//
// +kubebuilder:webhook:path=/validate-actgate-io-v1alpha1-toolpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=actgate.io,resources=toolpolicies,verbs=create;update,versions=v1alpha1,name=toolpolicies.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-actgate-io-v1alpha1-bindingmoment,mutating=false,failurePolicy=fail,sideEffects=None,groups=actgate.io,resources=bindingmoments;bindingmoments/status,verbs=create;update,versions=v1alpha1,name=bindingmoments.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-v1-namespace,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=namespaces,verbs=create;update,versions=v1,name=namespaces.actgate.io,serviceName=actgate-webhook-service,serviceNamespace=actgate-system,admissionReviewVersions=v1,timeoutSeconds=10
//
// What the handlers read (uncached): namespaces, policies, Acts and Secret metadata; Events
// for skipped pods. Operator-mode certificates need the webhook
// configurations (the Secret's Role is namespaced, in config/webhook and the chart).
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=toolpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=actgate.io,resources=acts,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=update,resourceNames=actgate-mutating-webhook-configuration;actgate-validating-webhook-configuration

// Options adjusts SetupWithManager for tests.
type Options struct {
	// Now is the clock of BindingMoment expiry; default time.Now.
	Now func() time.Time
}

// SetupWithManager registers actgate's admission webhooks with mgr on a webhook server of their
// own (cfg.Server; added to mgr as a runnable, with a readiness check named
// "actgate-webhook"), with CertSourceSecret the watch that writes the certificate Secret into
// cfg.Server.CertDir, and in CertModeOperator the certificate rotator. cfg must be defaulted
// (Config.Default); it is validated here. mgr's scheme must hold client-go's types and
// actgate's v1alpha1. `actgate-controlplane manager` calls it once:
//
//	cfg, err := webhook.LoadConfig("/etc/actgate/webhook.yaml")
//	...
//	if err := webhook.SetupWithManager(mgr, cfg); err != nil { ... }
func SetupWithManager(mgr manager.Manager, cfg Config, opts ...Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	o := Options{Now: time.Now}
	for _, opt := range opts {
		if opt.Now != nil {
			o.Now = opt.Now
		}
	}
	injection := cfg.Injection

	loader := newCertLoader(cfg.Server.CertDir, cfg.Server.CertName, cfg.Server.KeyName)
	server := crwebhook.NewServer(crwebhook.Options{
		Host: cfg.Server.Host, Port: cfg.Server.Port, CertDir: cfg.Server.CertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = loader.GetCertificate
			c.MinVersion = tls.VersionTLS12
		}},
	})
	log := ctrl.Log.WithName("webhook")
	scheme := mgr.GetScheme()

	// Every handler reads through the API reader, not the cache: a decision about governance
	// must not be made on a policy or namespace label the cache has not seen yet (a pod
	// created right after its ToolPolicy is injected). It costs one GET and one LIST per pod
	// created in a governed namespace.
	server.Register(PathPod, &admission.Webhook{Handler: &PodInjector{
		Reader: mgr.GetAPIReader(), Config: &injection, Trust: cfg.Authority, Log: log.WithName("pod"),
		Recorder: mgr.GetEventRecorder("actgate-injector"),
	}})
	server.Register(PathToolPolicy, admission.WithValidator[*v1alpha1.ToolPolicy](scheme, &ToolPolicyValidator{
		Reader: mgr.GetAPIReader(), APIReader: mgr.GetAPIReader(),
	}))
	server.Register(PathBindingMoment, admission.WithValidator[*v1alpha1.BindingMoment](scheme, &BindingMomentValidator{
		APIReader: mgr.GetAPIReader(), Now: o.Now,
	}))
	server.Register(PathPodGuard, &admission.Webhook{Handler: &PodGuard{
		Reader: mgr.GetAPIReader(), ActgateUsers: cfg.ActgateUsers, Log: log.WithName("podguard"),
	}})
	server.Register(PathNamespace, admission.WithValidator[*corev1.Namespace](scheme, &NamespaceGuard{
		AdminGroups: cfg.NamespaceAdminGroups, AdminUsers: cfg.NamespaceAdminUsers,
	}))
	if err := mgr.Add(server); err != nil {
		return fmt.Errorf("webhook: add server: %w", err)
	}
	if err := mgr.AddReadyzCheck("actgate-webhook", loader.Check); err != nil {
		return fmt.Errorf("webhook: readiness check: %w", err)
	}

	if cfg.Certs.Source == CertSourceSecret {
		cs, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return fmt.Errorf("webhook: certificate Secret client: %w", err)
		}
		if err := mgr.Add(newSecretSync(cs, cfg, log.WithName("certs"))); err != nil {
			return fmt.Errorf("webhook: certificate Secret watch: %w", err)
		}
	}

	if cfg.Certs.Mode != CertModeOperator {
		return nil
	}
	svc := cfg.Certs.ServiceName + "." + cfg.Certs.Namespace + ".svc"
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: cfg.Certs.Namespace, Name: cfg.Certs.SecretName},
		CertDir:        cfg.Server.CertDir,
		CertName:       cfg.Server.CertName,
		KeyName:        cfg.Server.KeyName,
		CAName:         "actgate-webhook-ca",
		CAOrganization: "actgate",
		DNSName:        svc,
		ExtraDNSNames:  append([]string{svc + ".cluster.local"}, cfg.Certs.ExtraDNSNames...),
		IsReady:        make(chan struct{}),
		Webhooks: []rotator.WebhookInfo{
			{Name: cfg.Certs.MutatingWebhookConfiguration, Type: rotator.Mutating},
			{Name: cfg.Certs.ValidatingWebhookConfiguration, Type: rotator.Validating},
		},
		// Every replica keeps its own mounted copy current; the rotator only rewrites the
		// Secret when it is missing or near expiry, so replicas agree.
		RequireLeaderElection: false,
	}); err != nil {
		return fmt.Errorf("webhook: certificate rotator: %w", err)
	}
	return nil
}
