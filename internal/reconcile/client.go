package reconcile

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// DefaultTimeout bounds one query when Client.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Endpoint is one reconciliation endpoint and the secrets to talk to it.
type Endpoint struct {
	// URL is ToolServer.reconciliation.url.
	URL string
	// Token is the bearer token presented to the endpoint.
	Token string
	// MACKey authenticates answers; at least MinMACKeyBytes.
	MACKey []byte
	// RootCAs verifies the endpoint's certificate; nil means the system roots.
	RootCAs *x509.CertPool
}

// Client asks reconciliation endpoints. The zero value is usable: HTTPS only, DefaultTimeout.
type Client struct {
	// Timeout bounds one query, connection to last byte; zero means DefaultTimeout.
	Timeout time.Duration
	// AllowHTTP permits plain http endpoints (in-cluster test backends). The MAC still
	// authenticates the answer, but the bearer token travels in the clear.
	AllowHTTP bool
	// Nonce returns a fresh query nonce; nil means 128 bits from crypto/rand. Tests set it to
	// replay answers.
	Nonce func() string
}

// Ask sends q (with a fresh nonce) to ep and returns the authenticated, well-formed answer, or
// an error wrapping exactly one of the package's sentinels. It does not judge whether the answer
// matches q beyond the nonce: Judge does.
func (c *Client) Ask(ctx context.Context, ep Endpoint, q Query) (Answer, error) {
	u, err := url.Parse(ep.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return Answer{}, errorf(ErrConfig, "url is not an absolute http(s) URL")
	}
	if u.Scheme == "http" && !c.AllowHTTP {
		return Answer{}, errorf(ErrConfig, "plain http endpoint refused (the bearer token would travel in the clear)")
	}
	if ep.Token == "" {
		return Answer{}, errorf(ErrConfig, "no bearer token")
	}
	if len(ep.MACKey) < MinMACKeyBytes {
		return Answer{}, errorf(ErrConfig, "response MAC key of %d bytes is shorter than %d", len(ep.MACKey), MinMACKeyBytes)
	}
	q.Nonce = c.nonce()
	body, err := EncodeQuery(q)
	if err != nil {
		return Answer{}, err
	}

	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return Answer{}, errorf(ErrConfig, "build request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+ep.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	transport := &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		TLSClientConfig:   &tls.Config{RootCAs: ep.RootCAs, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}
	defer transport.CloseIdleConnections()
	hc := &http.Client{
		Transport: transport,
		// The token goes to the declared URL only.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := hc.Do(req)
	if err != nil {
		if certificateError(err) {
			return Answer{}, errorf(ErrUnauthenticated, "server certificate: %v", err)
		}
		return Answer{}, errorf(ErrUnreachable, "%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Answer{}, errorf(ErrUnreachable, "HTTP status %d", resp.StatusCode)
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return Answer{}, errorf(ErrUnreachable, "read answer: %v", err)
	}
	if len(answer) > MaxAnswerBytes {
		return Answer{}, errorf(ErrUnreachable, "answer longer than %d bytes", MaxAnswerBytes)
	}
	// Authenticate before parsing: unauthenticated bytes are never interpreted.
	if err := Verify(ep.MACKey, answer, resp.Header.Get(SignatureHeader)); err != nil {
		return Answer{}, err
	}
	a, err := ParseAnswer(answer)
	if err != nil {
		return Answer{}, err
	}
	if a.Nonce != q.Nonce {
		return Answer{}, errorf(ErrReplayed, "answer carries another query's nonce")
	}
	return a, nil
}

func (c *Client) nonce() string {
	if c.Nonce != nil {
		return c.Nonce()
	}
	var b [nonceBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// certificateError reports whether err is a failure to verify the server's certificate (an
// authentication failure), as opposed to a failure to connect.
func certificateError(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr)
}

// String describes an endpoint without its secrets, for logs.
func (ep Endpoint) String() string {
	return fmt.Sprintf("reconciliation endpoint %s", ep.URL)
}
