package gateconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/strictyaml"
	"github.com/actgate/actgate/internal/upstreamauth"
)

// UpstreamOAuth is how the gate obtains, from the organisation's identity provider, the
// short-lived token it presents to the server instead of a static one (docs/identity.md "Gate
// → upstream"): client credentials (RFC 6749 §4.4) with a client secret or a private-key JWT
// (RFC 7523 §2.2), or token exchange (RFC 8693) of a workload identity token. The token names
// the server's URL as its resource (RFC 8707); it is cached until shortly before it expires,
// never logged and never shown to the agent, and the agent's own token is never passed on.
// Files are read for every request to the provider, so they can be rotated in place.
type UpstreamOAuth struct {
	// Grant is "client_credentials" or "token_exchange".
	Grant string `json:"grant"`
	// TokenURL is the provider's token endpoint (https).
	TokenURL string `json:"tokenURL"`
	// ClientID is the gate's client at the provider (optional for token exchange when the
	// provider does not authenticate the client).
	ClientID string `json:"clientID,omitempty"`
	// ClientSecretFile holds the client secret (client_secret_basic).
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	// PrivateKeyFile holds the client's PEM private key for private_key_jwt.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// KeyID is the assertion's kid; default the key's JWK thumbprint (RFC 7638).
	KeyID string `json:"keyID,omitempty"`
	// AssertionAudience is the assertion's aud; default TokenURL.
	AssertionAudience string `json:"assertionAudience,omitempty"`
	// SubjectTokenFile holds the workload identity token token exchange exchanges.
	SubjectTokenFile string `json:"subjectTokenFile,omitempty"`
	// SubjectTokenType is its RFC 8693 token type; default urn:ietf:params:oauth:token-type:jwt
	// (urn:ietf:params:oauth:token-type:access_token for subject: agent).
	SubjectTokenType string `json:"subjectTokenType,omitempty"`
	// Subject "agent" exchanges, instead of a subject token file, the access token the agent
	// of the call signed in to the gate with (agent.authentication: oauth), so that the
	// upstream's token names the person or agent the call is for (docs/identity.md "On behalf
	// of the agent"). Empty: the subject token file.
	Subject string `json:"subject,omitempty"`
	// ActorTokenFile, if set, holds the gate's own identity token, sent as actor_token (RFC
	// 8693 §2.1; delegation, §1.1).
	ActorTokenFile string `json:"actorTokenFile,omitempty"`
	// ActorTokenType is its RFC 8693 token type; default urn:ietf:params:oauth:token-type:jwt.
	ActorTokenType string `json:"actorTokenType,omitempty"`
	// MaxAgentTokens bounds the agent tokens whose exchanged upstream tokens are cached for
	// subject: agent; default 10000. At the bound the entry expiring soonest is dropped.
	MaxAgentTokens int `json:"maxAgentTokens,omitempty"`
	// Resource is sent as resource (RFC 8707); default the server's URL.
	Resource string `json:"resource,omitempty"`
	// Audience is the token exchange audience; default Resource.
	Audience string `json:"audience,omitempty"`
	// Scopes are asked for, if any.
	Scopes []string `json:"scopes,omitempty"`
	// CAFile, if set, is a PEM bundle verifying the provider's certificate instead of the
	// system roots.
	CAFile string `json:"caFile,omitempty"`
}

// validateUpstreamOAuth resolves u.OAuth's paths and checks it, for the server at serverURL.
func (c *Config) validateUpstreamOAuth(i int, u *Upstream, serverURL string, bad func(field, format string, args ...any)) {
	o := u.OAuth
	if o == nil {
		return
	}
	f := fmt.Sprintf("upstreams[%d].oauth", i)
	if u.BearerTokenFile != "" {
		bad(f, "set either bearerTokenFile or oauth for %q, not both", u.Server)
	}
	switch o.Subject {
	case "":
	case SubjectAgent:
		if o.Grant != string(upstreamauth.GrantTokenExchange) {
			bad(f+".subject", "%q is for grant %s", SubjectAgent, upstreamauth.GrantTokenExchange)
		}
		if c.noAgentOAuth != "" {
			bad(f+".subject", "%s", c.noAgentOAuth)
		} else if c.Agent.Authentication != AuthOAuth {
			// Only an agent signed in with the identity provider has a token to exchange; a call
			// with a static agent token would otherwise be refused at every dispatch.
			bad(f+".subject", "%q needs agent.authentication: %s", SubjectAgent, AuthOAuth)
		}
	default:
		bad(f+".subject", "must be empty or %q", SubjectAgent)
	}
	if o.MaxAgentTokens < 0 {
		bad(f+".maxAgentTokens", "must not be negative")
	}
	for _, p := range []*string{&o.ClientSecretFile, &o.PrivateKeyFile, &o.SubjectTokenFile, &o.ActorTokenFile, &o.CAFile} {
		if *p != "" {
			*p = c.resolve(*p)
		}
	}
	if o.CAFile != "" {
		if _, err := fileutil.ReadCertPool(o.CAFile, false); err != nil {
			bad(f+".caFile", "%v", err)
		}
	}
	if err := o.check(serverURL); err != nil {
		bad(f, "%v", err)
	}
}

// SubjectAgent is UpstreamOAuth.Subject for the agent's own token.
const SubjectAgent = "agent"

func (o *UpstreamOAuth) check(serverURL string) error {
	sc := o.sourceConfig(serverURL, nil)
	if sc.SubjectAgent {
		_, err := upstreamauth.NewAgentSource(sc, o.MaxAgentTokens)
		return err
	}
	_, err := upstreamauth.New(sc)
	return err
}

func (o *UpstreamOAuth) sourceConfig(serverURL string, hc *http.Client) upstreamauth.Config {
	res := o.Resource
	if res == "" {
		res = serverURL
	}
	return upstreamauth.Config{
		Grant: upstreamauth.Grant(o.Grant), TokenURL: o.TokenURL, ClientID: o.ClientID,
		ClientSecretFile: o.ClientSecretFile, PrivateKeyFile: o.PrivateKeyFile, KeyID: o.KeyID, AssertionAudience: o.AssertionAudience,
		SubjectTokenFile: o.SubjectTokenFile, SubjectTokenType: o.SubjectTokenType, SubjectAgent: o.Subject == SubjectAgent,
		ActorTokenFile: o.ActorTokenFile, ActorTokenType: o.ActorTokenType,
		Resource: res, Audience: o.Audience, Scopes: o.Scopes, HTTPClient: hc,
	}
}

// UpstreamCredential is what the gate's MCP proxy presents to one server.
type UpstreamCredential struct {
	// Token returns the bearer token (mcpproxy.Config.Credential); nil: none.
	Token func(context.Context) (string, error)
	// Rejected drops a token the server refused with HTTP 401 (mcpproxy.Config.CredentialRejected);
	// nil for a static token.
	Rejected func(string)
}

// UpstreamCredential returns the credential the gate presents to the server at serverURL: a
// token of its identity provider (upstreams[].oauth), the static token of bearerTokenFile, or
// none.
func (u Upstream) UpstreamCredential(serverURL string) (UpstreamCredential, error) {
	if u.OAuth == nil {
		tok, err := u.Credential()
		if err != nil {
			return UpstreamCredential{}, fmt.Errorf("bearerTokenFile: %w", err)
		}
		return UpstreamCredential{Token: tok}, nil
	}
	sc, err := u.OAuth.SourceConfig(serverURL)
	if err != nil {
		return UpstreamCredential{}, fmt.Errorf("oauth: %w", err)
	}
	if sc.SubjectAgent {
		s, err := upstreamauth.NewAgentSource(sc, u.OAuth.MaxAgentTokens)
		if err != nil {
			return UpstreamCredential{}, fmt.Errorf("oauth: %w", err)
		}
		return UpstreamCredential{Token: s.Token, Rejected: s.Invalidate}, nil
	}
	s, err := upstreamauth.New(sc)
	if err != nil {
		return UpstreamCredential{}, fmt.Errorf("oauth: %w", err)
	}
	return UpstreamCredential{Token: s.Token, Rejected: s.Invalidate}, nil
}

// SourceConfig is o as an upstreamauth.Config for the server at serverURL, with an HTTP client
// that trusts CAFile (or the system roots) and never follows a token endpoint's redirect (the
// client's credentials would go to another URL).
func (o *UpstreamOAuth) SourceConfig(serverURL string) (upstreamauth.Config, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pool, err := fileutil.ReadCertPool(o.CAFile, false)
		if err != nil {
			return upstreamauth.Config{}, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: tr, Timeout: upstreamauth.FetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return o.sourceConfig(serverURL, hc), nil
}

// maxOAuthFile bounds an OAuth settings file (LoadUpstreamOAuth).
const maxOAuthFile = 64 << 10

// LoadUpstreamOAuth reads a file of UpstreamOAuth settings (YAML or JSON, unknown fields
// refused; the sidecar's --upstream-oauth), resolving relative paths against its directory, and
// checks them for the server at serverURL; agentOAuth says whether the sidecar verifies agents'
// OAuth tokens (--agent-oauth), which subject "agent" needs.
func LoadUpstreamOAuth(path, serverURL string, agentOAuth bool) (*UpstreamOAuth, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxOAuthFile+1))
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	o, err := ParseUpstreamOAuth(data, filepath.Dir(abs), serverURL, agentOAuth)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// ParseUpstreamOAuth decodes UpstreamOAuth settings (YAML or JSON, unknown fields refused),
// resolves relative paths against dir, and checks them for the server at serverURL (the
// injector's ACTGATE_UPSTREAM_OAUTH, one server's member). Subject "agent" is accepted only
// when agentOAuth: a sidecar that verifies no agent token has none to exchange.
func ParseUpstreamOAuth(data []byte, dir, serverURL string, agentOAuth bool) (*UpstreamOAuth, error) {
	if len(data) > maxOAuthFile {
		return nil, fmt.Errorf("larger than %d bytes", maxOAuthFile)
	}
	j, err := strictyaml.MappingJSON(data)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	var o UpstreamOAuth
	if err := strictyaml.Unmarshal(j, &o); err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	c := &Config{dir: dir, noAgentOAuth: "the sidecar verifies no agent's OAuth token (--agent-oauth), so it has none to exchange (subject: agent)"}
	if agentOAuth {
		c.noAgentOAuth, c.Agent.Authentication = "", AuthOAuth
	}
	var problems []string
	c.validateUpstreamOAuth(0, &Upstream{OAuth: &o}, serverURL, func(field, format string, args ...any) {
		if f := strings.TrimPrefix(strings.TrimPrefix(field, "upstreams[0].oauth"), "."); f != "" {
			format = f + ": " + format
		}
		problems = append(problems, fmt.Sprintf(format, args...))
	})
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &o, nil
}
