package gateconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/strictyaml"
)

// Defaults.
const (
	DefaultListen      = "127.0.0.1:8787"
	DefaultSinkID      = "actgate-local"
	DefaultCallTimeout = 60 * time.Second
	// DefaultMomentTTL is how long a binding moment awaits its principals when momentTTL is
	// not set (the sink's default).
	DefaultMomentTTL = 15 * time.Minute
	// MaxMomentTTL bounds momentTTL: a moment is for a decision a person makes while the agent
	// waits, and its record is kept for the retention window of settled moments.
	MaxMomentTTL = 24 * time.Hour
	// DefaultMetricsAddress is where `actgate serve` answers /metrics when metrics.address is
	// not set: loopback, beside DefaultListen.
	DefaultMetricsAddress = "127.0.0.1:9787"
	// MetricsOff as metrics.address disables the metrics listener.
	MetricsOff = "off"
	// MaxFileBytes bounds a configuration file.
	MaxFileBytes = 2 << 20
	// PolicyName is the name compiled policies carry in decisions, receipts and logs.
	PolicyName = "local/actgate"
)

// ErrConfig is matched (errors.Is) by every error about a file's content.
var ErrConfig = errors.New("gateconfig: invalid configuration")

// Config is the content of an `actgate serve` configuration file.
type Config struct {
	// Listen is the host:port of the gate's HTTP listener (MCP at /mcp/{server}, the moments
	// API at /v1/moments). It must be a loopback address. Default DefaultListen.
	Listen string `json:"listen,omitempty"`
	// ExternalURL is the gate's URL as agents reach it (http://HOST:PORT on loopback, or the
	// https URL of a TLS-terminating proxy in front of listen), without a path. It names the
	// gate as an OAuth protected resource (agent.oauth; docs/security.md "Agents behind the
	// organisation's IdP"). Default http://LISTEN when listen has a fixed port.
	ExternalURL string `json:"externalURL,omitempty"`
	// DataDir holds the store (actgate.db), the receipt log (receipts.jsonl), the keys and the
	// principal tokens. Created with mode 0700 if missing. Required.
	DataDir string `json:"dataDir"`
	// SinkID is this sink's identity, bound into every authority. Default DefaultSinkID, or
	// policy.sink.id when the policy names one (they must agree when both are set).
	SinkID string `json:"sinkID,omitempty"`
	// Agent is the agent behind this gate.
	Agent Agent `json:"agent"`
	// Agents are more agents the gate serves, each with its own token (agents.go).
	Agents []ExtraAgent `json:"agents,omitempty"`
	// Limits bound the sessions and pending moments agents can open, and request reading.
	Limits Limits `json:"limits,omitempty"`
	// Principals may resolve binding moments through the local API. Every principal a
	// human-gated rule names should be here.
	Principals []Principal `json:"principals,omitempty"`
	// Upstreams carries per-server settings, today the credential presented upstream.
	Upstreams []Upstream `json:"upstreams,omitempty"`
	// CallTimeout bounds one upstream tools/call once dispatched, as a Go duration ("60s"),
	// from 1s to 10m. Default DefaultCallTimeout. Read it with Timeout.
	CallTimeout string `json:"callTimeout,omitempty"`
	// MomentTTL bounds how long a binding moment awaits its principals, as a Go duration
	// ("15m"), from 1s to MaxMomentTTL; past it the moment is expired, stays expired across
	// restarts (its expiry is stored with it), and resolving it is refused. Default
	// DefaultMomentTTL. Read it with MomentExpiry.
	MomentTTL string `json:"momentTTL,omitempty"`
	// Policy is the ToolPolicy spec the gate enforces.
	Policy v1alpha1.ToolPolicySpec `json:"policy"`
	// Metrics configures the Prometheus endpoint (internal/metrics).
	Metrics Metrics `json:"metrics,omitempty"`
	// Notifications announces pending binding moments to outgoing webhooks
	// (notifications.go). Optional.
	Notifications *Notifications `json:"notifications,omitempty"`
	// Reconciliation tunes the settling of INDETERMINATE dispatches by the servers'
	// reconciliation endpoints (upstreams[].reconciliation).
	Reconciliation Reconciliation `json:"reconciliation,omitempty"`
	// Tracing exports OpenTelemetry traces over OTLP/HTTP (tracing.go). Off by default.
	Tracing Tracing `json:"tracing,omitempty"`
	// Approval serves the binding-moment page over the network to principals who sign in
	// with OpenID Connect (approval.go). Off by default.
	Approval *Approval `json:"approval,omitempty"`

	// dir is the directory of the file, for resolving relative paths.
	dir string
	// noAgentOAuth, when set, is why upstreams[].oauth.subject: agent is refused (the sidecar's
	// settings, ParseUpstreamOAuth).
	noAgentOAuth string
	// callTimeout is CallTimeout parsed.
	callTimeout time.Duration
	// momentTTL is MomentTTL parsed, or its default.
	momentTTL time.Duration
	// reconcileInterval is Reconciliation.Interval parsed, or its default.
	reconcileInterval time.Duration
	// readTimeout is Limits.ReadTimeout parsed, or its default.
	readTimeout time.Duration
}

// Timeout returns CallTimeout as a duration (the default when unset).
func (c *Config) Timeout() time.Duration { return c.callTimeout }

// MomentExpiry returns MomentTTL as a duration (the default when unset).
func (c *Config) MomentExpiry() time.Duration { return c.momentTTL }

// ReconcileInterval is reconciliation.interval, defaulted.
func (c *Config) ReconcileInterval() time.Duration { return c.reconcileInterval }

// Agent is the agent behind the gate.
type Agent struct {
	// Name is the agent's identity (sink.Call.Agent). Required.
	Name string `json:"name"`
	// TrustDeclaredProvenance passes the instruction provenance the MCP client declares in
	// tools/call params._meta to policy; without it provenance is unknown (see
	// internal/mcpproxy).
	TrustDeclaredProvenance bool `json:"trustDeclaredProvenance,omitempty"`
	// Authentication is how the gate knows a request to /mcp/{server} comes from this agent:
	// AuthToken (the default: a bearer token read from TokenFile), AuthOAuth (an access token
	// of the identity provider in OAuth) or AuthNone.
	Authentication string `json:"authentication,omitempty"`
	// TokenFile holds the agent's token (AuthToken). Default DataDir/agents/NAME.token,
	// created on first start.
	TokenFile string `json:"tokenFile,omitempty"`
	// OAuth configures AuthOAuth: agents present JWT access tokens of the organisation's
	// identity provider (oauth.go).
	OAuth *AgentOAuth `json:"oauth,omitempty"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Address is the host:port of the plain-HTTP /metrics listener. It must be a loopback
	// address other than listen. Default DefaultMetricsAddress; MetricsOff ("off") disables
	// it. Read it with MetricsAddress.
	Address string `json:"address,omitempty"`
}

// MetricsAddress returns the metrics listener's address ("" when disabled) and whether the
// file set it (an address the file names must be bound; the default may be taken by another
// gate on the same machine).
func (c *Config) MetricsAddress() (addr string, explicit bool) {
	switch c.Metrics.Address {
	case "":
		return DefaultMetricsAddress, false
	case MetricsOff:
		return "", true
	}
	return c.Metrics.Address, true
}

// Principal is a person who may resolve binding moments.
type Principal struct {
	// Name is the principal's identity, as policy rules name it in evidence.principals.
	Name string `json:"name"`
}

// Upstream is per-server configuration.
type Upstream struct {
	// Server is a policy.servers[].name.
	Server string `json:"server"`
	// BearerTokenFile is a file holding the token the gate presents to the server
	// (Authorization: Bearer). It is read for every upstream request, so it can be rotated in
	// place. The agent never sees it.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	// OAuth, instead of BearerTokenFile, has the gate obtain short-lived tokens for the
	// server from the organisation's identity provider (upstreamoauth.go).
	OAuth *UpstreamOAuth `json:"oauth,omitempty"`
	// Reconciliation holds the credentials of the server's reconciliation endpoint
	// (policy.servers[].reconciliation.url), through which the gate settles this server's
	// INDETERMINATE dispatches (internal/reconcile.Settler).
	Reconciliation *UpstreamReconciliation `json:"reconciliation,omitempty"`
}

// UpstreamReconciliation is where the credentials of a reconciliation endpoint are read from
// (the files of the Kubernetes Secret the cluster's ToolServer names; internal/reconcile's
// wire protocol). The token and MAC key files are checked at start and read again for every
// query, so they can be rotated in place; the CA file is read at start.
type UpstreamReconciliation struct {
	// BearerTokenFile holds the token the gate presents to the endpoint. Required.
	BearerTokenFile string `json:"bearerTokenFile"`
	// MACKeyFile holds the key, at least 32 bytes, that authenticates the endpoint's answers.
	// Required.
	MACKeyFile string `json:"macKeyFile"`
	// CAFile, if set, is a PEM bundle verifying the endpoint's certificate instead of the
	// system roots.
	CAFile string `json:"caFile,omitempty"`
}

// Reconciliation tunes how the gate settles INDETERMINATE dispatches.
type Reconciliation struct {
	// Interval is how often the journal is scanned for INDETERMINATE dispatches whose next
	// attempt is due (each dispatch backs off from 30s to 30m between attempts); default 30s,
	// between 1s and 1h.
	Interval string `json:"interval,omitempty"`
}

// DefaultReconcileInterval is Reconciliation.Interval's default.
const DefaultReconcileInterval = 30 * time.Second

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	identity = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.:@/]*[A-Za-z0-9])?$`)
)

// Load reads and validates the configuration file at path. Relative paths in it are resolved
// against the file's directory.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	c, err := Parse(data, filepath.Dir(abs))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a configuration document; dir resolves relative paths ("" means
// the working directory).
func Parse(data []byte, dir string) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrConfig, MaxFileBytes)
	}
	j, err := strictyaml.MappingJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrConfig, oneLine(err.Error()))
	}
	var c Config
	if err := strictyaml.Unmarshal(j, &c); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrConfig, oneLine(err.Error()))
	}
	c.dir = dir
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// FieldError is one invalid field.
type FieldError struct {
	Field  string
	Detail string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Detail }

// Errors lists every invalid field of a configuration.
type Errors []FieldError

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return ErrConfig.Error() + ": " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrConfig) true.
func (es Errors) Is(target error) bool { return target == ErrConfig }

// validate checks every field, applies defaults and resolves paths.
func (c *Config) validate() error {
	var es Errors
	bad := func(field, format string, args ...any) {
		es = append(es, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}

	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if err := checkLoopback(c.Listen); err != nil {
		bad("listen", "%v", err)
	}
	if a := c.Metrics.Address; a != "" && a != MetricsOff {
		if err := checkLoopback(a); err != nil {
			bad("metrics.address", "%v (or %q)", err, MetricsOff)
		} else if a == c.Listen {
			bad("metrics.address", "must differ from listen")
		}
	}
	c.validateTracing(bad)
	if c.DataDir == "" {
		bad("dataDir", "required")
	} else {
		c.DataDir = c.resolve(c.DataDir)
	}

	policySink := ""
	if c.Policy.Sink != nil {
		policySink = c.Policy.Sink.ID
	}
	switch {
	case c.SinkID == "" && policySink != "":
		c.SinkID = policySink
	case c.SinkID == "":
		c.SinkID = DefaultSinkID
	case policySink != "" && policySink != c.SinkID:
		bad("sinkID", "%q differs from policy.sink.id %q: authorities would be refused", c.SinkID, policySink)
	}
	if !identity.MatchString(c.SinkID) || len(c.SinkID) > 253 {
		bad("sinkID", "must be 1-253 letters, digits and -_.:/@, beginning and ending alphanumeric")
	}

	if c.Agent.Name == "" {
		bad("agent.name", "required")
	} else if !identity.MatchString(c.Agent.Name) || len(c.Agent.Name) > 253 {
		bad("agent.name", "must be 1-253 letters, digits and -_.:/@, beginning and ending alphanumeric")
	}

	seen := map[string]bool{}
	for i, p := range c.Principals {
		f := fmt.Sprintf("principals[%d].name", i)
		switch {
		case !dnsLabel.MatchString(p.Name) || len(p.Name) > 63:
			bad(f, "must be a DNS label (it names the token file)")
		case seen[p.Name]:
			bad(f, "duplicate principal %q", p.Name)
		case p.Name == c.Agent.Name:
			bad(f, "the agent cannot be a principal: it would resolve its own escalations")
		case p.Name == c.SinkID:
			bad(f, "the sink cannot be a principal (separation of duties)")
		}
		seen[p.Name] = true
	}

	servers := map[string]bool{}
	serverURL := map[string]string{}
	for _, s := range c.Policy.Servers {
		servers[s.Name] = true
		serverURL[s.Name] = s.URL
	}
	seenUp := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		switch {
		case u.Server == "":
			bad(fmt.Sprintf("upstreams[%d].server", i), "required")
		case !servers[u.Server]:
			bad(fmt.Sprintf("upstreams[%d].server", i), "%q is not in policy.servers", u.Server)
		case seenUp[u.Server]:
			bad(fmt.Sprintf("upstreams[%d].server", i), "duplicate server %q", u.Server)
		}
		seenUp[u.Server] = true
		if u.BearerTokenFile != "" {
			u.BearerTokenFile = c.resolve(u.BearerTokenFile)
		}
		c.validateUpstreamOAuth(i, u, serverURL[u.Server], bad)
		if r := u.Reconciliation; r != nil {
			f := fmt.Sprintf("upstreams[%d].reconciliation", i)
			if r.BearerTokenFile == "" {
				bad(f+".bearerTokenFile", "required")
			}
			if r.MACKeyFile == "" {
				bad(f+".macKeyFile", "required: without it no answer can be authenticated")
			}
			for _, p := range []*string{&r.BearerTokenFile, &r.MACKeyFile, &r.CAFile} {
				if *p != "" {
					*p = c.resolve(*p)
				}
			}
			if servers[u.Server] && c.ReconciliationURL(u.Server) == "" {
				bad(f, "policy.servers %q declares no reconciliation.url", u.Server)
			}
		}
	}
	for i, s := range c.Policy.Servers {
		if s.CredentialsSecretRef != nil {
			bad(fmt.Sprintf("policy.servers[%d].credentialsSecretRef", i), "Secrets exist only in Kubernetes: set upstreams[].bearerTokenFile for %q instead", s.Name)
		}
		if s.Auth != nil {
			bad(fmt.Sprintf("policy.servers[%d].auth", i), "the sidecar's identity-provider settings: set upstreams[].oauth for %q instead", s.Name)
		}
		if r := s.Reconciliation; r != nil {
			f := fmt.Sprintf("policy.servers[%d].reconciliation", i)
			if r.CredentialsSecretRef != nil {
				bad(f+".credentialsSecretRef", "Secrets exist only in Kubernetes: set upstreams[].reconciliation for %q instead", s.Name)
			}
			if up := c.Upstream(s.Name); up.Reconciliation == nil {
				bad(f, "set upstreams[].reconciliation (bearerTokenFile, macKeyFile) for %q: without them no answer can be authenticated", s.Name)
			}
		}
		if s.Protocol != "" && s.Protocol != v1alpha1.ServerProtocolMCP {
			bad(fmt.Sprintf("policy.servers[%d].protocol", i), "the standalone gate proxies MCP servers only")
		}
	}

	c.callTimeout = boundedDuration(bad, "callTimeout", c.CallTimeout, DefaultCallTimeout, "60s", 10*time.Minute, "10m")
	c.momentTTL = boundedDuration(bad, "momentTTL", c.MomentTTL, DefaultMomentTTL, "15m", MaxMomentTTL, "24h")
	c.reconcileInterval = boundedDuration(bad, "reconciliation.interval", c.Reconciliation.Interval, DefaultReconcileInterval, "30s", time.Hour, "1h")

	c.validateNotifications(bad)
	c.validateApproval(bad)
	c.validateAgents(bad)

	if _, err := c.Compile(); err != nil {
		var ce *policy.CompileError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				bad(policyField(p.Field), "%s: %s", p.Reason, p.Detail)
			}
		} else {
			bad("policy", "%v", err)
		}
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

// boundedDuration parses field's value, def when it is empty, and reports through bad a value
// that is not a duration (the message gives example) or not between 1s and max (written maxText);
// def is returned for a bad value.
func boundedDuration(bad func(field, format string, args ...any), field, value string, def time.Duration, example string, max time.Duration, maxText string) time.Duration {
	if value == "" {
		return def
	}
	d, err := time.ParseDuration(value)
	switch {
	case err != nil:
		bad(field, "must be a duration such as %q", example)
	case d < time.Second || d > max:
		bad(field, "must be between 1s and %s", maxText)
	default:
		return d
	}
	return def
}

// ReconciliationURL is the reconciliation endpoint policy.servers declares for server, or "".
func (c *Config) ReconciliationURL(server string) string {
	for _, s := range c.Policy.Servers {
		if s.Name == server && s.Reconciliation != nil {
			return s.Reconciliation.URL
		}
	}
	return ""
}

// Compile compiles the policy (epoch 1: a standalone gate serves one policy per process).
func (c *Config) Compile() (*policy.Compiled, error) {
	spec := c.Policy.DeepCopy()
	if spec.Mode == "" {
		spec.Mode = v1alpha1.PolicyModeEnforce
	}
	return policy.Compile(PolicyName, spec, 1)
}

// Upstream returns the settings of a server ("" fields when none are configured).
func (c *Config) Upstream(server string) Upstream {
	for _, u := range c.Upstreams {
		if u.Server == server {
			return u
		}
	}
	return Upstream{Server: server}
}

// Credential returns what the gate's MCP proxy calls for the bearer token it presents to the
// server (mcpproxy.Config.Credential), or nil when none is configured. The file is read again
// at most fileutil.CredentialTTL after the last read, so it can be rotated in place; an
// unreadable or empty file fails the call, and the request is not sent. It is read once here too, so a gate does not start with a credential it
// cannot present.
func (u Upstream) Credential() (func(context.Context) (string, error), error) {
	if u.BearerTokenFile == "" {
		return nil, nil
	}
	file := u.BearerTokenFile
	if _, err := fileutil.ReadToken(file); err != nil {
		return nil, err
	}
	return fileutil.TokenSource(file, fileutil.CredentialTTL), nil
}

// Principal reports whether name is a configured principal.
func (c *Config) Principal(name string) bool {
	for _, p := range c.Principals {
		if p.Name == name {
			return true
		}
	}
	return false
}

// policyField maps a compile problem's path ("spec.rules[0]...") into this file's
// ("policy.rules[0]...").
func policyField(f string) string {
	if rest, ok := strings.CutPrefix(f, "spec"); ok {
		return "policy" + rest
	}
	return "policy." + f
}

func (c *Config) resolve(p string) string {
	if filepath.IsAbs(p) || c.dir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(c.dir, p)
}

// checkLoopback accepts host:port whose host is a loopback IP or "localhost".
func checkLoopback(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("must be host:port: %w", err)
	}
	if port == "" {
		return errors.New("a port is required")
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("host %q is not a loopback address: the gate's MCP endpoints and moments API are for this machine only", host)
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Files in DataDir.
const (
	StoreFile        = "actgate.db"       // bbolt: authorities and the dispatch journal
	ReceiptsFile     = "receipts.jsonl"   // the hash-chained receipt log
	AuthorityKeyFile = "authority.key"    // Ed25519 key signing authorities (PKCS#8 PEM, 0600)
	ReceiptKeyFile   = "receipts.key"     // Ed25519 key signing receipt checkpoints (0600)
	ReceiptPubFile   = "receipts.pub.pem" // its public key, for `actgate receipts verify --key`
	ActIDKeyFile     = "act-id.key"       // 32 random bytes: the act-id MAC key (0600)
	PrincipalsDir    = "principals"       // NAME.token per configured principal (0600)
	EndpointFile     = "endpoint"         // the URL the running gate serves on
)

// Path returns the path of a file in DataDir.
func (c *Config) Path(file string) string { return filepath.Join(c.DataDir, file) }

// PrincipalTokenPath returns the token file of a principal.
func (c *Config) PrincipalTokenPath(name string) string {
	return filepath.Join(c.DataDir, PrincipalsDir, name+".token")
}
