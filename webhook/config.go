package webhook

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/webhook/inject"
)

// CertMode is who provides the webhook server's serving certificate.
type CertMode string

const (
	// CertModeOperator: the manager generates a CA and serving certificate itself
	// (open-policy-agent/cert-controller), stores them in Certs.SecretName, and injects the CA
	// into the webhook configurations. The Secret reaches Server.CertDir as Certs.Source says.
	// The chart's default.
	CertModeOperator CertMode = "operator"
	// CertModeExternal: something else issues the certificate (into Certs.SecretName, with
	// CertSourceSecret) or writes the files in Server.CertDir, and fills the CA bundles
	// (cert-manager with its CA injector, the chart's certManager.enabled; or envtest).
	CertModeExternal CertMode = "external"
)

// CertSource is where the manager's webhook server finds its certificate files.
type CertSource string

const (
	// CertSourceVolume: something else puts the files in Server.CertDir (a Secret volume,
	// refreshed by the kubelet on its next sync, or files written by hand). The default.
	CertSourceVolume CertSource = "volume"
	// CertSourceSecret: the manager watches Certs.SecretName in Certs.Namespace through the API
	// and writes its tls.crt, tls.key and ca.crt into Server.CertDir, which must be writable
	// (the chart: an in-memory emptyDir). The webhook server is ready as soon as the Secret
	// holds a pair, not on the kubelet's next sync; the CA's key is never written to disk.
	CertSourceSecret CertSource = "secret"
)

// Defaults of Config.
const (
	DefaultPort            = 9443
	DefaultCertDir         = "/var/run/actgate/webhook-certs"
	DefaultMutatingName    = "actgate-mutating-webhook-configuration"
	DefaultValidatingName  = "actgate-validating-webhook-configuration"
	DefaultServiceName     = "actgate-webhook-service"
	DefaultCertSecretName  = "actgate-webhook-server-cert"
	DefaultNamespaceAdmins = "system:masters"
)

// ErrConfig is matched by every configuration error.
var ErrConfig = errors.New("webhook: invalid configuration")

// Config is the admission webhooks' configuration: the manager reads it from a file (the
// chart's ConfigMap, mounted at /etc/actgate/webhook.yaml) with LoadConfig.
type Config struct {
	// Injection configures the sidecar and which namespaces are exempt or may opt out.
	Injection inject.Config `json:"injection"`
	// Authority names the files of the authority's CA bundle and public key(s) given to every
	// sidecar.
	Authority AuthorityTrust `json:"authority,omitempty"`
	// NamespaceAdminGroups may take a namespace out of governance: set actgate.io/inject to
	// anything but "true" on a namespace, or remove "true" (Gatekeeper's guarded exemption
	// label). Default [system:masters].
	NamespaceAdminGroups []string `json:"namespaceAdminGroups,omitempty"`
	// NamespaceAdminUsers may do the same, by user name (e.g. the GitOps controller's service
	// account).
	NamespaceAdminUsers []string `json:"namespaceAdminUsers,omitempty"`
	// ActgateUsers are the user names of actgate's own components (the chart: the manager's
	// service account, system:serviceaccount:<namespace>:actgate-manager), the only users that
	// may change what the injector added to a running pod: the sidecar and other injected
	// containers, the injected volumes, actgate.io/ labels and annotations (PodGuard). Matched
	// by user name only, never by group. Empty: nobody may (a pod gets a new sidecar by being
	// recreated).
	ActgateUsers []string `json:"actgateUsers,omitempty"`
	// Server is where the webhook server listens.
	Server ServerConfig `json:"server,omitempty"`
	// Certs says who provides its certificate.
	Certs CertConfig `json:"certs,omitempty"`
}

// ServerConfig is the webhook server's listener.
type ServerConfig struct {
	// Host to bind; empty binds all addresses.
	Host string `json:"host,omitempty"`
	// Port; default 9443.
	Port int `json:"port,omitempty"`
	// CertDir holds tls.crt and tls.key (CertName, KeyName); default
	// /var/run/actgate/webhook-certs.
	CertDir  string `json:"certDir,omitempty"`
	CertName string `json:"certName,omitempty"`
	KeyName  string `json:"keyName,omitempty"`
}

// CertConfig is the serving certificate's source.
type CertConfig struct {
	// Mode is operator (default) or external.
	Mode CertMode `json:"mode,omitempty"`
	// Source is volume (default) or secret: how the files reach Server.CertDir.
	Source CertSource `json:"source,omitempty"`
	// Namespace of the Secret, the Service and the manager; required in operator mode and
	// with source secret.
	Namespace string `json:"namespace,omitempty"`
	// SecretName is the Secret holding the CA and serving pair; default
	// actgate-webhook-server-cert.
	SecretName string `json:"secretName,omitempty"`
	// ServiceName is the webhook Service; the certificate is for <service>.<namespace>.svc.
	ServiceName string `json:"serviceName,omitempty"`
	// ExtraDNSNames are added to the certificate (e.g. the authority service's name when it
	// shares the certificate).
	ExtraDNSNames []string `json:"extraDNSNames,omitempty"`
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration are the objects whose
	// caBundle the operator keeps current.
	MutatingWebhookConfiguration   string `json:"mutatingWebhookConfiguration,omitempty"`
	ValidatingWebhookConfiguration string `json:"validatingWebhookConfiguration,omitempty"`
}

// Default returns a copy of c with defaults filled in.
func (c Config) Default() Config {
	c.Injection = c.Injection.Default()
	if c.NamespaceAdminGroups == nil {
		c.NamespaceAdminGroups = []string{DefaultNamespaceAdmins}
	}
	if c.Server.Port == 0 {
		c.Server.Port = DefaultPort
	}
	if c.Server.CertDir == "" {
		c.Server.CertDir = DefaultCertDir
	}
	if c.Server.CertName == "" {
		c.Server.CertName = "tls.crt"
	}
	if c.Server.KeyName == "" {
		c.Server.KeyName = "tls.key"
	}
	if c.Certs.Mode == "" {
		c.Certs.Mode = CertModeOperator
	}
	if c.Certs.Source == "" {
		c.Certs.Source = CertSourceVolume
	}
	if c.Certs.SecretName == "" {
		c.Certs.SecretName = DefaultCertSecretName
	}
	if c.Certs.ServiceName == "" {
		c.Certs.ServiceName = DefaultServiceName
	}
	if c.Certs.MutatingWebhookConfiguration == "" {
		c.Certs.MutatingWebhookConfiguration = DefaultMutatingName
	}
	if c.Certs.ValidatingWebhookConfiguration == "" {
		c.Certs.ValidatingWebhookConfiguration = DefaultValidatingName
	}
	return c
}

// Validate checks a defaulted Config.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Injection.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, u := range c.ActgateUsers {
		if u == "" || strings.HasPrefix(u, "system:serviceaccounts") || u == "system:anonymous" {
			errs = append(errs, fmt.Errorf("actgateUsers %q is not one user's name", u))
		}
	}
	if c.Server.Port < 1 || c.Server.Port > 65535 {
		errs = append(errs, fmt.Errorf("server.port %d is not a TCP port", c.Server.Port))
	}
	switch c.Certs.Mode {
	case CertModeExternal:
	case CertModeOperator:
		if c.Certs.Namespace == "" {
			errs = append(errs, errors.New("certs.namespace is required in operator mode"))
		}
	default:
		errs = append(errs, fmt.Errorf("certs.mode %q is neither %s nor %s", c.Certs.Mode, CertModeOperator, CertModeExternal))
	}
	switch c.Certs.Source {
	case CertSourceVolume:
	case CertSourceSecret:
		if c.Certs.Namespace == "" {
			errs = append(errs, errors.New("certs.namespace is required with certs.source secret"))
		}
	default:
		errs = append(errs, fmt.Errorf("certs.source %q is neither %s nor %s", c.Certs.Source, CertSourceVolume, CertSourceSecret))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// LoadConfig reads a Config from a YAML file strictly (unknown fields are errors), applies
// defaults and validates it.
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("webhook config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	c = c.Default()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
