package gateconfig

import (
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// AuthOAuth: every request to /mcp/{server} carries a JWT access token of the organisation's
// identity provider (agent.oauth), whose audience is the gate (RFC 8707); a claim of the token
// names the agent. The gate is an OAuth 2.1 protected resource (RFC 9728; MCP authorization,
// docs/security.md "Agents behind the organisation's IdP").
const AuthOAuth = "oauth"

// Defaults and bounds of agent.oauth.
const (
	DefaultOAuthAgentClaim  = "sub"
	DefaultOAuthClockSkew   = 30 * time.Second
	DefaultOAuthJWKSRefresh = 30 * time.Second
	DefaultOAuthJWKSMaxAge  = time.Hour
)

// schemeHTTPS is the scheme every URL naming an identity provider or a non-loopback gate has.
const schemeHTTPS = "https"

// DefaultOAuthAlgorithms are the signature algorithms accepted when agent.oauth.algorithms is
// empty.
var DefaultOAuthAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}

// oauthAlgorithms are the asymmetric JWS algorithms agent.oauth.algorithms may list: never
// "none" and never an HMAC (HS*), whose key would be the published public key.
var oauthAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// AgentOAuth is agent.oauth: the identity provider whose access tokens name agents.
type AgentOAuth struct {
	// Issuer is the provider's issuer URL (https); tokens must carry it as iss exactly, and
	// its keys are discovered from ISSUER/.well-known/openid-configuration (jwks_uri) unless
	// JWKSURL is set. Required.
	Issuer string `json:"issuer"`
	// Audience is the aud a token must carry: the gate as a protected resource (RFC 8707).
	// Default externalURL. A token whose aud is a server's own resource
	// (EXTERNALURL/mcp/SERVER) is accepted for that server too.
	Audience string `json:"audience,omitempty"`
	// JWKSURL is the provider's key set (https). Default: discovered.
	JWKSURL string `json:"jwksURL,omitempty"`
	// CAFile is a PEM CA bundle for the provider's TLS (relative to the config file). Optional.
	CAFile string `json:"caFile,omitempty"`
	// Algorithms are the accepted JWS algorithms (default DefaultOAuthAlgorithms); only
	// asymmetric ones: "none" and HS* are refused.
	Algorithms []string `json:"algorithms,omitempty"`
	// AgentClaim is the claim whose string value names the agent (default "sub"; "azp" or
	// "client_id" for machine clients). AgentPrefix is put before it.
	AgentClaim  string `json:"agentClaim,omitempty"`
	AgentPrefix string `json:"agentPrefix,omitempty"`
	// Scopes a token must all carry (scope claim, space-separated; or scp, a list). Optional.
	Scopes []string `json:"scopes,omitempty"`
	// ClockSkew tolerated on exp, nbf and iat, a Go duration up to 5m. Default 30s.
	ClockSkew string `json:"clockSkew,omitempty"`
	// JWKSRefresh is the least time between two fetches of the key set that a token with an
	// unknown key id triggers, a Go duration from 1s to 1h. Default 30s.
	JWKSRefresh string `json:"jwksRefresh,omitempty"`
	// JWKSMaxAge is how long a fetched key set is used before it is fetched again, a Go
	// duration from 1s to 24h. Default 1h.
	JWKSMaxAge string `json:"jwksMaxAge,omitempty"`
	// Introspection, when set, admits opaque access tokens (not JWTs) by RFC 7662 token
	// introspection at the provider. Optional.
	Introspection *AgentIntrospection `json:"introspection,omitempty"`

	clockSkew, jwksRefresh, jwksMaxAge time.Duration
}

// AgentIntrospection is agent.oauth.introspection: the provider's RFC 7662 endpoint and the
// gate's client there.
type AgentIntrospection struct {
	// URL is the introspection endpoint (https). Required.
	URL string `json:"url"`
	// ClientID and ClientSecretFile (relative to the config file; read for every request)
	// authenticate the gate to the endpoint (client_secret_basic). Required.
	ClientID         string `json:"clientID"`
	ClientSecretFile string `json:"clientSecretFile"`
}

// Bounds returns ClockSkew, JWKSRefresh and JWKSMaxAge parsed, or their defaults.
func (o *AgentOAuth) Bounds() (clockSkew, jwksRefresh, jwksMaxAge time.Duration) {
	return o.clockSkew, o.jwksRefresh, o.jwksMaxAge
}

// validateOAuth checks externalURL and agent.oauth, applies defaults and resolves paths.
func (c *Config) validateOAuth(bad func(field, format string, args ...any)) {
	c.validateExternalURL(bad)
	o := c.Agent.OAuth
	if c.Agent.Authentication != AuthOAuth {
		if o != nil {
			bad("agent.oauth", "needs agent.authentication %q", AuthOAuth)
		}
		return
	}
	if o == nil {
		bad("agent.oauth", "required with agent.authentication %q", AuthOAuth)
		return
	}
	if c.ExternalURL == "" {
		bad("externalURL", "required with agent.authentication %q when listen has no fixed port", AuthOAuth)
	}
	c.validateOAuthURLs(bad)
	if len(o.Algorithms) == 0 {
		o.Algorithms = slices.Clone(DefaultOAuthAlgorithms)
	}
	for i, a := range o.Algorithms {
		if !slices.Contains(oauthAlgorithms, a) {
			bad("agent.oauth.algorithms["+itoa(i)+"]", "%q is not one of %s (never none or HS*)", a, strings.Join(oauthAlgorithms, ", "))
		}
	}
	if o.AgentClaim == "" {
		o.AgentClaim = DefaultOAuthAgentClaim
	}
	if strings.ContainsAny(o.AgentClaim, " \t\r\n") {
		bad("agent.oauth.agentClaim", "a claim name has no spaces")
	}
	for i, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			bad("agent.oauth.scopes["+itoa(i)+"]", "a scope is a non-empty token without spaces or quotes")
		}
	}
	if o.CAFile != "" {
		o.CAFile = c.resolve(o.CAFile)
	}
	o.clockSkew = DefaultOAuthClockSkew
	if o.ClockSkew != "" {
		d, err := time.ParseDuration(o.ClockSkew)
		if err != nil || d < 0 || d > 5*time.Minute {
			bad("agent.oauth.clockSkew", "must be a duration from 0s to 5m")
		} else {
			o.clockSkew = d
		}
	}
	if in := o.Introspection; in != nil {
		if u, err := url.Parse(in.URL); err != nil || u.Scheme != schemeHTTPS || u.Host == "" {
			bad("agent.oauth.introspection.url", "want the provider's https introspection endpoint")
		}
		if in.ClientID == "" || in.ClientSecretFile == "" {
			bad("agent.oauth.introspection", "clientID and clientSecretFile are required (the gate authenticates to the endpoint)")
		} else {
			in.ClientSecretFile = c.resolve(in.ClientSecretFile)
		}
	}
	o.jwksRefresh = boundedDuration(bad, "agent.oauth.jwksRefresh", o.JWKSRefresh, DefaultOAuthJWKSRefresh, "30s", time.Hour, "1h")
	o.jwksMaxAge = boundedDuration(bad, "agent.oauth.jwksMaxAge", o.JWKSMaxAge, DefaultOAuthJWKSMaxAge, "1h", 24*time.Hour, "24h")
}

// validateExternalURL checks externalURL, or defaults it to http://LISTEN.
func (c *Config) validateExternalURL(bad func(field, format string, args ...any)) {
	if c.ExternalURL != "" {
		switch u, err := url.Parse(c.ExternalURL); {
		case err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad("externalURL", "want http(s)://HOST[:PORT] without a path")
		case u.Scheme == "http" && loopbackHost(u.Hostname()):
		case u.Scheme != schemeHTTPS:
			bad("externalURL", "must be https (http only to a loopback host)")
		}
		c.ExternalURL = strings.TrimSuffix(c.ExternalURL, "/")
	} else if _, port, err := net.SplitHostPort(c.Listen); err == nil && port != "0" {
		c.ExternalURL = "http://" + c.Listen
	}
}

// validateOAuthURLs checks agent.oauth's issuer, jwksURL and audience.
func (c *Config) validateOAuthURLs(bad func(field, format string, args ...any)) {
	o := c.Agent.OAuth
	if u, err := url.Parse(o.Issuer); err != nil || u.Scheme != schemeHTTPS || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		bad("agent.oauth.issuer", "want an https issuer URL")
	}
	if o.JWKSURL != "" {
		if u, err := url.Parse(o.JWKSURL); err != nil || u.Scheme != schemeHTTPS || u.Host == "" {
			bad("agent.oauth.jwksURL", "want an https URL")
		}
	}
	if o.Audience == "" {
		if c.ExternalURL == "" {
			bad("agent.oauth.audience", "required when externalURL is not set and listen has no fixed port")
		}
		o.Audience = c.ExternalURL
	}
}

// loopbackHost reports whether host (no port) is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	return checkLoopback(net.JoinHostPort(host, "1")) == nil
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
