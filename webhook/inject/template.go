package inject

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// DefaultTemplate is the built-in sidecar template (sidecar.yaml.tmpl).
//
//go:embed sidecar.yaml.tmpl
var DefaultTemplate string

// TemplateData is what a sidecar template sees.
type TemplateData struct {
	// Config is the defaulted injector configuration.
	Config Config
	// Listen is the sidecar's listen address, 127.0.0.1:<Config.Port>.
	Listen string
	// MetricsListen is the sidecar's metrics address, ":<Config.MetricsPort>", and MetricsPort
	// that port; "" and 0 when metrics are disabled.
	MetricsListen string
	MetricsPort   int32
	// TracingEndpoint and TracingSampleRatio are the sidecar's ACTGATE_TRACING_ENDPOINT and
	// ACTGATE_TRACING_SAMPLE_RATIO; "" when tracing is off (or the ratio is the default).
	TracingEndpoint, TracingSampleRatio string
	// PrometheusAnnotations is true when the template should set the prometheus.io/scrape,
	// port and path annotations: metrics are enabled and the pod carries no prometheus.io/
	// annotation of its own (its own scrape configuration wins, whole).
	PrometheusAnnotations bool
	// Policies are the selecting ToolPolicies as namespace/name, sorted.
	Policies []string
	// ServerNames are the protected servers' names in policy then spec order.
	ServerNames []string
	// ServerURLs are the same servers as NAME=URL (the policies' spec.servers[].url).
	ServerURLs []string
	// SinkID is the sink id of the selecting policies (spec.sink.id, when they name one) or an
	// expression of the pod's own namespace and name, expanded by the kubelet.
	SinkID string
	// Credentials are the credential Secrets to project into VolumeCredentials, in order of
	// first use; empty when no server has a credentialsSecretRef.
	Credentials []CredentialSecret
	// ServiceAccountTokens are the projected service-account tokens the servers' token exchange
	// needs (spec.servers[].auth), in VolumeCredentials too.
	ServiceAccountTokens []ServiceAccountToken
	// UpstreamOAuth is the sidecar's ACTGATE_UPSTREAM_OAUTH: the servers' auth settings as JSON,
	// files relative to CredentialsDir; empty when no server has auth.
	UpstreamOAuth string
	// AgentOAuth is the sidecar's ACTGATE_AGENT_OAUTH: the policy's spec.agentAuth as JSON;
	// empty without one.
	AgentOAuth string
	// MovedEnv, MovedEnvFrom and MovedVolumes are the credential references taken from agent
	// containers, which the sidecar gets instead (MovedVolumes are pod volume names, mounted
	// under MovedDir).
	MovedEnv     []corev1.EnvVar
	MovedEnvFrom []corev1.EnvFromSource
	MovedVolumes []string

	// The fixed names, so a template need not repeat them.
	SidecarName, SidecarBinary                                string
	VolumeToken, VolumeCredentials, VolumeJournal             string
	VolumeUpstreamCA, UpstreamCADir, UpstreamCAFile           string
	TokenDir, TokenFile, CredentialsDir, MovedDir, JournalDir string
	MetricsPortName, MetricsPath                              string
	AnnotationPrometheusScrape, AnnotationPrometheusPort      string
	AnnotationPrometheusPath                                  string
}

// CredentialSecret is one Secret projected into the credentials volume.
type CredentialSecret struct {
	Secret string
	Items  []CredentialItem
}

// CredentialItem maps one key of the Secret to <server>/credential.
type CredentialItem struct {
	Key, Path string
}

func parseTemplate(text string) (*template.Template, error) {
	return template.New("sidecar").Option("missingkey=error").Funcs(template.FuncMap{
		"toJSON": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"join": strings.Join,
	}).Parse(text)
}

// render executes the template and decodes the fragment strictly into a Pod.
func render(text string, data *TemplateData) (*corev1.Pod, error) {
	t, err := parseTemplate(text)
	if err != nil {
		return nil, fmt.Errorf("parse sidecar template: %w", err)
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render sidecar template: %w", err)
	}
	overlay := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(b.String()), overlay); err != nil {
		return nil, fmt.Errorf("sidecar template rendered an invalid Pod fragment: %w", err)
	}
	return overlay, nil
}
