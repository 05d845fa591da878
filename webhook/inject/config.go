package inject

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names the injector uses on pods. They are part of actgate's contract with users and with the
// sidecar (`actgate sidecar`), so they never change silently.
const (
	// LabelInject opts a namespace or pod in ("true") or out ("false"). On a pod it may also be
	// an annotation; the label beats the annotation.
	LabelInject = "actgate.io/inject"
	// AnnotationStatus records what the injector did (Status, JSON) so a later injection can
	// undo it first (idempotent re-injection) and operators can see it.
	AnnotationStatus = "actgate.io/status"
	// AnnotationAdmitted is set on every pod the injector admits at creation: "injected", or
	// "skipped: REASON" for a pod it leaves without a sidecar. The ValidatingAdmissionPolicy
	// the chart keeps after an uninstall refuses pods without it in governed namespaces, so a
	// namespace labelled for injection fails closed when the injector is gone
	// (docs/operations.md "Uninstalling"). The injector always overwrites it.
	AnnotationAdmitted = "actgate.io/admitted"
	// AdmittedInjected is AnnotationAdmitted's value on an injected pod.
	AdmittedInjected = "injected"

	// SidecarBinary is the actgate binary in the sidecar image (its entrypoint): the startup
	// and readiness probes run `SidecarBinary sidecar probe` in the container.
	SidecarBinary = "/usr/local/bin/actgate"
	// SidecarName is the injected container's name. A container of this name already in the
	// pod is removed before injecting: only the injector's sidecar may have it.
	SidecarName = "actgate-sidecar"
	// VolumeToken is the projected service-account token the sidecar presents to the authority
	// service (audience Config.AuthorityAudience).
	VolumeToken = "actgate-token"
	// VolumeCredentials holds the upstream credentials named by the policies' servers, one file
	// per server at <server>/credential.
	VolumeCredentials = "actgate-credentials"

	// TokenDir is where VolumeToken is mounted; the token is TokenDir/token.
	TokenDir = "/var/run/secrets/actgate.io/token"
	// CredentialsDir is where VolumeCredentials is mounted.
	CredentialsDir = "/var/run/secrets/actgate.io/credentials"
	// MovedDir is where the sidecar mounts credential volumes taken from agent containers,
	// one folder per volume name.
	MovedDir = "/var/run/secrets/actgate.io/moved"

	// VolumeUpstreamCA is the CA bundle the sidecar trusts for https upstreams
	// (Config.UpstreamCA), mounted into the sidecar only at UpstreamCADir; the file is
	// UpstreamCAFile, named by ACTGATE_UPSTREAM_CA_FILE (`actgate sidecar --upstream-ca-file`).
	VolumeUpstreamCA = "actgate-upstream-ca"
	UpstreamCADir    = "/var/run/actgate/upstream-ca"
	UpstreamCAFile   = UpstreamCADir + "/ca.crt"

	// VolumeJournal is the sidecar's dispatch journal (an emptyDir: its root filesystem is
	// read-only), mounted at JournalDir.
	VolumeJournal = "actgate-journal"
	JournalDir    = "/var/run/actgate/journal"

	// AnnotationAuthorityCA and AnnotationAuthorityPublicKey are reserved: Strip removes them
	// from every pod it injects. The sidecar's trust anchors (the authority's CA bundle and
	// public keys) are never taken from pod metadata, which the pod's owner can rewrite on a
	// running pod: they are the sidecar container's own environment (ACTGATE_AUTHORITY_CA,
	// ACTGATE_AUTHORITY_PUBLIC_KEY), fixed when the pod is created.
	AnnotationAuthorityCA        = "actgate.io/authority-ca"
	AnnotationAuthorityPublicKey = "actgate.io/authority-public-key"

	// MetricsPortName names the sidecar's metrics port (a PodMonitor selects it by this name).
	// A port name has at most 15 characters; this one has 15.
	MetricsPortName = "actgate-metrics"
	// MetricsPath is where the sidecar serves Prometheus metrics (cmd/actgate sidecar.go).
	MetricsPath = "/metrics"
	// The conventional scrape annotations read by Prometheus's `kubernetes-pods` job (the
	// example configuration shipped with Prometheus and the prometheus-community chart). The
	// injector sets them only on a pod that has no prometheus.io/ annotation of its own
	// (PrometheusAnnotationPrefix); a pod's own scrape configuration is never changed.
	AnnotationPrometheusScrape = "prometheus.io/scrape"
	AnnotationPrometheusPort   = "prometheus.io/port"
	AnnotationPrometheusPath   = "prometheus.io/path"
	PrometheusAnnotationPrefix = "prometheus.io/"

	// ServerURLEnvPrefix starts the per-server variable every agent container gets:
	// ACTGATE_MCP_URL_<SERVER> (server name upper-cased, "-" → "_") = the sidecar's URL for
	// that server.
	ServerURLEnvPrefix = "ACTGATE_MCP_URL_"
)

// Defaults of Config.
const (
	DefaultPort                   = 15080
	DefaultAuthorityAudience      = "actgate-authority"
	DefaultTokenExpirationSeconds = 3600
	DefaultRunAsUser              = 65532
	DefaultURLEnv                 = "MCP_SERVER_URL"
	DefaultMetricsPort            = 9788
)

// ErrConfig is matched (errors.Is) by every error Validate returns.
var ErrConfig = errors.New("inject: invalid configuration")

// Config is how the injector builds the sidecar, and which namespaces it leaves alone.
type Config struct {
	// Image is the actgate image the sidecar runs (`actgate sidecar`). Required.
	Image string `json:"image"`
	// ImagePullPolicy of the sidecar; default IfNotPresent.
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Port is the loopback port the sidecar listens on (127.0.0.1 only); default 15080. A pod
	// that declares this port on a container is refused.
	Port int32 `json:"port,omitempty"`
	// MetricsPort is the port on which the sidecar serves Prometheus metrics at /metrics
	// (`actgate sidecar --metrics-bind-address`, set as ACTGATE_METRICS_BIND_ADDRESS=:PORT), on
	// every address of the pod so Prometheus can reach it; declared as the container port
	// actgate-metrics. Absent: 9788; 0: the sidecar serves no metrics and gets no port or
	// scrape annotations. It must differ from Port: the metrics listener binds all addresses,
	// 127.0.0.1 included. A pod that declares this port on a container is refused. The
	// endpoint carries counts, durations and bounded labels only (internal/metrics), never
	// digests or arguments.
	MetricsPort *int32 `json:"metricsPort,omitempty"`
	// AuthorityURL is the authority service's base URL the sidecar asks (https://…). Required.
	AuthorityURL string `json:"authorityURL"`
	// AuthorityAudience is the audience of the projected service-account token the sidecar
	// presents to the authority service; default actgate-authority.
	AuthorityAudience string `json:"authorityAudience,omitempty"`
	// TokenExpirationSeconds of that token; default 3600, at least 600 (the API server's floor).
	TokenExpirationSeconds int64 `json:"tokenExpirationSeconds,omitempty"`
	// RunAsUser is the sidecar's UID, distinct from typical agent UIDs so that even a shared
	// process namespace would not expose its files; default 65532.
	RunAsUser int64 `json:"runAsUser,omitempty"`
	// URLEnv are the names of environment variables agents read their MCP server URL from;
	// default [MCP_SERVER_URL]. In an agent container such a variable is pointed at the sidecar:
	// when the pod has one protected server always (added if absent); with several, when its
	// value is one server's URL.
	URLEnv []string `json:"urlEnv,omitempty"`
	// Resources of the sidecar container.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ExemptNamespaces are never injected (the chart's webhook.exemptNamespaces; the webhook
	// configurations' namespaceSelector excludes them too).
	ExemptNamespaces []string `json:"exemptNamespaces,omitempty"`
	// OptOutNamespaces are the only namespaces where a pod's actgate.io/inject: "false" is
	// honoured; elsewhere it is ignored (ReasonOptOutIgnored).
	OptOutNamespaces []string `json:"optOutNamespaces,omitempty"`
	// Template overrides the built-in sidecar template (DefaultTemplate), a text/template
	// rendering a YAML Pod fragment; see TemplateData.
	Template string `json:"template,omitempty"`

	// UpstreamCA, when set, is a PEM CA bundle the sidecar trusts for https upstreams beside
	// the system roots (a private CA of an upstream MCP server): a key of a ConfigMap or a
	// Secret in the pod's namespace, so it must exist in every governed namespace (e.g.
	// distributed by trust-manager). It is mounted read-only into the sidecar only. A pod whose
	// namespace lacks it does not start (the kubelet cannot mount the volume): its sidecar could
	// not verify the upstream anyway. Absent: the system roots only.
	UpstreamCA *UpstreamCA `json:"upstreamCA,omitempty"`

	// Tracing, when its endpoint is set, makes the sidecar export OpenTelemetry traces over
	// OTLP/HTTP (ACTGATE_TRACING_ENDPOINT, ACTGATE_TRACING_SAMPLE_RATIO; docs/operations.md
	// "Tracing"). Absent: tracing off.
	Tracing *Tracing `json:"tracing,omitempty"`

	// AuthorityCA is the PEM CA bundle of the authority service and AuthorityPublicKey the PEM
	// PUBLIC KEY block(s) verifying its authorities, given to the sidecar as the values of
	// ACTGATE_AUTHORITY_CA and ACTGATE_AUTHORITY_PUBLIC_KEY. They are not read from a
	// configuration file: the pod handler loads them from the files webhook.Config.Authority
	// names for each pod (they rotate). Empty leaves the sidecar without them (it then uses
	// the system roots, and without a public key it does not start: no call is forwarded).
	AuthorityCA        string `json:"-"`
	AuthorityPublicKey string `json:"-"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Default returns a copy of c with defaults filled in.
func (c Config) Default() Config {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.MetricsPort == nil {
		p := int32(DefaultMetricsPort)
		c.MetricsPort = &p
	}
	if c.AuthorityAudience == "" {
		c.AuthorityAudience = DefaultAuthorityAudience
	}
	if c.TokenExpirationSeconds == 0 {
		c.TokenExpirationSeconds = DefaultTokenExpirationSeconds
	}
	if c.RunAsUser == 0 {
		c.RunAsUser = DefaultRunAsUser
	}
	if c.URLEnv == nil {
		c.URLEnv = []string{DefaultURLEnv}
	}
	if c.Template == "" {
		c.Template = DefaultTemplate
	}
	if c.UpstreamCA != nil && c.UpstreamCA.Key == "" {
		u := *c.UpstreamCA
		u.Key = DefaultUpstreamCAKey
		c.UpstreamCA = &u
	}
	return c
}

// Validate checks a defaulted Config.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Image == "" {
		bad("image is required")
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("port %d is not a TCP port", c.Port)
	}
	if m := c.metricsPort(); m < 0 || m > 65535 {
		bad("metricsPort %d is not a TCP port (0 disables metrics)", m)
	} else if m == c.Port {
		bad("metricsPort %d is the sidecar's port: the metrics listener binds every address, 127.0.0.1 included, so both cannot listen", m)
	}
	if u, err := url.Parse(c.AuthorityURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		bad("authorityURL %q must be an absolute http(s) URL", c.AuthorityURL)
	}
	if c.TokenExpirationSeconds < 600 {
		bad("tokenExpirationSeconds %d is below the API server's minimum of 600", c.TokenExpirationSeconds)
	}
	if c.RunAsUser <= 0 {
		bad("runAsUser must be a non-root UID")
	}
	for _, n := range c.URLEnv {
		if !envName.MatchString(n) {
			bad("urlEnv %q is not an environment variable name", n)
		}
	}
	if t := c.Tracing; t != nil {
		switch {
		case t.Endpoint == "" && t.SampleRatio != nil:
			bad("tracing.sampleRatio is set but tracing.endpoint is empty")
		case t.SampleRatio != nil && (math.IsNaN(*t.SampleRatio) || *t.SampleRatio < 0 || *t.SampleRatio > 1):
			bad("tracing.sampleRatio %v is not within [0, 1]", *t.SampleRatio)
		}
		if u, err := url.Parse(t.Endpoint); t.Endpoint != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil) {
			bad("tracing.endpoint %q must be an absolute http(s) URL without user info", t.Endpoint)
		}
	}
	errs = append(errs, c.UpstreamCA.validate()...)
	if _, err := parseTemplate(c.Template); err != nil {
		bad("template: %w", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// UpstreamCA names the key holding the sidecar's upstream CA bundle: in ConfigMap or in Secret
// (exactly one), key Key (default ca.crt).
type UpstreamCA struct {
	ConfigMap string `json:"configMap,omitempty"`
	Secret    string `json:"secret,omitempty"`
	Key       string `json:"key,omitempty"`
}

// DefaultUpstreamCAKey is UpstreamCA.Key's default.
const DefaultUpstreamCAKey = "ca.crt"

// validate checks a defaulted UpstreamCA; nil (absent) is valid.
func (u *UpstreamCA) validate() []error {
	if u == nil {
		return nil
	}
	var errs []error
	switch {
	case (u.ConfigMap == "") == (u.Secret == ""):
		errs = append(errs, errors.New("upstreamCA needs exactly one of configMap and secret"))
	case u.ConfigMap != "" && len(validation.IsDNS1123Subdomain(u.ConfigMap)) > 0:
		errs = append(errs, fmt.Errorf("upstreamCA.configMap %q is not a ConfigMap name", u.ConfigMap))
	case u.Secret != "" && len(validation.IsDNS1123Subdomain(u.Secret)) > 0:
		errs = append(errs, fmt.Errorf("upstreamCA.secret %q is not a Secret name", u.Secret))
	}
	if e := validation.IsConfigMapKey(u.Key); len(e) > 0 {
		errs = append(errs, fmt.Errorf("upstreamCA.key %q is not a key: %s", u.Key, strings.Join(e, "; ")))
	}
	return errs
}

// Tracing is the sidecar's OpenTelemetry export.
type Tracing struct {
	// Endpoint is the OTLP/HTTP traces URL, e.g.
	// http://otel-collector.observability:4318/v1/traces. Empty: off.
	Endpoint string `json:"endpoint,omitempty"`
	// SampleRatio is the fraction of new traces recorded, in [0, 1]; absent: 1.
	SampleRatio *float64 `json:"sampleRatio,omitempty"`
}

// tracingEnv returns the values of ACTGATE_TRACING_ENDPOINT and ACTGATE_TRACING_SAMPLE_RATIO
// ("" when unset).
func (c *Config) tracingEnv() (endpoint, ratio string) {
	if c.Tracing == nil || c.Tracing.Endpoint == "" {
		return "", ""
	}
	if c.Tracing.SampleRatio != nil {
		ratio = strconv.FormatFloat(*c.Tracing.SampleRatio, 'g', -1, 64)
	}
	return c.Tracing.Endpoint, ratio
}

// metricsPort is the sidecar's metrics port, 0 when disabled (or not defaulted).
func (c *Config) metricsPort() int32 {
	if c.MetricsPort == nil {
		return 0
	}
	return *c.MetricsPort
}
