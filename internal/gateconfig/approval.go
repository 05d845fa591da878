package gateconfig

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// Approval serves the binding-moment page over the network to the configured principals
// when they sign in with OpenID Connect (internal/approval; docs/security.md "The approval
// service"). Off when absent: the loopback console (`actgate console`) stays the default.
type Approval struct {
	// Listen is the host:port the page is served on; unlike listen it may be any address.
	// Required.
	Listen string `json:"listen"`
	// ExternalURL is the page's URL as browsers reach it (https://HOST[:PORT], or http to a
	// loopback host): every request's Host and every POST's Origin must match it, and the
	// redirect URI registered at the provider is ExternalURL + "/callback". Required.
	ExternalURL string `json:"externalURL"`
	// Issuer is the OpenID provider's issuer URL (https). Required.
	Issuer string `json:"issuer"`
	// ClientID is the gate's client id at the provider. Required.
	ClientID string `json:"clientID"`
	// ClientSecretFile holds the client secret (relative to the config file). Optional (a
	// public client, PKCE only).
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	// CAFile is a PEM CA bundle for the issuer's TLS (relative to the config file). Optional.
	CAFile string `json:"caFile,omitempty"`
	// PrincipalClaim is the ID token claim naming the principal, a string (default "email";
	// an email is used only when email_verified is true). PrincipalPrefix is put before it.
	// The result must be one of principals[].name, or the sign-in is refused.
	PrincipalClaim  string `json:"principalClaim,omitempty"`
	PrincipalPrefix string `json:"principalPrefix,omitempty"`
	// SessionLifetime (default 15m) and StepUpMaxAge (default 5m) are Go durations: how long
	// a sign-in lasts, and the oldest authentication that may resolve a FINANCIAL, PHYSICAL or
	// NETWORK_CONTROL moment.
	SessionLifetime string `json:"sessionLifetime,omitempty"`
	StepUpMaxAge    string `json:"stepUpMaxAge,omitempty"`
	// TLSCertFile and TLSKeyFile serve HTTPS directly (relative to the config file); both or
	// neither.
	TLSCertFile string `json:"tlsCertFile,omitempty"`
	TLSKeyFile  string `json:"tlsKeyFile,omitempty"`

	sessionLifetime, stepUpMaxAge time.Duration
}

// Lifetimes returns SessionLifetime and StepUpMaxAge parsed (zero: the service's defaults).
func (a *Approval) Lifetimes() (session, stepUp time.Duration) {
	return a.sessionLifetime, a.stepUpMaxAge
}

// validateApproval checks the approval section and resolves its paths.
func (c *Config) validateApproval(bad func(field, format string, args ...any)) {
	a := c.Approval
	if a == nil {
		return
	}
	if _, _, err := net.SplitHostPort(a.Listen); err != nil {
		bad("approval.listen", "want host:port: %v", err)
	}
	switch u, err := url.Parse(a.ExternalURL); {
	case err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		bad("approval.externalURL", "want https://HOST[:PORT] without a path")
	case u.Scheme == "http" && checkLoopback(u.Host) == nil:
	case u.Scheme != schemeHTTPS:
		bad("approval.externalURL", "must be https (http only to a loopback host)")
	}
	if u, err := url.Parse(a.Issuer); err != nil || u.Scheme != schemeHTTPS || u.Host == "" {
		bad("approval.issuer", "want an https issuer URL")
	}
	if a.ClientID == "" {
		bad("approval.clientID", "required")
	}
	if a.PrincipalClaim == "" {
		a.PrincipalClaim = "email"
	}
	if strings.ContainsAny(a.PrincipalClaim, " \t\r\n") {
		bad("approval.principalClaim", "a claim name has no spaces")
	}
	for _, d := range []struct {
		field, v string
		out      *time.Duration
	}{{"approval.sessionLifetime", a.SessionLifetime, &a.sessionLifetime}, {"approval.stepUpMaxAge", a.StepUpMaxAge, &a.stepUpMaxAge}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v < time.Second || v > 24*time.Hour {
			bad(d.field, "want a Go duration from 1s to 24h")
		}
		*d.out = v
	}
	if (a.TLSCertFile == "") != (a.TLSKeyFile == "") {
		bad("approval.tlsCertFile", "tlsCertFile and tlsKeyFile go together")
	}
	for _, p := range []*string{&a.ClientSecretFile, &a.CAFile, &a.TLSCertFile, &a.TLSKeyFile} {
		if *p != "" {
			*p = c.resolve(*p)
		}
	}
}
